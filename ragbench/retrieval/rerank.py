"""Optional second stage: rerank the retrieved chunks with a ColBERT model through RAGatouille.

The configured model (default ``colbert-ir/colbertv2.0``) needs the Hugging Face Hub or a local copy.
Where it cannot be had (offline machines, CI), the untrained stand-in ``ragbench/colbert-standin-minilm``
is used instead and a loud warning says so: the stand-in proves that the late-interaction path runs
(obvious matches rank first) but ranks worse than the plain bi-encoder on paraphrased questions,
so its numbers must never be reported as ColBERT results. `RerankerChoice.label` marks it in tables.

The rerank stage (`ragbench.retrieval.rerank_stage`) reorders every case's candidates with a `Reranker`;
the reader then takes the first ``top_n`` of the ranking its cell reads, reranked or not.

RAGatouille, colbert-ai and torch are imported on first use only, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, computed_field

from ragbench.models.errors import ModelResolutionError
from ragbench.models.hub import check_model_available
from ragbench.models.provision import is_untrained_standin, resolve_model
from ragbench.models.registry import COLBERT_STANDIN_NAME, find_packaged_model
from ragbench.models.trained import TRAINED_PREFIX, TrainedReranker, artifact_name, parse_trained
from ragbench.retrieval.search import RetrievedChunk
from ragbench.store import given_store

__all__ = [
    "DEFAULT_RERANKER_MODEL",
    "STANDIN_LABEL",
    "ColbertReranker",
    "Reranker",
    "RerankerChoice",
    "resolve_reranker",
]

# The ColBERT checkpoint `reranker: true` names.
DEFAULT_RERANKER = "colbert-ir/colbertv2.0"

logger = logging.getLogger(__name__)

DEFAULT_RERANKER_MODEL = DEFAULT_RERANKER
STANDIN_LABEL = "colbert-standin (UNTRAINED)"


class RerankerChoice(BaseModel):
    """Which checkpoint reranking really uses, and why; recorded with every result that used it."""

    model_config = ConfigDict(frozen=True)

    requested: str
    used: str
    is_standin: bool
    reason: str
    # A checkpoint `run.py train-reranker` made: its artifact version, how it was trained (for the label)
    # and the eval cases kept out of its training.
    trained_artifact: str | None = None
    trained_label: str | None = None
    held_out_cases: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        """Short name for tables: the stand-in is always marked UNTRAINED, a locally trained checkpoint says
        what it was trained on."""
        if self.is_standin:
            return STANDIN_LABEL
        return f"{self.used} ({self.trained_label})" if self.trained_label else self.used

    def identity(self) -> dict[str, str]:
        """What decides every encoding and ranking made with this choice: the checkpoint used. `requested`
        and `reason` explain it (the reason quotes the Hub's error, which differs between machines), and
        `is_standin` follows from the checkpoint; a step's cache key holds this only."""
        return {"used": self.used}


_STANDIN_WARNING = (
    "\n" + "!" * 100 + "\n"
    "RERANKER: %s\n"
    "Reranking uses %r, an UNTRAINED ColBERT stand-in built from all-MiniLM-L6-v2 (random projection).\n"
    "It only shows that the reranking path runs. Its numbers are NOT ColBERT results: label them\n"
    "%r and never compare them with published ColBERT numbers.\n" + "!" * 100
)


def resolve_reranker(model_name: str = DEFAULT_RERANKER_MODEL) -> RerankerChoice:
    """Pick the checkpoint to rerank with: `model_name` if it can be loaded, else the stand-in.

    "Can be loaded" means a local path, or a model in the local Hugging Face cache, or (when
    HF_HUB_OFFLINE is not set) one the Hub answers for; see `ragbench.models.provision.check_model_available`.
    Downloads nothing. Raises ValueError for a packaged model that is not a ColBERT checkpoint.
    """
    name = model_name.strip()
    if not name:
        raise ValueError("reranker model name is empty")
    trained = parse_trained(name)
    if trained is not None:
        return _resolve_trained(name, *trained)
    spec = find_packaged_model(name)
    if spec is not None and spec.kind != "colbert":
        raise ValueError(f"{name!r} is a packaged {spec.kind} model, not a ColBERT checkpoint")
    if is_untrained_standin(name):
        used = spec.name if spec is not None else name
        reason = "the untrained stand-in was requested explicitly"
        logger.warning(_STANDIN_WARNING, reason, used, STANDIN_LABEL)
        return RerankerChoice(requested=model_name, used=used, is_standin=True, reason=reason)
    try:
        check_model_available(name)
    except ModelResolutionError as error:
        first_line = str(error).strip().splitlines()[0]
        reason = f"{name!r} is not available ({first_line}); fell back to the untrained stand-in"
        logger.warning(_STANDIN_WARNING, reason, COLBERT_STANDIN_NAME, STANDIN_LABEL)
        return RerankerChoice(requested=model_name, used=COLBERT_STANDIN_NAME, is_standin=True, reason=reason)
    where = "a local path" if Path(name).expanduser().exists() else "available"
    return RerankerChoice(requested=model_name, used=name, is_standin=False, reason=f"{name!r} is {where}")


def _resolve_trained(requested: str, name: str, version: str | None) -> RerankerChoice:
    """The newest (or the named) version of the checkpoint artifact `run.py train-reranker` stored; its
    weights are not loaded here, only its record."""
    try:
        artifact = given_store().artifact(artifact_name(name), version)
    except KeyError:
        which = "no trained reranker" if version is None else f"no version {version} of trained reranker"
        raise ModelResolutionError(
            f"reranker {requested!r}: {which} {name!r}; train it with `run.py train-reranker` "
            f"(reranker_training.name: {name})"
        ) from None
    metadata = artifact.run_metadata
    label = metadata.get("label")
    if not isinstance(label, str):
        raise ModelResolutionError(
            f"reranker {requested!r}: artifact {artifact_name(name)} is not a trained reranker"
        )
    return RerankerChoice(
        requested=requested,
        used=f"{TRAINED_PREFIX}{name}@{artifact.version}",
        is_standin=False,
        reason=f"artifact {artifact_name(name)} version {artifact.version}",
        trained_artifact=str(artifact.id),
        trained_label=label,
        held_out_cases=tuple(metadata.get("held_out_case_ids", [])),
    )


def checkpoint_location(choice: RerankerChoice) -> str:
    """Where the checkpoint's files are on this machine: a provisioned model's folder, or a trained one's
    artifact loaded here (its materializer copies the files out of the artifact store once)."""
    if choice.trained_artifact is None:
        return resolve_model(choice.used).location
    trained = given_store().artifact_by_id(choice.trained_artifact).load()
    if not isinstance(trained, TrainedReranker) or not trained.location:
        raise ModelResolutionError(f"{choice.used}: artifact {choice.trained_artifact} holds no checkpoint")
    return trained.location


class Reranker(Protocol):
    """Anything that reorders retrieved chunks for a question (ColbertReranker, or a fake in tests)."""

    def rerank(self, question: str, chunks: Sequence[RetrievedChunk], top_n: int) -> list[RetrievedChunk]: ...


# --------------------------------------------------------------------------------------------------
# Loaded models: one per checkpoint location per process
# --------------------------------------------------------------------------------------------------


class _Loaded:
    def __init__(self, model: Any) -> None:
        self.model = model
        # RAGatouille's in-memory rank() rewrites the checkpoint's max lengths per call: not thread-safe.
        self.lock = threading.Lock()


_models: dict[str, _Loaded] = {}
_load_lock = threading.Lock()

# colbert-ai's mixed-precision helpers warn on every CPU-only machine; they say nothing useful here.
_CPU_NOISE = (
    r"`torch\.cuda\.amp\.",
    r"torch\.cuda\.amp\.GradScaler is enabled, but CUDA is not available",
    r"CUDA is not available or torch_xla is imported",
)


def _load(location: str) -> _Loaded:
    with _load_lock:
        loaded = _models.get(location)
        if loaded is None:
            for pattern in _CPU_NOISE:
                warnings.filterwarnings("ignore", message=pattern)
            from ragatouille import RAGPretrainedModel

            logger.info("loading ColBERT checkpoint %s with RAGatouille", location)
            # verbose=0 silences colbert-ai's own logging; the first load on a machine also compiles a
            # small C++ extension of colbert-ai (cached under ~/.cache/torch_extensions afterwards).
            model = RAGPretrainedModel.from_pretrained(location, verbose=0)
            loaded = _models[location] = _Loaded(model)
        return loaded


class ColbertReranker:
    """Late-interaction reranking with RAGatouille's in-memory ``rerank`` (no index is built).

    The checkpoint loads on first use, once per process; `choice` says which one and whether it is the
    untrained stand-in. Returned chunks are copies whose ``score`` is the ColBERT score (sum of maxsim),
    best first; ``position``, ``source`` and ``text`` are unchanged.
    """

    def __init__(self, model_name: str = DEFAULT_RERANKER_MODEL, *, choice: RerankerChoice | None = None):
        self.choice = choice if choice is not None else resolve_reranker(model_name)

    @property
    def label(self) -> str:
        return self.choice.label

    @property
    def is_standin(self) -> bool:
        return self.choice.is_standin

    def load(self) -> None:
        """Load the checkpoint now (e.g. before timing), instead of on the first `rerank`."""
        self._loaded()

    def _loaded(self) -> _Loaded:
        return _load(checkpoint_location(self.choice))

    def rerank(self, question: str, chunks: Sequence[RetrievedChunk], top_n: int) -> list[RetrievedChunk]:
        """The `top_n` best of `chunks` for `question` by ColBERT score, best first."""
        if top_n < 1:
            raise ValueError(f"top_n must be at least 1, got {top_n}")
        if not chunks:
            return []
        loaded = self._loaded()
        k = min(top_n, len(chunks))
        documents = [chunk.text for chunk in chunks]
        # colbert-ai draws a progress bar on stderr for every call; keep it out of the console (the
        # rerank stage's loop has its own bar). Our logging handlers hold their own stream reference.
        with loaded.lock, contextlib.redirect_stderr(io.StringIO()):
            results = loaded.model.rerank(query=question, documents=documents, k=k)
        if results is None or len(results) != k:
            raise RuntimeError(f"RAGatouille returned {results!r} for {k} of {len(documents)} documents")
        return [_with_score(chunks[int(hit["result_index"])], float(hit["score"])) for hit in results]


def _with_score(chunk: RetrievedChunk, score: float) -> RetrievedChunk:
    first_stage = chunk.score if chunk.retrieval_score is None else chunk.retrieval_score
    return chunk.model_copy(update={"score": score, "retrieval_score": first_stage})
