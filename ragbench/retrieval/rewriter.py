"""The query rewrite's LLM calls (`ragbench.retrieval.rewrite` says what each mode does): one batch per mode
through the one LLM client, made by the rewrite step (`steps.rewrite`) that every retrieve key of the mode
reads, so the search steps never import the client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.retrieval.rewrite import (
    OFF,
    CaseQueries,
    QueryRewrite,
    RewriteStats,
    RewrittenQueries,
    case_queries,
    needs_call,
    rewrite_request,
)


def rewrite_queries(
    mode: QueryRewrite, cases: Sequence[EvalCase], client: LLMClient | None, *, count: int, desc: str
) -> list[CaseQueries]:
    """What to search for every case, in case order, then for the questions its generated turns answer
    (`searched_cases`); `client` is the rewriter's (None only with off)."""
    cases = searched_cases(cases)
    calling = [case for case in cases if needs_call(mode, case)]
    if calling and client is None:
        raise ValueError(f"query rewrite {mode} needs a rewriter LLM")
    results = (
        client.complete_many([rewrite_request(mode, case, count) for case in calling], desc=desc)
        if calling and client is not None
        else []
    )
    if len(results) != len(calling):
        raise RuntimeError(f"LLM client returned {len(results)} results for {len(calling)} rewrites")
    by_case = {
        case.id: case_queries(mode, case, result, count)
        for case, result in zip(calling, results, strict=True)
    }
    return [by_case.get(case.id) or CaseQueries(case_id=case.id, queries=[case.question]) for case in cases]


class RewriteSetup(BaseModel):
    """What a mode's rewrite depends on, the rewrite step's cache-keyed parameter: the rewriter's
    result settings (`LLMSettings.result_fields`; its concurrency, timeouts and retries come with the run's
    operations, outside the key) and the number of multi_query queries."""

    rewriter: dict[str, Any]
    count: int

    def settings(self, operations: dict[str, dict[str, Any]]) -> LLMSettings:
        """The rewriter with its operational settings put back (`operations`: by `result_key`)."""
        settings = LLMSettings.model_validate(self.rewriter)
        return settings.model_copy(update=operations.get(settings.result_key, {}))


def rewrite_cases(
    mode: QueryRewrite,
    cases: Sequence[EvalCase],
    setup: RewriteSetup,
    operations: dict[str, dict[str, Any]],
    *,
    llm_cache: str | None,
) -> RewrittenQueries:
    """Every case's queries for `mode` (not off) and the calls' summary: the rewrite step's work."""
    if mode == OFF:
        raise ValueError("query rewrite off searches the questions as they are: nothing to rewrite")
    settings = setup.settings(operations)
    with LLMClient(settings, cache_location=llm_cache) as client:
        queries = rewrite_queries(mode, cases, client, count=setup.count, desc=f"rewrite {mode}")
    return RewrittenQueries(mode=mode, queries=queries, stats=RewriteStats.of(mode, settings.model, queries))
