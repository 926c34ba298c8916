"""References that stay true, through real ZenML runs: the truth (a status file a verified function reads)
changes between nights; the reference follows it, the answers are judged against the fresh value, the gate
says "reference changed" and passes a system that follows the change, and still catches one that does not.
A source that fails fails its case with the reason; the run completes. The system is a Python callable,
the judge the fake OpenAI server (its prompts show which reference it was given)."""

import csv
import json
import re
from pathlib import Path

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

SOURCES = "tests.reference_sources"


def section(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.DOTALL)
    return match.group(1) if match else ""


def judge(request: dict) -> str:
    """Correct when the on-call engineer the reference names is the one the answer names."""
    if "faithfulness" in request["messages"][0]["content"]:
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 4, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    user = last_user_text(request)
    reference, answer = section(user, "reference_answer"), section(user, "answer")
    name = reference.split(" is on call")[0]
    return json.dumps({"reasoning": "compared", "score": 5 if name and name in answer else 1})


def cases(status: Path) -> list[dict]:
    args = {"path": str(status)}
    return [
        {
            "id": "incidents",
            "question": "How many incidents are open?",
            "reference_from": {"python": f"{SOURCES}:open_incidents", "args": args},
            "expected_sources_from": {"python": f"{SOURCES}:status_pages", "args": args},
            "tolerance": 0.3,
        },
        {
            "id": "oncall",
            "question": "Who is on call this week?",
            "reference_answer": "Ana Lopez is on call this week.",  # stored once, long stale
            "reference_from": {"python": f"{SOURCES}:on_call", "args": args},
            "expected_sources": ["status.md"],
        },
        {
            "id": "outage",
            "question": "When was the last outage?",
            "reference_from": {"python": f"{SOURCES}:down"},
            "expected_sources": ["status.md"],
        },
    ]


def set_status(path: Path, incidents: int, on_call: str) -> None:
    stale = {"incidents": 12, "on_call": "Priya Raman"}  # what a system with last week's index knows
    path.write_text(
        json.dumps({"incidents": incidents, "on_call": on_call, "pages": ["status.md"], "stale": stale})
    )


def row(tmp_path: Path) -> dict:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        (only,) = csv.DictReader(file)
    return only


def references_judged(llm: FakeOpenAIServer, since: int) -> list[str]:
    """The reference of every correctness verdict asked since request `since`."""
    texts = [
        section(last_user_text(r), "reference_answer")
        for r in llm.requests[since:]
        if r.get("response_format")
    ]
    return [text for text in texts if text]


def test_the_reference_follows_a_changing_truth_and_the_gate_says_so(tmp_path, monkeypatch, capsys):
    from zenml.client import Client

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.delenv("STATUS_SYSTEM_STALE", raising=False)
    status = tmp_path / "status.json"
    monkeypatch.setenv("STATUS_FILE", str(status))
    set_status(status, 12, "Priya Raman")
    with FakeOpenAIServer(responder=judge) as llm:
        settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
        write_project(
            tmp_path,
            {"status.md": "# Status\nThe status page lists the open incidents and who is on call."},
            cases(status),
            "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\ngeneration: {sample_size: null}\n"
            f"retrieval: {{metrics_k: 1}}\nevaluation: {{judge: {settings}, judge_check: null}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "regression: {thresholds: {latency_p95_s: 60}}\n"  # a loaded machine's pauses are not the point
            "systems:\n  - {name: status-bot, python: 'tests.reference_sources:status_system'}\n",
        )
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert (
            "References: 3 case(s) fetch theirs when the run starts (not fetched here); their judge" in plan
        )
        assert run.main(["--config", "config.yaml"]) == 0
        first = row(tmp_path)
        assert float(first["correctness_0to1"]) == 1.0 and first["correctness_0to1_cases"] == "2"
        assert float(first["hit_rate@1"]) == 1.0 and first["retrieval_cases"] == "3"
        # the on-call answer was judged against the fetched reference, never the stored one; the count was
        # decided without the judge (13 is within 30% of 12)
        assert references_judged(llm, 0) == ["Priya Raman is on call this week."]
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "References fetched at run time" in html and "There are 12 open incidents." in html
        assert "1 case(s) FAILED: their reference could not be fetched" in html
        assert "ConnectionError: the status service is down" in html
        fetched = Client().get_artifact_version("references").load()
        assert set(fetched.failures()) == {"outage"} and len(fetched.resolutions) == 4
        out = capsys.readouterr().out
        assert "case outage FAILED: its reference could not be fetched" in out

        # the next night the truth has changed; the system follows it: not a regression, and said
        set_status(status, 30, "Chen Wei")
        seen = len(llm.requests)
        code = run.main(["--config", "config.yaml"])
        out = capsys.readouterr().out
        assert code == 0, out[-4000:]
        assert references_judged(llm, seen) == ["Chen Wei is on call this week."]
        assert float(row(tmp_path)["correctness_0to1"]) == 1.0
        assert "reference changed since" in out and "for 2 case(s): incidents, oncall" in out
        assert "REFERENCE CHANGED for case incidents" in out and "PASSED" in out

        # a system that keeps last week's answers against the unchanged truth is a regression
        monkeypatch.setenv("STATUS_SYSTEM_STALE", "1")
        assert run.main(["--config", "config.yaml"]) == 1
        assert float(row(tmp_path)["correctness_0to1"]) == 0.0
        out = capsys.readouterr().out
        assert "REGRESSION correctness_0to1 in ext_status_bot" in out and "reference changed" not in out


def writer_and_judge(request: dict) -> str:
    """The reader writes references and answers; the judge scores 5 when the written reference is seen."""
    system = request["messages"][0]["content"]
    user = last_user_text(request)
    if "You write the correct answer to a question from a context" in system:
        return "Chen Wei is on call."
    if not request.get("response_format"):
        return "Chen Wei [1]."
    if "faithfulness" in system:
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 4, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    return json.dumps({"reasoning": "compared", "score": 5 if "Chen Wei is on call." in user else 1})


def test_a_context_source_has_its_reference_written_by_the_grids_reader(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    status = tmp_path / "status.json"
    set_status(status, 3, "Chen Wei")
    case = {
        "id": "oncall",
        "question": "Who is on call this week?",
        "reference_from": {"python": f"{SOURCES}:on_call", "args": {"path": str(status)}, "gives": "context"},
        "expected_sources": ["status.md"],
    }
    with FakeOpenAIServer(responder=writer_and_judge) as llm:
        settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
        write_project(
            tmp_path,
            {"status.md": "# Status\nChen Wei is on call this week."},
            [case],
            "grid: {chunk_size: [64], retriever: [bm25], top_k: 1, top_n: 1, reader: [openai/reader], "
            "judge: [openai/fake-judge]}\n"
            f"generation: {{reader: {settings}, sample_size: null}}\n"
            f"evaluation: {{judge: {settings}, judge_check: null}}\nretrieval: {{metrics_k: 1}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
        writes = [r for r in llm.requests if "You write the correct answer" in r["messages"][0]["content"]]
        assert len(writes) == 1 and "Chen Wei is on call this week." in last_user_text(writes[0])
        assert writes[0]["model"] == "reader"
        assert float(row(tmp_path)["correctness_0to1"]) == 1.0
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "References fetched at run time" in html and "Chen Wei is on call." in html
        # an unchanged context is written from the LLM cache, never asked again
        assert run.main(["--config", "config.yaml"]) == 0
        assert sum("You write the correct answer" in r["messages"][0]["content"] for r in llm.requests) == 1
