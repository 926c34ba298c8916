"""A run is planned once (`ragbench.config.plan`): the dry run and a real run each expand the grid once and
read the client's knowledge base and eval cases once (the checks read them, the snapshots are made from
what they read), and the real run hands the pipeline the versions it stored."""

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import pipelines.inputs
import run
from ragbench.config import plan, preflight
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import fake_llm_config, newest_run, write_knowledge_base

DOCUMENTS = {"loops.md": "# Loops\nThe break statement ends the innermost loop at once."}
CASES = [
    {
        "id": "break",
        "question": "How do I leave a loop early?",
        "expected_sources": ["loops.md"],
        "reference_answer": "Use break.",
    }
]
# Every module of the client's path that could expand the grid or read an input, and what it imports.
SPIED = [
    (plan, "expand_grid"),
    (preflight, "load_corpus"),
    (preflight, "load_eval_suite_from"),
    (pipelines.inputs, "load_corpus"),
    (pipelines.inputs, "load_eval_suite_from"),
]


def responder(request: dict) -> str:
    """A right answer and valid verdicts: nothing is re-asked."""
    if not request.get("response_format"):
        return "Use break [1]."
    if "faithfulness" in json.dumps(request["messages"]):
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    return json.dumps({"reasoning": "matches", "score": 5})


@pytest.fixture
def calls(tmp_path, monkeypatch) -> Counter:
    """The project, and a count of each spied function's calls by its name (whichever module made it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    counted: Counter = Counter()

    def spy(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counting(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return function(*args, **kwargs)

        return counting

    for module, name in SPIED:
        monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    with FakeOpenAIServer(responder=responder) as server:
        write_knowledge_base(tmp_path, DOCUMENTS, CASES)
        fake_llm_config(tmp_path, server.base_url, name=f"plan-{tmp_path.name}")
        yield counted


def test_the_dry_run_and_the_run_each_expand_the_grid_and_read_the_inputs_once(calls, capsys):
    assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
    assert "1 cells: 1 new" in capsys.readouterr().out
    assert calls == {"expand_grid": 1, "load_corpus": 1, "load_eval_suite_from": 1}
    calls.clear()
    assert run.main(["--config", "config.yaml"]) == 0
    assert calls == {"expand_grid": 1, "load_corpus": 1, "load_eval_suite_from": 1}
    snapshots = newest_run().config.parameters["snapshots"]
    assert snapshots["knowledge_base"]["name"] == pipelines.inputs.KNOWLEDGE_BASE_SNAPSHOT
    assert snapshots["eval_cases"]["name"] == pipelines.inputs.EVAL_CASES_SNAPSHOT
    assert snapshots["review_labels"] is None
