"""First-stage retrieval with a cell's retriever (`ragbench.retrieval.retrievers`), once per retrieve key, and
its metrics against expected sources (computed with ir-measures / trec_eval)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from statistics import fmean

from pydantic import BaseModel

from ragbench.grid.cell import CellSpec
from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.retrieval.index import Embedder, IndexManifest, VectorIndex
from ragbench.retrieval.lexical import LexicalIndexManifest, reciprocal_rank_fusion
from ragbench.retrieval.measures import RETRIEVAL_MEASURES, IndexCost, retrieval_columns
from ragbench.retrieval.retrievers import Retriever, SearchContext
from ragbench.retrieval.rewrite import CaseQueries, RewriteStats


class RetrievedChunk(BaseModel):
    """One passage as retrieved: `position` is its row in the index, `score` the score it was ranked by
    (-1 and 0 for a passage an external system returned: its index is not ours).

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
    shared_with: list[str] = []  # the other documents with this exact text (`Chunk.shared_with`)

    def credited_sources(self, expected: Collection[str]) -> list[str]:
        """The documents this passage counts as for a case: those of its documents the case expects (a
        passage several documents share is found in each), else its own."""
        return [source for source in (self.source, *self.shared_with) if source in expected] or [self.source]


class CaseRetrieval(BaseModel):
    """Per-case trace, so every aggregate can be followed back to the questions behind it."""

    case_id: str
    expected_sources: list[str]
    retrieved_sources: list[str]  # distinct sources in rank order, up to top_k chunks deep
    first_relevant_rank: int | None  # 1-based rank among distinct sources; None = not retrieved
    # 1-based rank of the first chunk credited with an expected source (None = not retrieved): whether the
    # reader's first top_n passages hold one (`measures.TOP_N_HIT`) is this against each cell's top_n
    first_relevant_chunk: int | None = None
    # what was searched, when a query rewrite changed it (None: the question as is): the metrics measure it
    searched: list[str] | None = None
    # This case's value of each retrieval metric (`RETRIEVAL_MEASURES`) by column: the table's numbers are
    # their means, and intervals and paired tests are computed from them.
    values: dict[str, float] = {}


class RetrievalMetrics(BaseModel):
    cases_used: int
    metrics_k: int
    top_k: int
    means: dict[str, float]  # each retrieval metric's mean over the cases used, by column


class RetrievalReport(BaseModel):
    metrics: RetrievalMetrics
    cases: list[CaseRetrieval]


def ranked_chunks(
    chunks: ChunkSet, positions: Sequence[int], scores: Sequence[float]
) -> list[RetrievedChunk]:
    """One question's ranking as chunks, best first; -1 (no hit) is skipped."""
    return [
        RetrievedChunk(
            position=int(position),
            source=(chunk := chunks.chunks[int(position)]).source,
            score=float(score),
            text=chunk.text,
            shared_with=chunk.shared_with,
            retrieval_rank=rank,
        )
        for rank, (position, score) in enumerate(
            ((p, s) for p, s in zip(positions, scores, strict=True) if p >= 0), start=1
        )
    ]


def retrieve(
    index: VectorIndex, chunks: ChunkSet, embedder: Embedder, questions: list[str], top_k: int
) -> list[list[RetrievedChunk]]:
    """Top-k chunks per question from a dense index, best first; one batched encode for all questions."""
    if embedder.name != index.manifest.embedding_model:
        raise ValueError(f"index was built with {index.manifest.embedding_model}, not {embedder.name}")
    index.check_matches(chunks)
    scores, positions = index.search(embedder.encode_queries(questions), top_k)
    return [ranked_chunks(chunks, row, row_scores) for row, row_scores in zip(positions, scores, strict=True)]


class SearchStats(BaseModel):
    """What a retriever's speed costs in quality: search time per query (query encoding excluded) and, for
    an approximate index, the share of the exact search's top_k it finds on the same queries."""

    queries: int
    ms_per_query: float
    exact_ms_per_query: float | None = None  # flat search of the same vectors (approximate indexes only)
    recall_vs_exact: float | None = None  # mean over queries of |approximate top_k ∩ exact top_k| / top_k


