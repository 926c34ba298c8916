"""`run.py testset` writing follow-up cases (issue 50) end to end on a small folder knowledge base, the
generator and the critic served by the loopback fake server: a follow-up comes out of the real pipeline
with its conversation as `history`, the roundtrip filter drops the one a reader answers without that
conversation, and the exported set loads back as eval cases, from its JSONL file and its artifact."""

import json

import pytest
from zenml.client import Client

import run
from ragbench.inputs.eval_cases import load_eval_cases
from ragbench.llm.prompts import NOT_IN_CONTEXT
from tests.projects import TESTSET_PAGES, serving_fake_openai, write_knowledge_base, write_testset_config

TOPICS = {"assert": "errors.md", "break": "loops.md", "with statement": "files.md"}


def topic_of(text: str) -> str:
    return next(topic for topic in TOPICS if topic in text)


# A follow-up on each topic, leaning on the first question with a pointer; the files one names what it
# asks about, so a reader answers it without the conversation too.
FOLLOW_UPS = {
    "assert": "And what happens when that one is switched off?",
    "break": "Does it also work inside a nested one?",
    "with statement": "Does that one close my file too?",
}


def follow_up(topic: str) -> tuple[str, str]:
    """The follow-up on `topic` and its answer."""
    return FOLLOW_UPS[topic], f"The {topic} statement handles that."


def responder(request: dict) -> str:
    """Generator: a first pair about passage 1, then a follow-up about passage 2; reader: with the
    conversation, the follow-up's answer from its passage; alone, a refusal unless the question names
    files."""
    messages = request["messages"]
    system, last = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You write test questions"):
        if "follow-up question" in last:
            question, answer = follow_up(topic_of(last.split('id="2"')[1]))
            return json.dumps({"question": question, "answer": answer})
        topic = topic_of(last)
        return json.dumps({"question": f"What does the {topic} statement do?", "answer": f"{topic} works."})
    question = last.rsplit("Question:", 1)[-1]
    if len(messages) > 2 or "file" in question:  # with its conversation, or a question that names files
        topic = "with statement" if "file" in question else topic_of(last.rsplit("Question:", 1)[0])
        return follow_up(topic)[1] + " [1]"
    return NOT_IN_CONTEXT


@pytest.fixture
def project(tmp_path, monkeypatch):
    write_knowledge_base(tmp_path, TESTSET_PAGES)
    with serving_fake_openai(tmp_path, monkeypatch, responder) as server:
        write_testset_config(
            tmp_path,
            server.base_url,
            name="conv",
            testset="unanswerable_share: 0.0, evolutions: {follow_up: 1.0}, filters: [roundtrip]",
        )
        yield tmp_path, server


def test_follow_up_cases_come_out_with_their_conversation_and_load_back(project, capsys):
    root, server = project
    assert run.main(["testset", "--config", "config.yaml", "--dry-run"]) == 0
    assert "follow-ups: searched without their conversation" in capsys.readouterr().out
    assert server.request_count == 0

    assert run.main(["testset", "--config", "config.yaml"]) == 0
    folder = root / "out" / "testsets" / "conv-eval-set-v1"
    kept = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    rejected = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    assert kept and len(kept) + len(rejected) == 3
    for case in kept + rejected:
        first, second = case["provenance"]["source_chunks"]
        assert case["provenance"]["evolution"] == "follow_up" and first["source"] != second["source"]
        assert case["expected_sources"] == [second["source"]]  # the follow-up's own chunk
        user, assistant = case["history"]
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        asked_first = f"What does the {topic_of(first['text'])} statement do?"
        assert user["content"] == case["provenance"]["seed_question"] == asked_first
        assert [check["passages"] for check in case["provenance"]["roundtrip"]] == ["source", "alone"]
    # the follow-up that names files is answered alone: dropped; the others need their conversation
    assert {case["expected_sources"][0] for case in rejected} == {"files.md"}
    assert all("files.md" not in case["expected_sources"] for case in kept)
    for case in rejected:
        assert case["provenance"]["rejected_because"][0].startswith(
            "roundtrip: answerable without its conversation"
        )

    loaded = load_eval_cases(folder / "cases.jsonl")
    assert [case.id for case in loaded] == [case["id"] for case in kept]
    assert all(len(case.history) == 2 and case.case_type == "follow_up" for case in loaded)
    artifact = Client().get_artifact_version("conv-eval-set").load()
    assert [case.history for case in artifact.cases] == [case.history for case in loaded]
    # the roundtrip read each follow-up with its conversation, and without it (two files follow-ups alone
    # are the same request: the LLM cache answers the second)
    reads = [len(r["messages"]) for r in server.requests if r["model"] == "fake-critic"]
    assert reads.count(4) == 3 and set(reads) == {2, 4}
