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

A grid cell that rewrites its queries (any query_rewrite but off) reads the conversation when it searches, so
every question asked after a turn the cell wrote (a later turn's, and the case's own) is searched again once
that turn is written (`ragbench.retrieval.follow_up`): the follow-up is answered from what this cell's
conversation finds, and its rewrite call is charged to the case. A failed rewrite fails the turn or the case.
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
from ragbench.retrieval.follow_up import SearchedAgain, reads_written_turns
from ragbench.retrieval.search import RetrievedChunk

__all__ = [
    "SearchAgain",
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
    search: SearchedAgain | None = None  # the turn's question searched again after the cell's own turns


# Searches a batch of questions again, each after its conversation as written: a rewriting cell's
# `FollowUpSearcher.search` with its rewriter bound (`ragbench.retrieval.follow_up`).
SearchAgain = Callable[[list[EvalCase]], list[SearchedAgain]]

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

    def charge(self, call: TurnReply | SearchedAgain) -> None:
        """One call's usage, a turn's or a search's, added to what the case's turns cost."""
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.cost_usd = (
            None if call.cost_usd is None or self.cost_usd is None else self.cost_usd + call.cost_usd
        )
        self.calls_sent += not call.cached

    def record(self, number: int, reply: TurnReply) -> None:
        """Turn `number` as written (its usage, and its search's, counted either way), or the case's error."""
        if reply.search is not None:
            self.charge(reply.search)
        self.charge(reply)
        self.retries += reply.retries
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


def searched_again(
    questions: Sequence[EvalCase], search_again: SearchAgain | None
) -> dict[str, SearchedAgain]:
    """By question id, the questions of `questions` a rewriting cell searches again (`reads_written_turns`):
    none without `search_again`."""
    again = [question for question in questions if reads_written_turns(question)]
    if search_again is None or not again:
        return {}
    found = search_again(again)
    if len(found) != len(again):
        raise RuntimeError(f"{len(found)} searches for {len(again)} follow-ups")
    return {question.id: search for question, search in zip(again, found, strict=True)}


def reader_turns(
    client: LLMClient,
    passages: Mapping[str, Sequence[RetrievedChunk]],
    prompt: PromptTemplate,
    desc: str,
    search_again: SearchAgain | None = None,
) -> Writer:
    """A grid cell's writer: its reader answers each turn's question from the cell's passages for it, found
    again after the turns it wrote before when the cell rewrites (`search_again`); a turn whose search
    failed is not written."""

    def write(questions: list[EvalCase]) -> list[TurnReply]:
        again = searched_again(questions, search_again)
        asked = [q for q in questions if q.id not in again or again[q.id].error is None]
        requests = build_reader_requests(
            asked, [again[q.id].passages if q.id in again else passages[q.id] for q in asked], prompt
        )
        results = dict(
            zip(
                [q.id for q in asked],
                client.complete_many(requests, desc=f"{desc} (generated turns)"),
                strict=True,
            )
        )
        replies = []
        for question in questions:
            search = again.get(question.id)
            if (result := results.get(question.id)) is None:
                assert search is not None and search.error is not None
                replies.append(TurnReply(text="", error=search.error, search=search, cached=True))
                continue
            replies.append(
                TurnReply(
                    text=result.text if result.error is None else "",
                    error=result.error,
                    prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens,
                    cost_usd=result.known_cost_usd,
                    retries=result.retries,
                    cached=result.cached,
                    search=search,
                )
            )
        return replies

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
    search_again: SearchAgain | None = None,
) -> list[ReaderAnswer]:
    """`answer_questions` after writing the cases' generated turns (`write_turns`): answers in case order,
    each recording the conversation its question was asked after; a case whose turn failed is not asked.
    `search_again`: a rewriting cell's search (`ragbench.retrieval.follow_up`), with which each question
    after a turn the cell wrote is answered from its passages found again after that turn."""
    written = write_turns(cases, reader_turns(client, turn_passages, prompt, desc, search_again))
    written_well = [case for case in cases if case.id not in written or written[case.id].error is None]
    again = searched_again([asked_after(case, written) for case in written_well], search_again)
    for case_id, search in again.items():  # the follow-up's search is charged to the case either way
        turns = written[case_id]
        turns.charge(search)
        if search.error is not None:
            turns.error = search.error
    failed = {case_id for case_id, turns in written.items() if turns.error is not None}
    contexts = [
        again[case.id].passages if case.id in again and case.id not in failed else chunks
        for case, chunks in zip(cases, contexts, strict=True)
    ]
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
            answer = turns.charged(next(answered))
            if (search := again.get(case.id)) is not None:
                answer = answer.model_copy(update={"searched": search.queries, "searched_again": True})
            answers.append(answer)
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