class RetrievedCandidates(BaseModel):
    """Every eval case's ranking for one retrieve key (the first stage) or one rerank key (the same
    candidates reordered), computed once and read by every key after it: the rerank keys and the answer
    keys (each top_n, reader, prompt) whose `CellSpec.ranking_stage` it is. Case id -> chunks, best first."""

    spec: CellSpec  # the retrieve or rerank key that ranked them
    chunk_set_fingerprint: str  # positions are rows of this chunk set
    by_case: dict[str, list[RetrievedChunk]]
    # case id -> what was searched for it, for the cases a query rewrite changed (every other case: its
    # question as is); the rerank stage and the answers carry it on, so a report shows what was searched
    searched: dict[str, list[str]] = {}

    def for_cases(self, cases: Sequence[EvalCase]) -> list[list[RetrievedChunk]]:
        return [self.by_case[case.id] for case in cases]

    def query_of(self, case: EvalCase) -> str:
        """The one text this ranking stands for, for a reranker to score passages against: a condensed
        query, else the question as is (a hyde passage or several multi_query queries are not a query a
        reranker is trained to read; their cells rerank against the question)."""
        searched = self.searched.get(case.id, [])
        return searched[0] if len(searched) == 1 and self.spec.query_rewrite == "condense" else case.question


def retrieve_candidates(
    spec: CellSpec,
    retriever: Retriever,
    context: SearchContext,
    cases: Sequence[EvalCase],
    queries: Sequence[CaseQueries] | None = None,
    *,
    rrf_k: int = 60,
) -> tuple[RetrievedCandidates, SearchStats]:
    """Rank `spec.top_k` chunks per case with the cell's retriever, searching `context` (the chunk set and
    the indexes the retriever reads). `queries`: what to search per case, in case order (a query rewrite's,
    `ragbench.retrieval.rewrite`); default, each question as is. A case with several queries gets each
    searched top_k deep and the rankings fused by reciprocal rank (`rrf_k`), as the hybrid retriever fuses.
    The questions the cases' generated turns answer are ranked too, after the cases (`searched_cases`)."""
    cases = searched_cases(cases)
    searched = [q.queries for q in queries] if queries is not None else [[case.question] for case in cases]
    if len(searched) != len(cases) or any(not group for group in searched):
        raise ValueError(f"{len(searched)} query lists for {len(cases)} cases, each needs one query or more")
    flat = [query for group in searched for query in group]
    rankings, seconds = context.timed_search(retriever, flat, spec.top_k or 0)
    by_case, start = {}, 0
    for case, group in zip(cases, searched, strict=True):
        ranked = rankings[start : start + len(group)]
        start += len(group)
        positions, scores = ranked[0]
        if len(ranked) > 1:
            fused = reciprocal_rank_fusion([row for row, _ in ranked], k=rrf_k)[: spec.top_k]
            positions, scores = [p for p, _ in fused], [s for _, s in fused]
        by_case[case.id] = ranked_chunks(context.chunks, positions, scores)
    search = SearchStats(
        queries=len(flat), ms_per_query=round(1000 * seconds / max(len(flat), 1), 4), **context.stats
    )
    candidates = RetrievedCandidates(
        spec=spec,
        chunk_set_fingerprint=context.chunks.fingerprint,
        by_case=by_case,
        searched={q.case_id: q.queries for q in queries or [] if q.rewritten},
    )
    return candidates, search


def distinct_sources(chunks: list[RetrievedChunk], expected: Collection[str] = ()) -> list[str]:
    """Document ranking from a chunk ranking: each source at the rank of its best chunk, a chunk counting as
    the `expected` documents that share it (`RetrievedChunk.credited_sources`)."""
    return list(dict.fromkeys(source for chunk in chunks for source in chunk.credited_sources(expected)))


