"""The query rewrite before the first-stage search (the `query_rewrite` axis): what a cell searches for a
case, its question as is or what an LLM made of its conversation and question.

- ``off``: the last question as is (no call), the grid's behaviour before conversations.
- ``condense``: the conversation and the question rewritten into one standalone query (one call per case
  that has earlier turns; a single question is standalone already and is searched as is, no call).
- ``hyde``: a hypothetical passage answering the question, searched instead of it (one call per case).
- ``multi_query``: `multi_query_count` rewrites, each searched, their rankings fused by reciprocal rank
  (`lexical.reciprocal_rank_fusion`, the fusion the hybrid retriever uses; one call per case).

Every call goes through the one LLM client (cached, retried, counted) with its prompt from
`ragbench.llm.prompts.REWRITE_PROMPTS`, in one `complete_many` batch. A failed call does not fail the
case: it is searched with its question as is, and `CaseQueries.error` says why, so the retrieval metrics
still count it (as the miss it likely is) and the run's rewrite failures are counted."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from ragbench.inputs.conversation import conversation_text
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import REWRITE_PROMPTS
from ragbench.llm.types import LLMRequest, LLMResult, LLMSettings

QueryRewrite = Literal["off", "condense", "hyde", "multi_query"]
QUERY_REWRITES: tuple[QueryRewrite, ...] = ("off", "condense", "hyde", "multi_query")
OFF: QueryRewrite = "off"
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


class CaseQueries(BaseModel):
    """What was searched for one case: `queries` (several for multi_query, fused), the question as is when
    nothing was rewritten (`rewritten` False: off, condense of a single question, or a failed call)."""

    case_id: str
    queries: list[str]
    rewritten: bool = False
    error: str | None = None  # the call failed or replied nothing usable: the question was searched
    calls: int = 0  # LLM calls this case's rewrite took (0 or 1), cached ones included
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: litellm has no price for the model


class RewriteStats(BaseModel):
    """A retrieve key's rewrite, summed over its cases: what the results table and the dry run count."""

    mode: QueryRewrite
    model: str
    calls: int
    cached: int
    failures: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None

    @classmethod
    def of(cls, mode: QueryRewrite, model: str, queries: Sequence[CaseQueries]) -> RewriteStats:
        costs = [q.cost_usd for q in queries]
        return cls(
            mode=mode,
            model=model,
            calls=sum(q.calls for q in queries),
            cached=sum(q.cached for q in queries),
            failures=sum(q.error is not None for q in queries),
            prompt_tokens=sum(q.prompt_tokens for q in queries),
            completion_tokens=sum(q.completion_tokens for q in queries),
            cost_usd=None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 6),
        )


def needs_call(mode: QueryRewrite, case: EvalCase) -> bool:
    """Whether rewriting `case` takes an LLM call: never with off; condense only after earlier turns."""
    if mode == OFF:
        return False
    return bool(case.history) or mode != "condense"


def rewrite_request(mode: QueryRewrite, case: EvalCase, count: int) -> LLMRequest:
    """The one call that rewrites `case` (no model call here, so a dry run can count its tokens)."""
    prompt = REWRITE_PROMPTS[mode]
    return LLMRequest(messages=prompt.messages(case.question, conversation_text(case.history), count))


def rewrite_requests(mode: QueryRewrite, cases: Sequence[EvalCase], count: int) -> list[LLMRequest]:
    """Every call a retrieve key's rewrite makes, in case order: what the dry run prices."""
    return [rewrite_request(mode, case, count) for case in cases if needs_call(mode, case)]


def parse_reply(mode: QueryRewrite, text: str, count: int) -> list[str]:
    """The queries in a reply: condense its first line, hyde the whole passage, multi_query up to `count`
    lines with any list marks (``1.``, ``-``) and quotes taken off. Empty: nothing usable."""
    if mode == "hyde":
        passage = " ".join(text.split())
        return [passage] if passage else []
    lines = [_LIST_MARK.sub("", line).strip().strip("\"'`").strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    return lines[:1] if mode == "condense" else list(dict.fromkeys(lines))[:count]


def _queries(mode: QueryRewrite, case: EvalCase, result: LLMResult, count: int) -> CaseQueries:
    usage = {
        "calls": 1,
        "cached": result.cached,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost_usd": result.known_cost_usd,
    }
    if result.error is not None:
        return CaseQueries(case_id=case.id, queries=[case.question], error=result.error, **usage)
    parsed = parse_reply(mode, result.text, count)
    if not parsed:
        error = f"the {mode} reply held no query: {result.text[:80]!r}"
        return CaseQueries(case_id=case.id, queries=[case.question], error=error, **usage)
    return CaseQueries(case_id=case.id, queries=parsed, rewritten=True, **usage)


def rewrite_queries(
    mode: QueryRewrite, cases: Sequence[EvalCase], client: LLMClient | None, *, count: int, desc: str
) -> list[CaseQueries]:
    """What to search for every case, in case order; `client` is the rewriter's (None only with off)."""
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
        case.id: _queries(mode, case, result, count) for case, result in zip(calling, results, strict=True)
    }
    return [by_case.get(case.id) or CaseQueries(case_id=case.id, queries=[case.question]) for case in cases]


class RewriteSetup(BaseModel):
    """What a retrieve key's rewrite depends on, the retrieve step's cache-keyed parameter: the rewriter's
    result settings (`LLMSettings.result_fields`; its concurrency, timeouts and retries come with the run's
    operations, outside the key), the number of multi_query queries and the fusion's k."""

    rewriter: dict[str, Any]
    count: int
    rrf_k: int

    def settings(self, operations: dict[str, dict[str, Any]]) -> LLMSettings:
        """The rewriter with its operational settings put back (`operations`: by `result_key`)."""
        settings = LLMSettings.model_validate(self.rewriter)
        return settings.model_copy(update=operations.get(settings.result_key, {}))


def queries_for(
    mode: QueryRewrite | None,
    cases: Sequence[EvalCase],
    setup: RewriteSetup | None,
    operations: dict[str, dict[str, Any]],
    *,
    llm_cache: str | None,
    desc: str,
) -> tuple[list[CaseQueries] | None, RewriteStats | None]:
    """A retrieve key's queries and their calls' summary; (None, None) when it searches the questions as
    they are (off), so such a key computes exactly what it computed before the axis existed."""
    if mode is None or mode == OFF:
        return None, None
    if setup is None:
        raise ValueError(f"query rewrite {mode} needs its rewriter's setup")
    settings = setup.settings(operations)
    with LLMClient(settings, cache_location=llm_cache) as client:
        queries = rewrite_queries(mode, cases, client, count=setup.count, desc=desc)
    return queries, RewriteStats.of(mode, settings.model, queries)
