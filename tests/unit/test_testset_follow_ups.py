"""Follow-up cases of the eval-set generator (issue 50), through the real LLM client against the loopback
fake server with scripted replies: the generator's first pair becomes the case's history, the roundtrip
filter keeps a follow-up only when it needs its conversation, the critics see that conversation, the
plan gives it a related chunk and the dry run counts its calls; the exported case loads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbench.config import pipeline_plans
from ragbench.config.model import load_config
from ragbench.inputs.chunking import Chunk
from ragbench.inputs.conversation import Turn
from ragbench.inputs.eval_cases import RoundtripCheck, SourceChunk, load_eval_cases
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import NOT_IN_CONTEXT
from ragbench.testset.assemble import build_eval_set
from ragbench.testset.critique import critic_request, critique_candidates
from ragbench.testset.generate import CandidateSet, generate_candidates
from ragbench.testset.plan import Seed, plan_seeds
from ragbench.testset.roundtrip import passes, roundtrip_filter
from ragbench.testset.rubrics import CRITICS, FOLLOW_UP, critics_for
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import write_project

OPTION = SourceChunk(
    source="sort.md", start_index=0, text="The sorted function takes a key argument: a function of one item."
)
DEFAULT = SourceChunk(
    source="sort-key.md", start_index=0, text="When no key function is given, sorted compares the items."
)
FIRST = ("Which argument of sorted chooses what items are compared by?", "The key argument.")
# Two follow-ups of the same first pair; the reader answers the second one without its conversation.
NEEDS_IT = ("And what happens when I leave it out?", "Sorted compares the items themselves.")
ALONE_TOO = ("What does sorted compare when that one is missing?", "It compares the items themselves.")


def generator_reply(user: str) -> str:
    if "follow-up question" in user:  # the evolution: the follow-up of the plain pair
        question, answer = ALONE_TOO if "ALONE" in user else NEEDS_IT
        return json.dumps({"question": question, "answer": answer})
    return json.dumps({"question": FIRST[0], "answer": FIRST[1]})


def reply(request: dict[str, Any]) -> str:
    """The generator as above; the critics rate 5; the reader answers a follow-up after its conversation,
    and without it answers only `ALONE_TOO`."""
    messages = request["messages"]
    system, last = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You write test questions"):
        return generator_reply(messages[1]["content"])
    if system.startswith("You check test questions"):
        return json.dumps({"reasoning": "scripted", "rating": 5})
    with_conversation = len(messages) > 2
    if with_conversation or ALONE_TOO[0] in last:
        return "Sorted compares the items themselves [1]."
    return NOT_IN_CONTEXT


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=reply) as fake:
        yield fake


def client(server: FakeOpenAIServer, tmp_path: Path, model: str) -> LLMClient:
    return server.client(tmp_path / "llm", model=model, max_retries=0, json_retries=1)


def follow_up_seeds() -> list[Seed]:
    """Two follow-up seeds over the same pair of chunks; the second's marker makes the generator write
    the follow-up that is answerable alone."""
    marked = DEFAULT.model_copy(update={"text": DEFAULT.text + " ALONE"})
    return [
        Seed(id="needs-it", evolution=FOLLOW_UP, chunks=[OPTION, DEFAULT]),
        Seed(id="alone-too", evolution=FOLLOW_UP, chunks=[OPTION, marked]),
    ]


def generated(server: FakeOpenAIServer, tmp_path: Path) -> CandidateSet:
    with client(server, tmp_path, "openai/fake-generator") as generator:
        return generate_candidates(generator, follow_up_seeds(), audience="Python programmers")


def test_the_generator_writes_a_first_pair_and_a_follow_up_on_the_second_chunk(server, tmp_path) -> None:
    needs_it, _ = generated(server, tmp_path).candidates
    assert needs_it.history == [Turn(role="user", content=FIRST[0]), Turn(role="assistant", content=FIRST[1])]
    assert (needs_it.question, needs_it.answer, needs_it.seed_question) == (*NEEDS_IT, FIRST[0])
    assert needs_it.answer_chunks == [DEFAULT]  # the follow-up is answered by the second chunk
    # two calls a seed: the first pair from chunk 1 only, then the follow-up over both chunks
    asked = [request["messages"][1]["content"] for request in server.requests]
    firsts = [user for user in asked if "follow-up question" not in user]
    evolve = next(user for user in asked if "follow-up question" in user and "ALONE" not in user)
    assert firsts and all(OPTION.text in user and DEFAULT.text not in user for user in firsts)
    assert "pointer" in evolve and OPTION.text in evolve and DEFAULT.text in evolve
    assert FIRST[0] in evolve and FIRST[1] in evolve


def test_roundtrip_keeps_a_follow_up_that_needs_its_conversation_and_drops_one_that_does_not(
    server, tmp_path
) -> None:
    candidates = generated(server, tmp_path)
    search = {candidate.id: [OPTION, DEFAULT] for candidate in candidates.candidates}
    before = server.request_count
    with client(server, tmp_path, "openai/fake-critic") as critic:
        checked = roundtrip_filter(critic, candidates, search)
    reads = server.requests[before:]
    # with the conversation: its two turns before the question, on the follow-up's own passage only
    source = next(r["messages"] for r in reads if len(r["messages"]) == 4 and NEEDS_IT[0] in str(r))
    assert [m["role"] for m in source] == ["system", "user", "assistant", "user"]
    assert DEFAULT.text in source[-1]["content"] and OPTION.text not in source[-1]["content"]
    assert sum(len(r["messages"]) == 2 for r in reads) == 2  # each question once alone, no conversation

    kept, dropped = checked.verdicts["needs-it"], checked.verdicts["alone-too"]
    assert kept.kept and [(c.passages, c.agrees) for c in kept.checks] == [("source", True), ("alone", False)]
    assert [c.method for c in kept.checks] == ["exact", "refused"]
    assert not dropped.kept and dropped.reason is not None
    assert dropped.reason.startswith("answerable without its conversation")

    embedded: list[str] = []

    def embed(texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        return np.eye(len(texts), dtype=np.float32)

    eval_set = build_eval_set(
        "follow-ups",
        candidates,
        None,
        checked,
        thresholds={},
        corpus_texts=[OPTION.text, DEFAULT.text],
        embed=embed,
        duplicate_similarity=0.9,
        max_good_words=3,
    )
    (case,) = eval_set.cases
    assert case.history == candidates.candidates[0].history and case.question == NEEDS_IT[0]
    assert case.expected_sources == ["sort-key.md"] and case.reference_answer == NEEDS_IT[1]
    assert case.provenance is not None and case.provenance.source_chunks == [OPTION, DEFAULT]
    (rejected,) = eval_set.rejected
    assert rejected.provenance is not None
    assert rejected.provenance.rejected_because[0].startswith(
        "roundtrip: answerable without its conversation"
    )
    assert "User: " + FIRST[0] in eval_set.html()
    # near-duplicates are found among follow-ups as asked, after their conversations
    assert embedded == [
        f"User: {FIRST[0]}\nAssistant: {FIRST[1]}\nUser (the question to answer): {NEEDS_IT[0]}"
    ]
    # the exported set loads back as eval cases, conversation included
    (tmp_path / "cases.jsonl").write_text(eval_set.jsonl())
    (loaded,) = load_eval_cases(tmp_path / "cases.jsonl")
    assert loaded.history == case.history and loaded.case_type == FOLLOW_UP


def test_the_critics_see_the_conversation_and_standalone_leaves_follow_ups_alone(server, tmp_path) -> None:
    assert [critic.name for critic in critics_for(FOLLOW_UP)] == ["groundedness", "relevance"]
    assert "standalone" in [critic.name for critic in critics_for("multi_context")]
    needs_it, _ = generated(server, tmp_path).candidates
    request = critic_request(CRITICS["groundedness"], needs_it, [], "Python programmers")
    user = request.messages[1]["content"]
    assert f"<conversation>\nUser: {FIRST[0]}\nAssistant: {FIRST[1]}\n</conversation>" in user
    assert user.index("<conversation>") < user.index("<question>")
    assert DEFAULT.text in user and OPTION.text not in user  # graded against the follow-up's passage
    with client(server, tmp_path, "openai/fake-critic") as critic:
        rated = critique_candidates(
            critic, CandidateSet(generator="g", candidates=[needs_it]), {}, audience="x"
        )
    assert [c.criterion for c in rated.critiques[needs_it.id].critiques] == ["groundedness", "relevance"]


def test_a_follow_up_seed_takes_a_related_chunk_or_falls_back_to_simple() -> None:
    chunks = [Chunk(text=f"Text number {n} " * 20, source=f"d{n}.md", start_index=0) for n in range(3)]
    vectors = np.eye(3, dtype=np.float32)
    vectors[1] = [0.8, 0.6, 0.0]  # chunk 1 is related to chunk 0
    plan = dict(count=3, sampling="proportional", seed=0, min_chars=10, unanswerable_share=0.0)
    seeds = plan_seeds(chunks, vectors, evolutions={FOLLOW_UP: 1.0}, **plan)
    assert all(s.evolution == FOLLOW_UP and len(s.chunks) == 2 for s in seeds)
    by_first = {s.chunks[0].source: s.chunks[1].source for s in seeds}
    assert by_first["d0.md"] == "d1.md" and by_first["d1.md"] == "d0.md"
    alone = plan_seeds(chunks[:1], vectors[:1], evolutions={FOLLOW_UP: 1.0}, **plan | {"count": 1})
    assert [s.evolution for s in alone] == ["simple"]  # no second chunk: a plain question


def dry_run(tmp_path: Path, evolution: str) -> dict[str, dict]:
    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        [{"id": "a", "question": "What is a?"}],
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: [openai/j]}\n"
        f"testset: {{chunks: 4, unanswerable_share: 0.0, evolutions: {{{evolution}: 1.0}}, "
        "generator: openai/g, filters: [roundtrip, critics]}\n",
    )
    rows = pipeline_plans.testset_plan_rows(load_config(tmp_path / "config.yaml"), available_chunks=10)
    return {row["role"]: row for row in rows}


def test_the_dry_run_counts_a_follow_ups_calls_and_its_conversation(tmp_path) -> None:
    follow_up, simple = dry_run(tmp_path / "f", FOLLOW_UP), dry_run(tmp_path / "s", "simple")
    assert follow_up["generator"]["calls"] == 8  # the first pair, then the follow-up, for each of 4 chunks
    assert follow_up["roundtrip reads"]["calls"] == 8  # with the conversation, and alone
    assert "4 follow-ups: searched without their conversation" in follow_up["roundtrip reads"]["calls_for"]
    assert "follow-ups" not in simple["roundtrip reads"]["calls_for"]
    assert follow_up["roundtrip equivalence"]["calls"] == 8
    assert follow_up["critics"]["calls"] == 8  # groundedness and relevance; standalone does not rate them
    # the conversation is in every follow-up read with it, and in every critique
    assert follow_up["roundtrip reads"]["prompt_tokens"] > simple["roundtrip reads"]["prompt_tokens"]
    per_critique = follow_up["critics"]["prompt_tokens"] / 8
    assert per_critique > simple["critics"]["prompt_tokens"] / simple["critics"]["calls"]


def test_an_alone_read_passes_only_when_it_does_not_agree_and_never_without_a_verdict() -> None:
    assert passes(RoundtripCheck(passages="alone", answer=NOT_IN_CONTEXT, method="refused", agrees=False))
    assert not passes(RoundtripCheck(passages="alone", answer="x", method="llm", agrees=True))
    assert not passes(RoundtripCheck(passages="alone", error="equivalence check: no valid reply"))
    assert passes(RoundtripCheck(passages="source", answer="x", method="exact", agrees=True))
    assert not passes(RoundtripCheck(passages="search", error="reader call failed: timeout"))
