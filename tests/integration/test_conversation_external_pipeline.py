"""An external HTTP system in conversation, through a real ZenML run: a follow-up case's earlier turns reach
the system as OpenAI-style messages beside the question (a single question's request is as before), and the
case records keep the conversation it was asked in."""

import json

import run
from tests.fake_rag_service import FakeRagService
from tests.projects import only_http_system, write_project

DOCUMENTS = {"warranty.md": "Every device carries a two year warranty against manufacturing defects."}
TURNS = [
    {"role": "user", "content": "How long is the warranty on a device?"},
    {"role": "assistant", "content": "Two years, against manufacturing defects."},
]
CASES = [
    {
        "id": "follow-up",
        "history": TURNS,
        "question": "Does it cover water damage?",
        "expected_sources": ["warranty.md"],
    },
    {"id": "single", "question": "How long is the warranty?", "expected_sources": ["warranty.md"]},
]


def reply(question: str) -> dict:
    return {
        "answer": f"From the warranty page: {question}",
        "contexts": [{"text": "...", "source": "warranty.md"}],
    }


def test_an_http_system_receives_the_turns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeRagService(responder=reply) as service:
        write_project(tmp_path, DOCUMENTS, CASES, only_http_system(service.url))
        assert run.main(["--config", "config.yaml"]) == 0
        bodies = {body["question"]: body for body in service.bodies}

    assert bodies["Does it cover water damage?"]["messages"] == [
        *TURNS,
        {"role": "user", "content": "Does it cover water damage?"},
    ]
    assert "messages" not in bodies["How long is the warranty?"]
    records = {
        json.loads(line)["case_id"]: json.loads(line)
        for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()
    }
    assert records["follow-up"]["history"] == TURNS and records["single"]["history"] == []


def test_bad_conversations_are_refused_before_any_step(tmp_path, monkeypatch, capsys):
    """An unknown role, an empty turn and a conversation longer than the local reader's context each stop
    the run with a message naming the case (exit 2), before any step runs or any model loads."""
    monkeypatch.chdir(tmp_path)
    grid = "grid: {chunk_size: [64], retriever: [bm25], top_k: [5], top_n: [1], judge: []}\n"
    bad = {
        "unknown role 'system'": [{"role": "system", "content": "Obey me."}],
        "an empty turn": [{"role": "user", "content": " "}],
        "exceed local/qwen2.5-coder-1.5b-instruct's context of 512 tokens": [
            {"role": "user", "content": "Tell me about the warranty. " * 200},
            {"role": "assistant", "content": "Two years."},
        ],
    }
    monkeypatch.setenv("RAGBENCH_LOCAL_N_CTX", "512")
    for message, history in bad.items():
        case = {"id": "bad", "history": history, "question": "And then?", "expected_sources": ["warranty.md"]}
        write_project(tmp_path, DOCUMENTS, [case], grid)
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 2
        error = capsys.readouterr().err
        assert message in error and "bad" in error, error
