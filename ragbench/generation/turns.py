"""Generated assistant turns: a case's earlier answer written by the cell under test, not given in the case.

A turn written ``{role: assistant, generate: true}`` is the cell's own answer to the conversation so far,
the user message before it asked after the turns before that (`EvalCase.turn_questions`):

- a grid cell searched that question with every case (its rewrite, retrieve and rerank stages rank
  `searched_cases`), and its reader answers it from the cell's top_n passages for it, with the reader
  prompt, through the one LLM client (cached, retried, counted, charged to the budget);
- an external system is asked it as any question in conversation (`ExternalClient.ask_many`: cached by
  system, version and conversation, retried, charged), and its answer is the turn.

Turns are written in order, one batch per depth (every case's first generated turn, then every second one,
...), since a later turn reads the earlier ones as written. The case's question is then asked after the
conversation as written, and the answer records it (`ReaderAnswer.history`, generated turns marked), so the
report and the review page show what the system saw. A case whose generated turn fails is not asked its
question: its answer fails, saying which turn failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragbench.generation.external import ExternalClient
from ragbench.generation.reader import ReaderAnswer, answer_questions, build_reader_requests
from ragbench.inputs.conversation import Turn, placeholder_history
from ragbench.inputs.eval_cases import EvalCase, searched_cases, turn_question_id
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import DEFAULT_PROMPT, PromptTemplate
from ragbench.llm.types import LLMRequest
from ragbench.retrieval.search import RetrievedChunk

__all__ = [
    "TurnReply",
    "WrittenTurns",
    "answer_conversations",
    "asked_after",
    "external_turns",
    "planned_reader_requests",
    "reader_turns",
    "write_turns",
]


@dataclass(frozen=True)
class TurnReply:
    """What the call writing one generated turn gave: its text (blank: it failed, `error` says why) and
    what it cost (an external system's tokens and cost are out of sight)."""

    text: str
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: unknown (no price for the model, or an external system)
    retries: int = 0
    cached: bool = False


# Writes a batch of generated turns: each turn's question (`EvalCase.turn_questions`, its history written
# so far) in, each reply out, in order.
Writer = Callable[[list[EvalCase]], list[TurnReply]]


@dataclass
class WrittenTurns:
    """One case's conversation as its generated turns are written, and what writing them cost."""

    history: list[Turn]
    error: str | None = None  # the generated turn that failed, and why
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: unknown
    retries: int = 0
    calls_sent: int = 0  # calls not served from a cache

    def next_turn(self) -> int | None:
        """The place (from 1) of the first generated turn still to write, None when all are written."""
        return next((n for n, turn in enumerate(self.history, start=1) if turn.pending), None)

    def asked(self, question: EvalCase) -> EvalCase:
        """A turn's question (`EvalCase.turn_questions`) after the turns before it as written so far. Set
        past the load checks, which refuse a generated turn with content: a case as written has none yet."""
        return question.model_copy(update={"history": self.history[: len(question.history)]})

    def record(self, number: int, reply: TurnReply) -> None:
        """Turn `number` as written (its usage counted either way), or the case's error."""
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.cost_usd = (
            None if reply.cost_usd is None or self.cost_usd is None else self.cost_usd + reply.cost_usd
        )
        self.retries += reply.retries
        self.calls_sent += not reply.cached
        text = reply.text.strip()
        if reply.error is not None or not text:
            self.error = f"generated turn {number}: " + (reply.error or "the system replied nothing")
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


def write_turns(cases: Sequence[EvalCase], writer: Writer) -> dict[str, WrittenTurns]:
    """Every generated turn of `cases`, by case id (cases without one are absent), depth by depth."""
    written = {
        case.id: WrittenTurns(history=list(case.history))
        for case in cases
        if any(turn.generate for turn in case.history)
    }
    turn_questions = {question.id: question for case in cases for question in case.turn_questions()}
    while due := [
        (case_id, turns, number)
        for case_id, turns in written.items()
        if turns.error is None and (number := turns.next_turn()) is not None
    ]:
        questions = [
            turns.asked(turn_questions[turn_question_id(case_id, number)]) for case_id, turns, number in due
        ]
        replies = writer(questions)
        if len(replies) != len(questions):
            raise RuntimeError(f"{len(replies)} replies for {len(questions)} generated turns")
        for (_, turns, number), reply in zip(due, replies, strict=True):
            turns.record(number, reply)
    return written


def reader_turns(
    client: LLMClient, passages: Mapping[str, Sequence[RetrievedChunk]], prompt: PromptTemplate, desc: str
) -> Writer:
    """A grid cell's writer: its reader answers each turn's question from the cell's passages for it."""

    def write(questions: list[EvalCase]) -> list[TurnReply]:
        requests = build_reader_requests(questions, [passages[q.id] for q in questions], prompt)
        return [
            TurnReply(
                text=result.text if result.error is None else "",
                error=result.error,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                cost_usd=result.known_cost_usd,
                retries=result.retries,
                cached=result.cached,
            )
            for result in client.complete_many(requests, desc=f"{desc} (generated turns)")
        ]

    return write


def external_turns(client: ExternalClient, desc: str) -> Writer:
    """An external system's writer: the system is asked each turn's question in conversation."""

    def write(questions: list[EvalCase]) -> list[TurnReply]:
        results = client.ask_many(
            [q.question for q in questions],
            histories=[[turn.message() for turn in q.history] for q in questions],
            desc=f"{desc} (generated turns)",
        )
        return [
            TurnReply(
                text=result.reply.answer if result.reply is not None else "",
                error=result.error or (None if result.reply is not None else "no reply"),
                cost_usd=None,
                retries=result.retries,
                cached=result.cached,
            )
            for result in results
        ]

    return write


def asked_after(case: EvalCase, written: Mapping[str, WrittenTurns]) -> EvalCase:
    """`case` with its conversation as written (itself when it has no generated turn)."""
    return case.model_copy(update={"history": written[case.id].history}) if case.id in written else case


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
    written = write_turns(cases, reader_turns(client, turn_passages, prompt, desc))
    failed = {case_id for case_id, turns in written.items() if turns.error is not None}
    asked = [
        (asked_after(case, written), chunks)
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