def retrieval_metrics(
    cases: list[EvalCase], retrieved: list[list[RetrievedChunk]], metrics_k: int, top_k: int
) -> RetrievalReport:
    """Source-level IR metrics over the cases that name expected sources."""
    import ir_measures

    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    traces = []
    for case, chunks in zip(cases, retrieved, strict=True):
        if not case.expected_sources:
            continue
        expected = set(case.expected_sources)
        sources = distinct_sources(chunks, expected)
        qrels[case.id] = dict.fromkeys(case.expected_sources, 1)
        # Strictly decreasing scores: trec_eval breaks score ties by document id, not by our rank.
        run[case.id] = {source: float(len(sources) - rank) for rank, source in enumerate(sources)}
        first = next((rank for rank, source in enumerate(sources, start=1) if source in expected), None)
        first_chunk = next(
            (
                rank
                for rank, chunk in enumerate(chunks, start=1)
                if expected & {chunk.source, *chunk.shared_with}
            ),
            None,
        )
        traces.append(
            CaseRetrieval(
                case_id=case.id,
                expected_sources=case.expected_sources,
                retrieved_sources=sources,
                first_relevant_rank=first,
                first_relevant_chunk=first_chunk,
            )
        )
    if not traces:
        raise ValueError("no eval case names expected_sources: retrieval metrics need them")
    # trec_eval skips queries with an empty run; add a placeholder so they count as misses.
    for case_id in qrels:
        run[case_id] = run[case_id] or {"<nothing retrieved>": 0.0}
    names = {measure.measure_at(metrics_k) for measure in RETRIEVAL_MEASURES}
    by_name: dict[str, dict[str, float]] = {name: {} for name in names}
    for value in ir_measures.iter_calc([ir_measures.parse_measure(name) for name in names], qrels, run):
        by_name[str(value.measure)][value.query_id] = float(value.value)
    for trace in traces:
        for measure in RETRIEVAL_MEASURES:
            value = by_name[measure.measure_at(metrics_k)][trace.case_id]
            trace.values[measure.column_at(metrics_k)] = 1.0 - value if measure.complement else value
    metrics = RetrievalMetrics(
        cases_used=len(traces),
        metrics_k=metrics_k,
        top_k=top_k,
        means={
            column: round(fmean(trace.values[column] for trace in traces), 4)
            for column in retrieval_columns(metrics_k)
        },
    )
    return RetrievalReport(metrics=metrics, cases=traces)


class RetrievalResult(BaseModel):
    """Retrieval metrics of one retrieve key (chunking, retriever, embedding, index, top_k) over every case
    with expected sources, with what its indexes cost."""

    spec: CellSpec
    chunk_count: int
    index: IndexManifest | None  # the dense index searched (None when its retriever reads none)
    lexical: LexicalIndexManifest | None  # the BM25 index (when its retriever reads it)
    search: SearchStats
    retrieval: RetrievalReport
    rewrite: RewriteStats | None = None  # the query rewrite's calls (None: the questions were searched as is)

    def columns(self, ranking: dict[str, float] | None = None) -> dict:
        """Quality first, then cost: an approximate index's recall_vs_exact, build time, size and search
        time sit beside the flat cell's, so what speed costs in quality is one row apart. `ranking`: the
        metrics shown as quality (a cell's at both rankings, `rerank_stage.ranking_columns`); default, this
        first stage's means."""
        metrics = self.retrieval.metrics
        quality = {"retrieval_cases": metrics.cases_used, **(metrics.means if ranking is None else ranking)}
        if self.spec.external is not None:  # its index and search are the system's own, out of sight
            return quality
        if self.rewrite is not None:
            quality |= {"rewrite_calls": self.rewrite.calls, "rewrite_failures": self.rewrite.failures}
        dense, lexical = self.index, self.lexical
        build = (dense.build_seconds + dense.index_build_seconds if dense else 0.0) + (
            lexical.build_seconds if lexical else 0.0
        )
        return {
            "chunks": self.chunk_count,
            "chunks_truncated": dense.chunks_over_max_length if dense else 0,
            **quality,
            **IndexCost(
                recall_vs_exact=self.search.recall_vs_exact,  # at the cell's top_k
                search_ms_per_query=self.search.ms_per_query,
                exact_search_ms_per_query=self.search.exact_ms_per_query,
                index_build_s=round(build, 3),
                index_mb=round(
                    ((dense.index_bytes if dense else 0) + (lexical.index_bytes if lexical else 0)) / 2**20, 3
                ),
            ).model_dump(),
            "chunks_per_s": dense.chunks_per_second if dense else None,
        }


def evaluate_retrieval(
    candidates: RetrievedCandidates,
    search: SearchStats,
    cases: Sequence[EvalCase],
    metrics_k: int,
    *,
    chunk_count: int,
    index: IndexManifest | None,
    lexical: LexicalIndexManifest | None,
    rewrite: RewriteStats | None = None,
) -> RetrievalResult:
    """Metrics over the cases with expected sources, from the candidates the answer keys read too: the
    ranking of what was searched (a rewritten query's, when the cell rewrites), which each case's trace
    names."""
    with_sources = [case for case in cases if case.expected_sources]
    spec = candidates.spec
    report = retrieval_metrics(with_sources, candidates.for_cases(with_sources), metrics_k, spec.top_k)
    for trace in report.cases:
        trace.searched = candidates.searched.get(trace.case_id)
    return RetrievalResult(
        spec=spec,
        chunk_count=chunk_count,
        index=index,
        lexical=lexical,
        search=search,
        retrieval=report,
        rewrite=rewrite,
    )
