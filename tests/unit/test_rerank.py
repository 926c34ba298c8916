"""Fast tests of reranker resolution and of the reranker's plumbing (no ColBERT model is loaded); the
rerank stage itself: tests/unit/test_rerank_stage.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ragbench.models.registry import COLBERT_STANDIN_NAME
from ragbench.retrieval import rerank
from ragbench.retrieval.rerank import (
    DEFAULT_RERANKER_MODEL,
    STANDIN_LABEL,
    ColbertReranker,
    RerankerChoice,
    resolve_reranker,
)
from ragbench.retrieval.search import RetrievedChunk


def _chunks(n: int) -> list[RetrievedChunk]:
    return [
        RetrievedChunk(position=10 + i, source=f"doc{i}", score=1.0 - i / 10, text=f"text {i}")
        for i in range(n)
    ]


# -- resolve_reranker ----------------------------------------------------------------------------


def test_unavailable_colbert_falls_back_to_standin_loudly(caplog):
    # tests/conftest.py sets HF_HUB_OFFLINE=1 and the Hub model is not in any cache here.
    with caplog.at_level(logging.WARNING, logger="ragbench.retrieval.rerank"):
        choice = resolve_reranker(DEFAULT_RERANKER_MODEL)
    assert choice.requested == "colbert-ir/colbertv2.0"
    assert choice.used == COLBERT_STANDIN_NAME
    assert choice.is_standin
    assert "not available" in choice.reason and "stand-in" in choice.reason
    assert choice.label == STANDIN_LABEL == "colbert-standin (UNTRAINED)"
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "UNTRAINED" in warning and "NOT ColBERT results" in warning
    assert choice.model_dump()["label"] == STANDIN_LABEL  # travels with serialised results


def test_explicit_standin_is_flagged(caplog):
    with caplog.at_level(logging.WARNING, logger="ragbench.retrieval.rerank"):
        choice = resolve_reranker(COLBERT_STANDIN_NAME)
    assert choice.used == COLBERT_STANDIN_NAME
    assert choice.is_standin
    assert "explicitly" in choice.reason
    assert choice.label == STANDIN_LABEL
    assert any("UNTRAINED" in r.getMessage() for r in caplog.records)


def test_local_checkpoint_folder_is_used_as_is(tmp_path: Path, caplog):
    with caplog.at_level(logging.WARNING, logger="ragbench.retrieval.rerank"):
        choice = resolve_reranker(str(tmp_path))
    assert choice.used == str(tmp_path)
    assert not choice.is_standin
    assert choice.label == str(tmp_path)
    assert not caplog.records


def test_non_colbert_packaged_model_is_rejected():
    with pytest.raises(ValueError, match="not a ColBERT checkpoint"):
        resolve_reranker("all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match="empty"):
        resolve_reranker(" ")


# -- ColbertReranker plumbing, with a fake RAGatouille model ---------------------------------------


class FakeRagModel:
    """Mimics RAGPretrainedModel.rerank: scores by word overlap, returns dicts with result_index."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def rerank(self, query: str, documents: list[str], k: int) -> list[dict[str, Any]]:
        self.calls.append({"query": query, "documents": documents, "k": k})
        words = set(query.split())
        scores = [float(len(words & set(doc.split()))) for doc in documents]
        order = sorted(range(len(documents)), key=lambda i: -scores[i])[:k]
        return [
            {"content": documents[i], "score": scores[i], "rank": rank, "result_index": i}
            for rank, i in enumerate(order)
        ]


@pytest.fixture
def fake_reranker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ColbertReranker, FakeRagModel]:
    fake = FakeRagModel()
    monkeypatch.setattr(rerank, "_load", lambda location: rerank._Loaded(fake))
    choice = RerankerChoice(requested="x", used=str(tmp_path), is_standin=False, reason="test")
    return ColbertReranker(choice=choice), fake


def test_colbert_reranker_maps_results_back_to_chunks(fake_reranker):
    reranker, fake = fake_reranker
    chunks = [
        RetrievedChunk(position=7, source="a", score=0.9, text="apples are red"),
        RetrievedChunk(position=3, source="b", score=0.8, text="the sky is blue today"),
        RetrievedChunk(position=5, source="c", score=0.7, text="grass is green"),
    ]
    out = reranker.rerank("why is the sky blue", chunks, 2)
    assert [c.position for c in out] == [3, 5]
    assert [c.source for c in out] == ["b", "c"]
    assert out[0].text == chunks[1].text
    assert out[0].score == 4.0  # the reranker's score replaces the first-stage one
    assert chunks[1].score == 0.8  # inputs untouched
    assert out[0].retrieval_score == 0.8  # the first-stage similarity is kept beside it
    assert chunks[1].retrieval_score is None
    assert fake.calls[-1]["k"] == 2


def test_colbert_reranker_clamps_k_and_handles_empty(fake_reranker):
    reranker, fake = fake_reranker
    chunks = _chunks(2)
    assert len(reranker.rerank("text 1", chunks, 10)) == 2
    assert fake.calls[-1]["k"] == 2  # RAGatouille returns None when k exceeds the documents
    assert reranker.rerank("q", [], 3) == []
    with pytest.raises(ValueError, match="top_n"):
        reranker.rerank("q", chunks, 0)
