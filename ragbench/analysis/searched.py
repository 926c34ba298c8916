"""What each cell searched for each case, and what that search found: one record per (cell, case), for every
cell whose retrieval is the grid's own (an external system's search is out of sight), retrieval-only cells
(no reader, so no answer record in `cases.jsonl`) included. Built by the results step from the rewrite
steps' queries (`ragbench.retrieval.rewrite.RewrittenQueries`: what was searched, and why a case was
searched as asked) and the retrieval traces the retrieve and rerank steps made (the ranked sources, for the
cases that name expected sources: the only ones those steps measure)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from ragbench.analysis.results import CellResults
from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.retrieval.rewrite import OFF, CaseQueries, RewrittenQueries
from ragbench.retrieval.search import CaseRetrieval, RetrievalReport


class SearchedRecord(BaseModel):
    """One (cell, case): the question, the cell's query rewrite and what it searched (`searched`: the
    rewritten query or queries, or the question as is when `rewritten` is False: off, a single question
    under condense, or a failed call, whose reason is `rewrite_error`), then the distinct sources found, best
    first (rank = position + 1), at the ranking the cell is measured at (the reranked one when it reranks,
    the first stage's beside it in `first_stage_sources`). The sources are None for a case without
    expected sources, which the retrieval steps do not measure."""

    cell: str
    case_id: str
    question: str
    query_rewrite: str
    searched: list[str]
    rewritten: bool
    rewrite_error: str | None = None
    expected_sources: list[str] = []
    retrieved_sources: list[str] | None = None
    first_relevant_rank: int | None = None  # 1-based, among `retrieved_sources`; None: none found
    first_stage_sources: list[str] | None = None  # a reranking cell's first-stage ranking


class SearchedRecords(BaseModel):
    """Every (cell, case) search of a run, one artifact: `searched.jsonl` in the output folder."""

    records: list[SearchedRecord]

    def jsonl(self) -> str:
        lines = [json.dumps(record.model_dump(mode="json"), ensure_ascii=False) for record in self.records]
        return "\n".join(lines) + ("\n" if lines else "")


def _traces(report: RetrievalReport | None) -> dict[str, CaseRetrieval]:
    return {trace.case_id: trace for trace in report.cases} if report is not None else {}


def searched_records(
    results: CellResults, cases: Sequence[EvalCase], rewrites: Sequence[RewrittenQueries]
) -> SearchedRecords:
    """One record per cell with a retrieval of its own and per case it searched (`searched_cases`: the
    cases, then the questions their generated turns answer), in cell then case order. `rewrites`: each
    query_rewrite mode's queries, from its rewrite step."""
    by_mode: dict[str, dict[str, CaseQueries]] = {
        rewrite.mode: {queries.case_id: queries for queries in rewrite.queries} for rewrite in rewrites
    }
    searched = searched_cases(cases)
    records = []
    for cell in results.cells:
        retrieval = results.retrievals.get(cell.upto("retrieve").id)
        if cell.external is not None or retrieval is None:
            continue
        mode = cell.query_rewrite or OFF
        first = _traces(retrieval.retrieval)
        reranked = results.reranked_of(cell)
        measured = _traces(reranked.retrieval) if reranked is not None else first
        queries = by_mode.get(mode, {})
        for case in searched:
            asked = queries.get(case.id)
            trace, first_trace = measured.get(case.id), first.get(case.id)
            traced = trace.searched if trace is not None else None  # set only when rewritten
            records.append(
                SearchedRecord(
                    cell=cell.id,
                    case_id=case.id,
                    question=case.question,
                    query_rewrite=mode,
                    searched=asked.queries if asked is not None else traced or [case.question],
                    rewritten=asked.rewritten if asked is not None else bool(traced),
                    rewrite_error=asked.error if asked is not None else None,
                    expected_sources=case.expected_sources,
                    retrieved_sources=trace.retrieved_sources if trace is not None else None,
                    first_relevant_rank=trace.first_relevant_rank if trace is not None else None,
                    first_stage_sources=first_trace.retrieved_sources
                    if reranked is not None and first_trace is not None
                    else None,
                )
            )
    return SearchedRecords(records=records)
