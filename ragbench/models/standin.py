"""The untrained ColBERT stand-in: MiniLM's encoder with a random, seeded projection in colbertv2.0's
layout, so the reranking path runs offline. Its scores are not ColBERT's, and it is labelled UNTRAINED
wherever they appear."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ragbench.models.errors import ModelResolutionError

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def write_colbert_checkpoint(
    dest: Path, *, config: dict, tensors: dict, tokenizer_dir: Path, dim: int, doc_maxlen: int = 180
) -> None:
    """The colbertv2.0 layout RAGatouille and colbert-ai load: BERT weights under ``bert.``, a float32
    ``linear.weight`` (dim x hidden), the tokenizer files, and an ``artifact.metadata`` deliberately
    without ``model_name`` (colbert-ai would otherwise load that model, i.e. download bert-base-uncased)."""
    from safetensors.numpy import save_file

    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
    for fname in _TOKENIZER_FILES:
        if (tokenizer_dir / fname).is_file():
            shutil.copyfile(tokenizer_dir / fname, dest / fname)
    artifact = {
        "query_token_id": "[unused0]",
        "doc_token_id": "[unused1]",
        "query_token": "[Q]",
        "doc_token": "[D]",
        "dim": dim,
        "doc_maxlen": doc_maxlen,
        "query_maxlen": 32,
        "mask_punctuation": True,
        "attend_to_mask_tokens": False,
        "interaction": "colbert",
        "similarity": "cosine",
        "nbits": 2,
    }
    (dest / "artifact.metadata").write_text(json.dumps(artifact, indent=4) + "\n", encoding="utf-8")


def _write_colbert_standin(base: Path, dest: Path, *, dim: int, seed: int) -> None:
    """The stand-in: the base model's weights with a ``linear.weight`` whose orthonormal rows are drawn from
    a fixed seed (a random projection roughly keeps the base model's token geometry)."""
    import numpy as np
    from safetensors.numpy import load_file

    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert":
        raise ModelResolutionError(
            f"ColBERT stand-in needs a BERT base model, got {config.get('model_type')}"
        )
    hidden = int(config["hidden_size"])
    config.pop("_name_or_path", None)
    config["architectures"] = ["HF_ColBERT"]
    weights = load_file(str(base / "model.safetensors"))
    tensors = {
        (k if k.startswith("bert.") else f"bert.{k}"): np.ascontiguousarray(v)
        for k, v in weights.items()
        if not k.endswith("position_ids")  # a buffer, not a weight; transformers rebuilds it
    }
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((hidden, dim)))  # hidden x dim, orthonormal columns
    tensors["linear.weight"] = np.ascontiguousarray(q.T.astype(np.float32))  # dim x hidden
    write_colbert_checkpoint(dest, config=config, tensors=tensors, tokenizer_dir=base, dim=dim)
    (dest / "README.md").write_text(
        "UNTRAINED ColBERT stand-in built by ragbench from all-MiniLM-L6-v2.\n"
        f"The {dim}x{hidden} projection is random (seed {seed}), not trained: it shows that the "
        "late-interaction path runs, and its scores must never be reported as ColBERT results.\n",
        encoding="utf-8",
    )
