"""A scorer another package ships (tests/plugin_scorers, registered by its entry point only) is named in the
config like a built-in, scored in a real ZenML run through the fake OpenAI server, reported and gated, with
no edit to ragbench; a name nobody registers stops the run before any work."""

import csv
import json
from pathlib import Path

import pytest

import run
from ragbench.scoring.registry import SCORER_ENTRY_POINTS, available_scorers, make_scorers
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

PLUGINS = Path(__file__).resolve().parents[1] / "plugin_scorers"


@pytest.fixture
def plugin_installed(monkeypatch):
    """The fixture package on the path, as `pip install` would put it (its dist-info carries the entry
    point)."""
    monkeypatch.syspath_prepend(str(PLUGINS))


def test_a_registered_scorer_is_found_by_its_entry_point_name(plugin_installed):
    scorer = available_scorers()["names_a_document"]
    assert type(scorer).__module__ != "ragbench" and scorer.__module__ == "ragbench_example_scorer"
    (made,) = make_scorers(["names_a_document"])
    assert made.identity()["class"] == "ragbench_example_scorer:NamesADocument"


def test_an_unregistered_scorer_name_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match=f"unknown metric.*names_a_document.*{SCORER_ENTRY_POINTS}"):
        make_scorers(["names_a_document"])


def responder(names_file: bool):
    def reply(request: dict) -> str:
        if not request.get("response_format"):
            return "The answer is in errors.md [1]."
        assert "names a document" in request["messages"][0]["content"], request["messages"][0]["content"]
        assert "errors.md" in last_user_text(request)
        return json.dumps({"reason": "it names errors.md", "verdict": 1 if names_file else 0})

    return reply


def write(tmp_path: Path, server: FakeOpenAIServer) -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
        "reader: [openai/reader], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, rubrics: [], keyword_tests: false, metrics: [names_a_document], "
        "judge_check: null}\n"
        "regression: {thresholds: {names_a_document: 0.5}}\n",
    )


def test_a_plugin_scorer_is_scored_reported_and_gated(tmp_path, monkeypatch, plugin_installed):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder(names_file=True)) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        # three answers; one verdict, as the scorer's prompt holds only the answer and the three answers are
        # the same (the LLM cache serves the other two)
        assert server.request_count == 3 + 1
        with (tmp_path / "out" / "latest" / "results.csv").open() as file:
            (row,) = list(csv.DictReader(file))
        assert float(row["names_a_document"]) == 1.0 and row["names_a_document_cases"] == "3"
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "names a document (share)" in html and "it names errors.md" in html

        # the same plugin, its judge now failing every case (asked anew: no step or LLM cache), and the
        # gate compares its metric like any other
        server.responder = responder(names_file=False)
        (tmp_path / "llm-cache").rename(tmp_path / "llm-cache-old")
        assert run.main(["--config", "config.yaml", "--no-cache"]) == 1
        gate = (tmp_path / "out" / "latest" / "gate.html").read_text()
        assert "names_a_document" in gate and "regressed" in gate


def test_an_unknown_metric_stops_the_run_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, DOCUMENTS, CASES, "evaluation: {metrics: [no_such_scorer]}\n")
    assert run.main(["--config", "config.yaml"]) == 2
    assert "unknown metric(s) no_such_scorer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
