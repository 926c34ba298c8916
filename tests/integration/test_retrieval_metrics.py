import hashlib

import pytest

from ragbench.inputs.eval_cases import EvalCase
from ragbench.retrieval.search import RetrievedChunk, distinct_sources, retrieval_metrics


def chunks(*sources):
    return [
        RetrievedChunk(position=i, source=source, score=1.0 - i / 10, text="")
        for i, source in enumerate(sources)
    ]


def test_chunk_ranking_becomes_a_source_ranking():
    assert distinct_sources(chunks("a", "a", "b", "a", "c")) == ["a", "b", "c"]


def test_metrics_match_hand_computed_values():
    cases = [
        EvalCase(id="first", question="q1", expected_sources=["a"]),
        EvalCase(id="second", question="q2", expected_sources=["b"]),
        EvalCase(id="missed", question="q3", expected_sources=["z"]),
        EvalCase(id="two", question="q4", expected_sources=["a", "c"]),
        EvalCase(id="no-sources", question="q5"),
    ]
    retrieved = [
        chunks("a", "x", "y"),  # rank 1
        chunks("x", "x", "b"),  # rank 2 (duplicate source x collapses)
        chunks("x", "y", "w"),  # not found
        chunks("c", "x", "y", "q", "r", "a"),  # c at 1, a at 6 (outside k=2)
        chunks("a"),
    ]
    report = retrieval_metrics(cases, retrieved, metrics_k=2, top_k=30)
    metrics = report.metrics
    assert metrics.cases_used == 4
    means = metrics.means
    assert list(means) == ["mrr", "hit_rate@2", "failure_rate@2", "recall@2", "ndcg@10"]
    assert means["hit_rate@2"] == pytest.approx(3 / 4)
    assert means["failure_rate@2"] == pytest.approx(1 / 4)
    assert means["recall@2"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert means["mrr"] == pytest.approx((1 + 1 / 2 + 0 + 1) / 4)
    ranks = {trace.case_id: trace.first_relevant_rank for trace in report.cases}
    assert ranks == {"first": 1, "second": 2, "missed": None, "two": 1}
    assert 0 < means["ndcg@10"] < 1
    per_case = {trace.case_id: trace.values["recall@2"] for trace in report.cases}
    assert per_case == {"first": 1.0, "second": 1.0, "missed": 0.0, "two": 0.5}


def test_empty_retrieval_counts_as_a_miss_not_skipped():
    cases = [
        EvalCase(id="a", question="q", expected_sources=["a"]),
        EvalCase(id="b", question="q", expected_sources=["b"]),
    ]
    report = retrieval_metrics(cases, [chunks("a"), []], metrics_k=1, top_k=5)
    assert report.metrics.means["hit_rate@1"] == pytest.approx(0.5)


def test_metrics_need_expected_sources():
    with pytest.raises(ValueError, match="expected_sources"):
        retrieval_metrics([EvalCase(id="a", question="q")], [chunks("a")], metrics_k=1, top_k=5)


def test_a_chunk_two_documents_share_counts_as_whichever_the_case_expects():
    """One text in a.md and b.md is one chunk: a case expecting b.md finds it at rank 1, one expecting both
    finds both, and a case expecting neither counts it once, as its first document."""
    shared = RetrievedChunk(position=0, source="a.md", score=1.0, text="", shared_with=["b.md"])
    ranking = [shared, *chunks("x", "y")[1:]]
    assert distinct_sources(ranking, {"b.md"}) == ["b.md", "y"]
    assert distinct_sources(ranking, {"a.md", "b.md"}) == ["a.md", "b.md", "y"]
    assert distinct_sources(ranking, {"z"}) == ["a.md", "y"]
    cases = [EvalCase(id="b", question="q", expected_sources=["b.md"])]
    report = retrieval_metrics(cases, [ranking], metrics_k=1, top_k=5)
    assert report.metrics.means["mrr"] == 1.0 and report.metrics.means["hit_rate@1"] == 1.0


def test_chunking_keeps_every_document_of_a_duplicated_text():
    from ragbench.inputs.chunking import chunk_corpus
    from ragbench.inputs.knowledge_base import Corpus, Document
    from ragbench.retrieval.search import ranked_chunks
    from tests.conftest import MINILM

    text = "The with statement closes a file automatically."
    documents = [Document(text=text, source=source) for source in ("a.md", "b.md", "c.md")]
    documents.append(Document(text="Another page.", source="d.md"))
    corpus = Corpus(documents=documents, fingerprint="f", description="test")
    chunk_set = chunk_corpus(corpus, chunk_size=64, chunk_overlap=0, tokenizer_name=MINILM)
    assert [(c.source, c.shared_with) for c in chunk_set.chunks] == [("a.md", ["b.md", "c.md"]), ("d.md", [])]
    assert chunk_set.duplicates_removed == 2
    (passage,) = ranked_chunks(chunk_set, [0], [1.0])
    assert passage.credited_sources({"c.md"}) == ["c.md"]
    unshared = chunk_set.model_copy(
        update={"chunks": [c.model_copy(update={"shared_with": []}) for c in chunk_set.chunks]}
    )
    assert unshared.fingerprint != chunk_set.fingerprint
    # without shared text, the fingerprint every stored index was checked against before
    before = "".join(f"{c.source}\0{c.start_index}\0{c.text}\0" for c in unshared.chunks)
    assert unshared.fingerprint == hashlib.sha256(before.encode()).hexdigest()[:16]
