"""The RAG reader: answer each question from its numbered context passages with one LLM.

The prompt is a `PromptTemplate` (a grid axis); the default is short because the offline readers are
small local models (Qwen2.5-Coder 1.5B/0.5B): a system message with the rules, then the passages as
``<passage id="1" source="...">`` data sections (`ragbench.llm.prompts.data_section`), then the
question.
The model must answer from the passages only, in 1-3 sentences, cite passage numbers like ``[2]``, and
reply with the fixed phrase `NOT_IN_CONTEXT` when the passages do not hold the answer, so keyword tests
can tell a refusal from a guess.

All questions go to the client in one `complete_many` call (concurrent for hosted models, cached,
retried, counted). A failed call keeps its case: `answer` is None and `error` says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ragbench.inputs.conversation import Turn
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import (
    DEFAULT_PROMPT,
    NOT_IN_CONTEXT,
    PromptTemplate,
    format_passages,
    says_not_in_context,
)
from ragbench.llm.types import LLMRequest, Message
from ragbench.retrieval.search import RetrievedChunk

__all__ = [
    "NOT_IN_CONTEXT",
    "ReaderAnswer",
    "answer_questions",
    "build_reader_messages",
    "build_reader_requests",
    "says_not_in_context",
]


def build_reader_messages(
    question: str,
    chunks: Sequence[RetrievedChunk],
    prompt: PromptTemplate = DEFAULT_PROMPT,
    history: Sequence[Turn] = (),
) -> list[Message]:
    """The chat messages for one question, after the conversation's earlier turns (`history`) when it has
    any; no model call, so a dry run can count their tokens."""
    return prompt.messages(
        question,
        format_passages([c.text for c in chunks], [c.source for c in chunks], cite_numbers=True),
        [turn.message() for turn in history],
    )


def build_reader_requests(
    cases: Sequence[EvalCase],
    contexts: Sequence[Sequence[RetrievedChunk]],
    prompt: PromptTemplate = DEFAULT_PROMPT,
) -> list[LLMRequest]:
    """One request per case, in case order (also what `llm.estimate_cost` takes for a dry run)."""
    if len(cases) != len(contexts):
        raise ValueError(f"{len(cases)} cases but {len(contexts)} context lists")
    return [
        LLMRequest(messages=build_reader_messages(case.question, chunks, prompt, case.history))
        for case, chunks in zip(cases, contexts, strict=True)
    ]


class ReaderAnswer(BaseModel):
    """One generated answer with the passages it was generated from (in the order the model saw them).

    `answer` is None exactly when the call failed; `error` then says why.
    """

    case_id: str
    question: str
    # the conversation before the question, as the reader saw it (empty for a single question)
    history: list[Turn] = Field(default_factory=list)
    # what the retriever searched for it when a query rewrite changed it (empty: the question as is)
    searched: list[str] = Field(default_factory=list)
    # searched again after the cell's own earlier turns (`ragbench.retrieval.follow_up`): `contexts` and
    # `searched` are that search's, not the stages' (which searched the case with its given turns only)
    searched_again: bool = False
    answer: str | None
    error: str | None = None
    contexts: list[RetrievedChunk] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = 0.0  # None: litellm has no price for the model
    retries: int = 0
    cached: bool = False
    retried_earlier_failure: bool = False  # the call failed in an earlier run and was made again

    @property
    def ok(self) -> bool:
        return self.error is None


def answer_questions(
    client: LLMClient,
    cases: Sequence[EvalCase],
    contexts: Sequence[Sequence[RetrievedChunk]],
    *,
    prompt: PromptTemplate = DEFAULT_PROMPT,
    desc: str = "reader",
) -> list[ReaderAnswer]:
    """Answer every case from its passages; results in case order, failed calls included."""
    requests = build_reader_requests(cases, contexts, prompt)
    results = client.complete_many(requests, desc=desc)
    if len(results) != len(requests):
        raise RuntimeError(f"LLM client returned {len(results)} results for {len(requests)} requests")
    answers = []
    for case, chunks, result in zip(cases, contexts, results, strict=True):
        answers.append(
            ReaderAnswer(
                case_id=case.id,
                question=case.question,
                history=case.history,
                answer=result.text.strip() if result.error is None else None,
                error=result.error,
                contexts=list(chunks),
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                latency_s=result.latency_s,
                cost_usd=result.known_cost_usd,
                retries=result.retries,
                cached=result.cached,
                retried_earlier_failure=result.retried_earlier_failure,
            )
        )
    return answers
