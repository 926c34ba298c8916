"""The query rewrite before the first-stage search (the `query_rewrite` axis): what a cell searches for a
case, its question as is or what an LLM made of its conversation and question.

- ``off``: the last question as is (no call), the grid's behaviour before conversations.
- ``condense``: the conversation and the question rewritten into one standalone query (one call per case
  that has earlier turns; a single question is standalone already and is searched as is, no call).
- ``hyde``: a hypothetical passage answering the question, searched instead of it (one call per case).
- ``multi_query``: `multi_query_count` rewrites, each searched, their rankings fused by reciprocal rank
  (`lexical.reciprocal_rank_fusion`, the fusion the hybrid retriever uses; one call per case).

Every call goes through the one LLM client (cached, retried, counted) with its prompt from
`ragbench.llm.prompts.REWRITE_PROMPTS`, in one `complete_many` batch, in a step of its own per mode
(`ragbench.retrieval.rewriter`, `steps.rewrite`): once for every retrieve key of that mode, and the search
steps' code stays free of the client. A failed call does not fail the case: it is searched with its question
as is, and `CaseQueries.error` says why, so the retrieval metrics still count it (as the miss it likely is)
and the run's rewrite failures are counted. This module holds what the search reads, and no call."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from ragbench.inputs.conversation import conversation_text, placeholder_history
from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.llm.budget import is_budget_refusal
from ragbench.llm.prompts import REWRITE_PROMPTS
from ragbench.llm.types import LLMRequest, LLMResult

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
    refused: int = 0  # of the failures: calls the run's spend cap did not send (the cell is incomplete)
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
            refused=sum(is_budget_refusal(q.error) for q in queries),
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
    """Every call a retrieve key's rewrite makes, in case order, the generated turns' questions after the
    cases (`searched_cases`): what the dry run prices."""
    return [rewrite_request(mode, case, count) for case in searched_cases(cases) if needs_call(mode, case)]


def follow_up_rewrite_requests(
    mode: QueryRewrite, cases: Sequence[EvalCase], count: int, answer: str
) -> list[LLMRequest]:
    """The calls a rewriting cell makes on `cases` beside its mode's rewrite step: each question after a
    turn the cell writes rewritten again once that turn is written (`ragbench.retrieval.follow_up`), with
    `answer` standing for every generated turn (the dry run's guess at its length). None with off."""
    if mode == OFF:
        return []
    asked = [
        case.model_copy(update={"history": placeholder_history(case.history, answer)})
        for case in searched_cases(cases)
        if any(turn.generate for turn in case.history)
    ]
    return [rewrite_request(mode, case, count) for case in asked]


def parse_reply(mode: QueryRewrite, text: str, count: int) -> list[str]:
    """The queries in a reply: condense its first line, hyde the whole passage, multi_query up to `count`
    lines with any list marks (``1.``, ``-``) and quotes taken off. Empty: nothing usable."""
    if mode == "hyde":
        passage = " ".join(text.split())
        return [passage] if passage else []
    lines = [_LIST_MARK.sub("", line).strip().strip("\"'`").strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    return lines[:1] if mode == "condense" else list(dict.fromkeys(lines))[:count]


def case_queries(mode: QueryRewrite, case: EvalCase, result: LLMResult, count: int) -> CaseQueries:
    """What one rewrite call gives a case to search: its parsed queries, or its question as is with the
    reason when the call failed or its reply held no query."""
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


class RewrittenQueries(BaseModel):
    """What one mode's rewrite step gives every retrieve key of that mode: each case's queries, in case
    order, and the calls' summary."""

    mode: QueryRewrite
    queries: list[CaseQueries]
    stats: RewriteStats
