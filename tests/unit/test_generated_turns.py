"""Generated assistant turns: written `{role: assistant, generate: true}`, validated at load, searched as
questions of their own, written by the cell's reader in order before the case's question (fakes for the
client), recorded with the answer, priced by the dry run, and refused for external systems."""

from __future__ import annotations

import json

import pytest

from ragbench.config.preflight import check_histories
from ragbench.generation.external import ExternalReply, ExternalResult
from ragbench.generation.turns import (
    answer_conversations,
    external_turns,
    planned_reader_requests,
    write_turns,
)
from ragbench.grid.cell import CellSpec
from ragbench.inputs.conversation import Turn, conversation_text
from ragbench.inputs.eval_cases import EvalCase, EvalCaseError, EvalSuite, load_eval_cases, searched_cases
from ragbench.llm.prompts import DEFAULT_PROMPT
from ragbench.llm.types import LLMRequest, LLMResult
from ragbench.report.cases import case_data
from ragbench.report.view import CaseView
from ragbench.retrieval.follow_up import SearchedAgain
from ragbench.retrieval.rewrite import follow_up_rewrite_requests
from ragbench.retrieval.search import RetrievedChunk
from ragbench.review.labels import LabelStore
from ragbench.review.queue import ReviewItem
from ragbench.review.server import ReviewSession
from ragbench.scoring.rubrics import JudgeInput

GENERATED = {"role": "assistant", "generate": True}
TWO_TURNS = [
    {"role": "user", "content": "How do I read a file?"},
    GENERATED,
    {"role": "user", "content": "And line by line?"},
    GENERATED,
]


def case(history: list[dict], case_id: str = "c", question: str = "And how do I close it?") -> EvalCase:
    return EvalCase.model_validate({"id": case_id, "question": question, "history": history})


def chunk(source: str) -> RetrievedChunk:
    return RetrievedChunk(position=0, source=source, score=1.0, text=f"text of {source}")


def test_a_generated_turn_loads_without_content_and_given_turns_dump_as_before(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": [{"id": "c", "question": "q", "history": TWO_TURNS}]}))
    (loaded,) = load_eval_cases(path)
    assert [turn.pending for turn in loaded.history] == [False, True, False, True]
    assert Turn(role="user", content="x").model_dump() == {"role": "user", "content": "x"}  # fingerprints
    assert loaded.history[1].model_dump() == {"role": "assistant", "content": "", "generate": True}
    given = case([TWO_TURNS[0], {"role": "assistant", "content": "open()"}])
    assert EvalSuite.of([given]).fingerprint == EvalSuite.of([given.model_copy()]).fingerprint
    assert EvalSuite.of([loaded]).fingerprint != EvalSuite.of([given]).fingerprint


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([{"role": "user", "generate": True}], "a generated turn is the assistant's, not the user's"),
        ([TWO_TURNS[0], GENERATED | {"content": "open()"}], "turn 2 is generated and has content"),
        ([GENERATED], "turn 1 is generated but does not follow a user turn"),
        (
            [TWO_TURNS[0], {"role": "assistant", "content": "open()"}, GENERATED],
            "turn 3 is generated but does not follow a user turn",
        ),
    ],
)
def test_a_bad_generated_turn_fails_at_load_naming_the_case(tmp_path, history, message):
    path = tmp_path / "cases.json"
    path.write_text(
        json.dumps(
            {"cases": [{"id": "ok", "question": "q"}, {"id": "b", "question": "q", "history": history}]}
        )
    )
    with pytest.raises(EvalCaseError, match=f"(?s)case #2 is invalid.*{message}"):
        load_eval_cases(path)


def test_each_generated_turn_is_searched_as_the_user_message_it_answers():
    talk = case(TWO_TURNS)
    plain = EvalCase(id="p", question="What is pass?")
    searched = searched_cases([talk, plain])
    assert [c.id for c in searched] == ["c", "p", "c#turn2", "c#turn4"]
    assert [c.question for c in searched[2:]] == ["How do I read a file?", "And line by line?"]
    assert [len(c.history) for c in searched[2:]] == [0, 2]
    # what runs before any cell answers (a query rewrite) reads the given turns only
    assert conversation_text(searched[3].history) == "User: How do I read a file?"
    assert searched[2].expected_sources == [] and searched[2].reference_answer is None


