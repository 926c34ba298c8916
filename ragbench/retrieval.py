"""Retrieval and its metrics against expected sources (computed with ir-measures / trec_eval)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from pydantic import BaseModel

from ragbench.eval_cases import EvalCase
from ragbench.grid import CellSpec
from ragbench.index import Embedder, IndexManifest, VectorIndex, load_embedder


class RetrievedChunk(BaseModel):
    """One passage as retrieved: `position` is its row in the index, `score` the score it was ranked by.

    `retrieval_rank` is its 1-based rank in the first-stage list, so a reranked context shows where the
    reranker found it; after reranking, `score` is the reranker's and `retrieval_score` keeps the
    first-stage similarity.
    """

    position: int
    source: str
    score: float
    text: str
    retrieval_rank: int | None = None
    retrieval_score: float | None = None


class CaseRetrieval(BaseModel):
    """Per-case trace, so every aggregate can be followed back to the questions behind it."""

    case_id: str
    expected_sources: list[str]
    retrieved_sources: list[str]  # distinct sources in rank order, up to top_k chunks deep
    first_relevant_rank: int | None  # 1-based rank among distinct sources; None = not retrieved
    # This case's value of each metric (hit, recall, reciprocal rank, nDCG@10): the table's numbers are
    # their means, and intervals and paired tests are computed from them.
    hit: float = 0.0
    recall: float = 0.0
    reciprocal_rank: float = 0.0
    ndcg_at_10: float = 0.0


class RetrievalMetrics(BaseModel):
    cases_used: int
    metrics_k: int
    top_k: int
    failure_rate: float  # share of cases whose expected source is NOT in the top metrics_k sources
    hit_rate: float  # Success@k
    recall: float  # R@k
    mrr: float  # reciprocal rank of the first expected source, within top_k chunks
    ndcg_at_10: float


class RetrievalReport(BaseModel):
    metrics: RetrievalMetrics
    cases: list[CaseRetrieval]


def retrieve(
    index: VectorIndex, embedder: Embedder, questions: list[str], top_k: int
) -> list[list[RetrievedChunk]]:
    """Top-k chunks per question, best first; one batched encode for all questions."""
    if embedder.name != index.manifest.embedding_model:
        raise ValueError(f"index was built with {index.manifest.embedding_model}, not {embedder.name}")
    scores, positions = index.search(embedder.encode_queries(questions), top_k)
    results = []
    for row_scores, row_positions in zip(scores, positions, strict=True):
        row = []
        for score, position in zip(row_scores, row_positions, strict=True):
            if position < 0:
                continue
            chunk = index.chunks.chunks[position]
            row.append(
                RetrievedChunk(
                    position=int(position),
                    source=chunk.source,
                    score=float(score),
                    text=chunk.text,
                    retrieval_rank=len(row) + 1,
                )
            )
        results.append(row)
    return results


def distinct_sources(chunks: list[RetrievedChunk]) -> list[str]:
    """Document ranking from a chunk ranking: each source at the rank of its best chunk."""
    return list(dict.fromkeys(chunk.source for chunk in chunks))


def retrieval_metrics(
    cases: list[EvalCase], retrieved: list[list[RetrievedChunk]], metrics_k: int, top_k: int
) -> RetrievalReport:
    """Source-level IR metrics over the cases that name expected sources."""
    import ir_measures
    from ir_measures import RR, R, Success, nDCG

    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    traces = []
    for case, chunks in zip(cases, retrieved, strict=True):
        if not case.expected_sources:
            continue
        sources = distinct_sources(chunks)
        expected = set(case.expected_sources)
        qrels[case.id] = dict.fromkeys(case.expected_sources, 1)
        # Strictly decreasing scores: trec_eval breaks score ties by document id, not by our rank.
        run[case.id] = {source: float(len(sources) - rank) for rank, source in enumerate(sources)}
        first = next((rank for rank, source in enumerate(sources, start=1) if source in expected), None)
        traces.append(
            CaseRetrieval(
                case_id=case.id,
                expected_sources=case.expected_sources,
                retrieved_sources=sources,
                first_relevant_rank=first,
            )
        )
    if not traces:
        raise ValueError("no eval case names expected_sources: retrieval metrics need them")
    hit, recall, ndcg = Success @ metrics_k, R @ metrics_k, nDCG @ 10
    # trec_eval skips queries with an empty run; add a placeholder so they count as misses.
    for case_id in qrels:
        run[case_id] = run[case_id] or {"<nothing retrieved>": 0.0}
    fields = {hit: "hit", recall: "recall", RR: "reciprocal_rank", ndcg: "ndcg_at_10"}
    by_case = {trace.case_id: trace for trace in traces}
    for value in ir_measures.iter_calc(list(fields), qrels, run):
        setattr(by_case[value.query_id], fields[value.measure], float(value.value))

    def mean(field: str) -> float:
        return round(fmean(getattr(trace, field) for trace in traces), 4)

    metrics = RetrievalMetrics(
        cases_used=len(traces),
        metrics_k=metrics_k,
        top_k=top_k,
        failure_rate=round(1.0 - mean("hit"), 4),
        hit_rate=mean("hit"),
        recall=mean("recall"),
        mrr=mean("reciprocal_rank"),
        ndcg_at_10=mean("ndcg_at_10"),
    )
    return RetrievalReport(metrics=metrics, cases=traces)


class RetrievalResult(BaseModel):
    """Retrieval metrics of one retrieve key (chunking, embedding, top_k) over every case with sources."""

    spec: CellSpec
    index: IndexManifest
    retrieval: RetrievalReport

    def case_values(self) -> dict[str, dict[str, float]]:
        """Each retrieval column's value per case (column -> case id -> value)."""
        k = self.retrieval.metrics.metrics_k
        cases = self.retrieval.cases
        return {
            f"failure_rate@{k}": {c.case_id: 1.0 - c.hit for c in cases},
            f"hit_rate@{k}": {c.case_id: c.hit for c in cases},
            f"recall@{k}": {c.case_id: c.recall for c in cases},
            "mrr": {c.case_id: c.reciprocal_rank for c in cases},
            "ndcg@10": {c.case_id: c.ndcg_at_10 for c in cases},
        }

    def columns(self) -> dict:
        metrics = self.retrieval.metrics
        k = metrics.metrics_k
        return {
            "chunks": self.index.chunk_count,
            "chunks_truncated": self.index.chunks_over_max_length,
            "retrieval_cases": metrics.cases_used,
            f"failure_rate@{k}": metrics.failure_rate,
            f"hit_rate@{k}": metrics.hit_rate,
            f"recall@{k}": metrics.recall,
            "mrr": metrics.mrr,
            "ndcg@10": metrics.ndcg_at_10,
            "index_build_s": self.index.build_seconds,
            "chunks_per_s": self.index.chunks_per_second,
        }


def evaluate_retrieval(
    spec: CellSpec, index: VectorIndex, cases: Sequence[EvalCase], metrics_k: int
) -> RetrievalResult:
    with_sources = [case for case in cases if case.expected_sources]
    embedder = load_embedder(index.manifest.embedding_model)
    retrieved = retrieve(index, embedder, [case.question for case in with_sources], spec.top_k)
    report = retrieval_metrics(with_sources, retrieved, metrics_k=metrics_k, top_k=spec.top_k)
    return RetrievalResult(spec=spec, index=index.manifest, retrieval=report)
