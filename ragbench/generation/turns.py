"""Generated assistant turns: a case's earlier answer written by the cell under test, not given in the case.

A turn written ``{role: assistant, generate: true}`` is the cell's own answer to the conversation so far:
the user message before it is one more question the cell searched with every case (its rewrite, retrieve
and rerank stages rank `EvalCase.turn_questions`), and the cell's reader answers it from the cell's top_n
passages for it, with the reader prompt and the turns before it, through the one LLM client (cached,
retried, counted, charged to the budget). Turns are written in order, one `complete_many` batch per depth
(every case's first generated turn, then every second one, ...), since a later turn reads the earlier ones.
The case's question is then answered after the conversation as written, and the answer records it
(`ReaderAnswer.history`, generated turns marked), so the report and the review page show what the reader saw.

A case whose generated turn fails is not asked its question: its answer fails, saying which turn failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragbench.generation.reader import (
    ReaderAnswer,
    answer_questions,
    build_reader_messages,
    build_reader_requests,
)
from ragbench.inputs.conversation import Turn, placeholder_history
from ragbench.inputs.eval_cases import EvalCase, searched_cases, turn_question_id
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import DEFAULT_PROMPT, PromptTemplate
from ragbench.llm.types import LLMRequest, LLMResult
from ragbench.retrieval.search import RetrievedChunk

__all__ = ["WrittenTurns", "answer_conversations", "planned_reader_requests", "write_turns"]


@dataclass
class WrittenTurns:
    """One case's conversation as its generated turns are written, and what writing them cost."""

    history: list[Turn]
    error: str | None = None  # the generated turn that failed, and why
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: litellm has no price for the model
    retries: int = 0

    def next_turn(self) -> int | None:
        """The place (from 1) of the first generated turn still to write, None when all are written."""
        return next((n for n, turn in enumerate(self.history, start=1) if turn.pending), None)

    def request(
        self,
        case_id: str,
        number: int,
        passages: Mapping[str, Sequence[RetrievedChunk]],
        prompt: PromptTemplate,
    ) -> LLMRequest:
        """The reader's call for turn `number`: the user message before it as the question, after the
        turns before that, with the passages the cell found for it."""
        return LLMRequest(
            messages=build_reader_messages(
                self.history[number - 2].content,
                passages[turn_question_id(case_id, number)],
                prompt,
                self.history[: number - 2],
            )
        )

    def record(self, number: int, result: LLMResult) -> None:
        """Turn `number` as the reader wrote it (its usage counted either way), or the case's error."""
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        cost = result.known_cost_usd
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost
        self.retries += result.retries
        text = result.text.strip() if result.error is None else ""
        if not text:
            self.error = f"generated turn {number}: " + (result.error or "the reader replied nothing")
            return
        self.history[number - 1] = self.history[number - 1].model_copy(update={"content": text})

    def charged(self, answer: ReaderAnswer) -> ReaderAnswer:
        """`answer` with the conversation it was asked after and the turns' tokens and cost added: what the
        case cost the cell (its latency stays the question's own call)."""
        cost = None if answer.cost_usd is None or self.cost_usd is None else answer.cost_usd + self.cost_usd
        return answer.model_copy(
            update={
                "history": self.history,
                "prompt_tokens": answer.prompt_tokens + self.prompt_tokens,
                "completion_tokens": answer.completion_tokens + self.completion_tokens,
                "cost_usd": cost if cost is None else round(cost, 8),
                "retries": answer.retries + self.retries,
            }
        )


def write_turns(
    client: LLMClient,
    cases: Sequence[EvalCase],
    passages: Mapping[str, Sequence[RetrievedChunk]],
    *,
    prompt: PromptTemplate = DEFAULT_PROMPT,
    desc: str = "reader",
) -> dict[str, WrittenTurns]:
    """Every generated turn of `cases`, by case id (cases without one are absent). `passages`: the cell's
    top_n passages per turn question id (`turn_question_id`)."""
    written = {
        case.id: WrittenTurns(history=list(case.history))
        for case in cases
        if any(turn.generate for turn in case.history)
    }
    while due := [
        (case_id, turns, number)
        for case_id, turns in written.items()
        if turns.error is None and (number := turns.next_turn()) is not None
    ]:
        requests = [turns.request(case_id, number, passages, prompt) for case_id, turns, number in due]
        results = client.complete_many(requests, desc=f"{desc} (generated turns)")
        if len(results) != len(requests):
            raise RuntimeError(f"LLM client returned {len(results)} results for {len(requests)} requests")
        for (_, turns, number), result in zip(due, results, strict=True):
            turns.record(number, result)
    return written


def answer_conversations(
    client: LLMClient,
    cases: Sequence[EvalCase],
    contexts: Sequence[Sequence[RetrievedChunk]],
    turn_passages: Mapping[str, Sequence[RetrievedChunk]],
    *,
    prompt: PromptTemplate = DEFAULT_PROMPT,
    desc: str = "reader",
) -> list[ReaderAnswer]:
    """`answer_questions` after writing the cases' generated turns (`write_turns`): answers in case order,
    each recording the conversation its question was asked after; a case whose turn failed is not asked."""
    written = write_turns(client, cases, turn_passages, prompt=prompt, desc=desc)
    failed = {case_id for case_id, turns in written.items() if turns.error is not None}
    asked = [
        (
            case.model_copy(update={"history": written[case.id].history}) if case.id in written else case,
            chunks,
        )
        for case, chunks in zip(cases, contexts, strict=True)
        if case.id not in failed
    ]
    answered = iter(
        answer_questions(
            client, [case for case, _ in asked], [chunks for _, chunks in asked], prompt=prompt, desc=desc
        )
    )
    answers = []
    for case, chunks in zip(cases, contexts, strict=True):
        turns = written.get(case.id)
        if turns is None:
            answers.append(next(answered))
        elif case.id in failed:
            failure = ReaderAnswer(
                case_id=case.id,
                question=case.question,
                answer=None,
                error=turns.error,
                contexts=list(chunks),
                cost_usd=0.0,
            )
            answers.append(turns.charged(failure))
        else:
            answers.append(turns.charged(next(answered)))
    return answers


def planned_reader_requests(
    cases: Sequence[EvalCase], context: Sequence[RetrievedChunk], prompt: PromptTemplate, answer: str
) -> list[LLMRequest]:
    """Every reader call a cell makes on `cases`, for a dry run to price: one per case and one per generated
    turn (the question it answers, `searched_cases`), each with `context` as its passages and `answer`
    standing for every generated turn it reads."""
    asked = [
        case.model_copy(update={"history": placeholder_history(case.history, answer)})
        for case in searched_cases(cases)
    ]
    return build_reader_requests(asked, [context] * len(asked), prompt)