class FakeReader:
    """Replies with a numbered text per call, or fails the calls whose last message holds `fail_on`;
    records every batch it was sent (in order: one batch per depth, then the questions)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[list[LLMRequest]] = []
        self.fail_on = fail_on

    def complete_many(self, requests: list[LLMRequest], desc: str = "") -> list[LLMResult]:
        self.batches.append(list(requests))
        results = []
        for request in requests:
            last = request.messages[-1]["content"]
            if self.fail_on is not None and self.fail_on in last:
                results.append(LLMResult(model="m", error="HTTP 500", prompt_tokens=3))
            else:
                reply = f"reply {sum(map(len, self.batches))}"
                results.append(
                    LLMResult(model="m", text=reply, prompt_tokens=10, completion_tokens=2, cost_usd=0.5)
                )
        return results


def test_the_reader_writes_each_turn_in_order_from_its_own_passages_before_the_question():
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    reader = FakeReader()
    passages = {"c#turn2": [chunk("files.md")], "c#turn4": [chunk("lines.md")]}
    answers = answer_conversations(
        reader,
        [talk, plain],
        [[chunk("close.md")], [chunk("pass.md")]],
        passages,
        prompt=DEFAULT_PROMPT,  # type: ignore[arg-type]
    )
    first, second, questions = reader.batches
    assert len(first) == len(second) == 1 and len(questions) == 2  # one batch per depth, then the questions
    assert "files.md" in first[0].messages[-1]["content"]
    # the second turn's call reads the first as the reader wrote it
    assert [m["content"] for m in second[0].messages[1:3]] == ["How do I read a file?", "reply 1"]
    assert "lines.md" in second[0].messages[-1]["content"]
    asked = questions[0].messages
    assert [m["content"] for m in asked if m["role"] == "assistant"] == ["reply 1", "reply 2"]
    assert "close.md" in asked[-1]["content"]
    recorded = answers[0].history
    assert [(turn.content, turn.generate) for turn in recorded if turn.role == "assistant"] == [
        ("reply 1", True),
        ("reply 2", True),
    ]
    # the answer carries what the case cost the cell: the two turns' calls and its own
    assert (answers[0].prompt_tokens, answers[0].cost_usd) == (30, 1.5)
    assert answers[1].history == [] and answers[1].prompt_tokens == 10


def test_a_failed_turn_fails_its_case_without_asking_the_question():
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    reader = FakeReader(fail_on="line by line")
    answers = answer_conversations(
        reader,
        [talk, plain],
        [[chunk("close.md")], [chunk("pass.md")]],  # type: ignore[arg-type]
        {"c#turn2": [chunk("a.md")], "c#turn4": [chunk("b.md")]},
    )
    assert answers[0].answer is None and answers[0].error == "generated turn 4: HTTP 500"
    assert answers[0].prompt_tokens == 13  # both turn calls, no question
    assert answers[1].answer is not None
    assert len(reader.batches[-1]) == 1  # only the plain case's question was asked


class FakeSearch:
    """A rewriting cell's search after its own turns: records each batch of questions (with their
    conversation as written) and finds a passage named after the last assistant turn, or fails a question
    whose conversation holds `fail_after`."""

    def __init__(self, fail_after: str | None = None) -> None:
        self.batches: list[list[EvalCase]] = []
        self.fail_after = fail_after

    def __call__(self, questions: list[EvalCase]) -> list[SearchedAgain]:
        self.batches.append(list(questions))
        found = []
        for question in questions:
            said = [turn.content for turn in question.history if turn.role == "assistant"][-1]
            if self.fail_after is not None and self.fail_after == said:
                found.append(SearchedAgain(passages=[], queries=[question.question], error="HTTP 429"))
                continue
            passage = chunk(f"after {said}.md")
            found.append(
                SearchedAgain(
                    passages=[passage],
                    queries=[f"{question.question} ({said})"],
                    prompt_tokens=7,
                    cost_usd=0.25,
                    cached=False,
                )
            )
        return found


def test_a_rewriting_cell_searches_every_question_after_its_own_turn_again():
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    given = case([TWO_TURNS[0], {"role": "assistant", "content": "open()"}], case_id="g")
    reader, search = FakeReader(), FakeSearch()
    passages = {"c#turn2": [chunk("files.md")], "c#turn4": [chunk("lines.md")]}
    answers = answer_conversations(
        reader,
        [talk, plain, given],
        [[chunk("close.md")], [chunk("pass.md")], [chunk("given.md")]],
        passages,
        search_again=search,  # type: ignore[arg-type]
    )
    # the first turn answers the user's first message (no turn before it): the stages' passages; the
    # second turn's question and the case's come after a written turn: searched again, each in its batch
    assert [[q.id for q in batch] for batch in search.batches] == [["c#turn4"], ["c"]]
    assert [t.content for t in search.batches[1][0].history if t.role == "assistant"] == [
        "reply 1",
        "reply 2",
    ]
    first, second, questions = reader.batches
    assert "files.md" in first[0].messages[-1]["content"]
    assert "after reply 1.md" in second[0].messages[-1]["content"]
    assert "after reply 2.md" in questions[0].messages[-1]["content"]
    talk_answer, plain_answer, given_answer = answers
    assert [c.source for c in talk_answer.contexts] == ["after reply 2.md"]
    assert talk_answer.searched_again and talk_answer.searched == ["And how do I close it? (reply 2)"]
    # two turns, two searches and the question: what the case cost the cell
    assert (talk_answer.prompt_tokens, talk_answer.cost_usd) == (44, 2.0)
    assert not plain_answer.searched_again and not given_answer.searched_again
    assert [c.source for c in given_answer.contexts] == ["given.md"]  # a given turn: the stages' ranking


@pytest.mark.parametrize(
    ("fail_after", "error"), [("reply 1", "generated turn 4: HTTP 429"), ("reply 2", "HTTP 429")]
)
def test_a_failed_search_after_a_written_turn_fails_its_case_unasked(fail_after, error):
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    reader = FakeReader()
    answers = answer_conversations(
        reader,
        [talk, plain],
        [[chunk("close.md")], [chunk("pass.md")]],
        {"c#turn2": [chunk("a.md")], "c#turn4": [chunk("b.md")]},
        search_again=FakeSearch(fail_after=fail_after),  # type: ignore[arg-type]
    )
    assert answers[0].answer is None and answers[0].error == error
    assert answers[1].answer is not None
    assert all("close it" not in request.messages[-1]["content"] for request in reader.batches[-1])


def test_the_dry_run_counts_each_rewrite_made_again_after_a_generated_turn():
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    given = case([TWO_TURNS[0], {"role": "assistant", "content": "open()"}], case_id="g")
    requests = follow_up_rewrite_requests("condense", [talk, plain, given], 1, "an answer")
    # the second turn's question and the case's own, each with the turns before it standing as written
    assert len(requests) == 2
    assert all("an answer" in request.messages[-1]["content"] for request in requests)
    assert follow_up_rewrite_requests("off", [talk], 1, "an answer") == []


def test_the_dry_run_prices_one_more_reader_call_per_generated_turn_and_checks_the_context():
    talk, plain = case(TWO_TURNS), EvalCase(id="p", question="What is pass?")
    requests = planned_reader_requests([talk, plain], [chunk("a.md")], DEFAULT_PROMPT, "word " * 50)
    assert len(requests) == 4  # two questions, two generated turns
    assert requests[0].messages[2]["content"].startswith("word")  # the turn priced as a full answer
    cell = CellSpec.model_validate(
        {
            "chunk_size": 64,
            "embedding_model": "m",
            "reader": {"model": "openai/gpt-4o-mini", "max_tokens": 200},
            "prompt": DEFAULT_PROMPT.model_dump(),
        }
    )
    assert check_histories([talk], [cell], "cases.yaml") == []  # a pending turn counts as max_tokens


class FakeSystem:
    """An external system's client: answers each question with its text, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[dict[str, str]]]] = []

    def ask_many(self, questions, *, histories, desc=""):
        self.asked += list(zip(questions, histories, strict=True))
        return [
            ExternalResult(question=q, reply=ExternalReply(answer=f"about: {q}"), attempts=1)
            for q in questions
        ]


