"""The rerank stage: once per (retrieve key, reranker), every case's first-stage candidates reordered (all of
them, not only the cases that are answered) and measured with the same metrics as the first stage; and a
cell's retrieval columns at the two rankings it is measured at.

Its ranking is what the answer steps of its cells read (they keep their own top_n of it), so the retrieval
metrics of a reranking cell measure the passages its reader is given. A cell without a reranker has no
rerank step (`CellSpec.ranking_stage`): its reader reads the first stage's ranking, and its two rankings'
metrics are equal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from statistics import fmean

from pydantic import BaseModel
from tqdm.auto import tqdm

from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.retrieval.measures import TOP_N_HIT, first_stage
from ragbench.retrieval.rerank import Reranker, RerankerChoice
from ragbench.retrieval.search import (
    RetrievalReport,
    RetrievalResult,
    RetrievedCandidates,
    RetrievedChunk,
    retrieval_metrics,
)


class RerankResult(BaseModel):
    """One rerank key's ranking measured like the first stage's, over every case with expected sources, and
    what reranking cost per case (question encoding and MaxSim over the stored chunk encodings)."""

    spec: CellSpec  # the rerank key: the retrieve key and the reranker as configured
    reranker: RerankerChoice  # the checkpoint really used (the UNTRAINED stand-in says so)
    cases: int  # every case reranked, with expected sources or not
    ms_per_query: float
    retrieval: RetrievalReport


def rerank_candidates(
    candidates: RetrievedCandidates,
    cases: Sequence[EvalCase],
    reranker: Reranker,
    *,
    spec: CellSpec,
    progress: bool | None = None,
) -> RetrievedCandidates:
    """Every case's candidates reordered by `reranker`, all of them: the answer keys after it keep their own
    top_n. `spec` is the rerank key; the candidates must be its retrieve key's. `progress`: tqdm bar on or
    off; None shows it on a terminal only. The questions the cases' generated turns answer are reranked
    too (`searched_cases`), for the turns the cells' readers write."""
    if spec.reranker is None:
        raise ValueError(f"rerank key {spec.id} has no reranker: its cells read the first stage's ranking")
    if candidates.spec != spec.upto("retrieve"):
        raise ValueError(f"candidates of {candidates.spec.id} given to rerank key {spec.id}")
    cases = searched_cases(cases)
    if missing := [case.id for case in cases if case.id not in candidates.by_case]:
        raise ValueError(f"no candidates for case(s) {', '.join(missing)} in {candidates.spec.id}")
    by_case: dict[str, list[RetrievedChunk]] = {}
    bar = tqdm(
        cases, desc=f"rerank {spec.id}", unit="question", disable=None if progress is None else not progress
    )
    for case in bar:
        chunks = candidates.by_case[case.id]
        by_case[case.id] = reranker.rerank(candidates.query_of(case), chunks, len(chunks)) if chunks else []
    return RetrievedCandidates(
        spec=spec,
        chunk_set_fingerprint=candidates.chunk_set_fingerprint,
        by_case=by_case,
        searched=candidates.searched,
    )


def rerank_stage(
    candidates: RetrievedCandidates,
    cases: Sequence[EvalCase],
    reranker: Reranker,
    choice: RerankerChoice,
    *,
    spec: CellSpec,
    metrics_k: int,
) -> tuple[RetrievedCandidates, RerankResult]:
    """The rerank step's work: every case reranked (timed), and the reranked ranking's metrics over the
    cases with expected sources, computed exactly as the first stage's."""
    started = time.perf_counter()
    reranked = rerank_candidates(candidates, cases, reranker, spec=spec)
    seconds = time.perf_counter() - started
    with_sources = [case for case in cases if case.expected_sources]
    report = retrieval_metrics(with_sources, reranked.for_cases(with_sources), metrics_k, spec.top_k or 0)
    for trace in report.cases:
        trace.searched = reranked.searched.get(trace.case_id)
    result = RerankResult(
        spec=spec,
        reranker=choice,
        cases=len(cases),
        ms_per_query=round(1000 * seconds / max(len(cases), 1), 4),
        retrieval=report,
    )
    return reranked, result


def _case_values(report: RetrievalReport, top_n: int | None) -> dict[str, dict[str, float]]:
    """Column -> case id -> value of one ranking; with `top_n`, whether the reader's passages hold an
    expected source too (`TOP_N_HIT`)."""
    cases = report.cases
    values = {
        column: {case.case_id: case.values[column] for case in cases} for column in report.metrics.means
    }
    if top_n is not None:
        values[TOP_N_HIT] = {
            case.case_id: float(case.first_relevant_chunk is not None and case.first_relevant_chunk <= top_n)
            for case in cases
        }
    return values


def ranking_case_values(
    cell: CellSpec, first: RetrievalResult, reranked: RerankResult | None
) -> dict[str, dict[str, float]]:
    """A cell's retrieval metrics per case (column -> case id -> value) at both rankings: the ranking its
    reader reads (`reranked`, or the first stage's without a reranker) under the plain names, the first
    stage's under `first_stage` names; `TOP_N_HIT` at the cell's top_n where it has a reader. An external
    system's cell has one ranking, the sources it returned with its answer (its own stages are out of
    sight), under the plain names only: a first stage equal to it would claim what was never measured."""
    if (reranked is None) != (cell.reranker is None):
        raise ValueError(f"cell {cell.id}: a rerank result is given exactly when the cell reranks")
    first_values = _case_values(first.retrieval, cell.top_n)
    if cell.external is not None:
        return first_values
    reader_values = _case_values(reranked.retrieval, cell.top_n) if reranked is not None else first_values
    return reader_values | {first_stage(column): values for column, values in first_values.items()}


def ranking_columns(cell: CellSpec, first: RetrievalResult, reranked: RerankResult | None) -> dict:
    """A cell's retrieval columns: the first stage's index and search costs, the means of
    `ranking_case_values` (the reader's ranking, then the first stage's), and for a reranking cell what
    reranking cost per case."""
    means = {
        column: round(fmean(by_case.values()), 4)
        for column, by_case in ranking_case_values(cell, first, reranked).items()
        if by_case
    }
    columns = first.columns(means)
    if reranked is not None:
        columns["rerank_ms_per_query"] = reranked.ms_per_query
    return columns