def test_an_external_system_writes_its_turns_by_being_asked_in_conversation():
    system = FakeSystem()
    written = write_turns([case(TWO_TURNS)], external_turns(system, "external"))  # type: ignore[arg-type]
    assert system.asked == [
        ("How do I read a file?", []),
        (
            "And line by line?",
            [
                {"role": "user", "content": "How do I read a file?"},
                {"role": "assistant", "content": "about: How do I read a file?"},
            ],
        ),
    ]
    turns = written["c"]
    assert turns.error is None and turns.calls_sent == 2 and turns.cost_usd is None  # its cost is unseen
    assert turns.history[3].content == "about: And line by line?" and turns.history[3].generate


def test_the_report_and_the_review_page_show_each_cells_conversation_with_the_generated_turns_marked(
    tmp_path,
):
    written = [Turn(role="user", content="How?"), Turn(role="assistant", content="Like so.", generate=True)]
    item = ReviewItem(
        rubric="correctness",
        criterion="correctness",
        criterion_label="correctness",
        scale="1-5",
        input=JudgeInput(case_id="c", question="q", history=written, answer="a", reference_answer="r"),
    )
    shown = ReviewSession([item], LabelStore(tmp_path / "labels.jsonl"), title="t")._public(item, None)
    assert shown["history"][1] == {"role": "assistant", "content": "Like so.", "generate": True}
    assert "Like so." in item.input.question_in_context  # what a rubric reads
    views = [
        CaseView(cell=cell, case_id="c", question="q", history=[t.model_dump() for t in written], answer="a")
        for cell in ("x", "y")
    ]
    (data,) = case_data(views)
    assert data["history"][1] == {"role": "assistant", "content": "", "generate": True}
    assert data["answers"][0]["history"][1]["content"] == "Like so."


def test_a_case_id_that_names_another_cases_turn_question_is_refused(tmp_path):
    path = tmp_path / "cases.json"
    cases = [{"id": "c", "question": "q", "history": TWO_TURNS}, {"id": "c#turn2", "question": "q"}]
    path.write_text(json.dumps({"cases": cases}))
    with pytest.raises(EvalCaseError, match=r"duplicate case ids: c#turn2"):
        load_eval_cases(path)
