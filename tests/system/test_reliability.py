"""Failed LLM calls are never frozen into results, and outages end clearly (exit 2, one message, resumable).

Every run goes through run.py against the loopback fake server; calls are counted at the server.
"""

import csv
import json

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import fake_llm_config, write_keyword_topics


def responder(request: dict) -> str:
    if not request.get("response_format"):
        return f"About {last_user_text(request).rsplit('Question:', 1)[-1].strip()} [1]."
    if "faithfulness" in json.dumps(request["messages"]):
        scores = {"faithfulness": 5, "relevance": 5, "helpfulness": 5, "toxicity": 1}
        return json.dumps({"reasoning": "ok", **scores})
    return json.dumps({"reasoning": "matches", "score": 5})


def write_project(tmp_path, base_url: str, cases: int, reader_concurrency: int = 4) -> None:
    write_keyword_topics(tmp_path, cases)
    fake_llm_config(
        tmp_path,
        base_url,
        name=f"{tmp_path.parent.name}-{tmp_path.name}",  # a history of its own for the regression gate
        reader_options=f", concurrency: {reader_concurrency}",
    )


def table(tmp_path) -> dict:
    (row,) = csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
    return row


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as fake:
        yield fake


def calls_of(server: FakeOpenAIServer, since: int) -> list[str]:
    return [request["model"] for request in server.requests[since:]]


def test_a_partly_failed_cell_is_not_cached_and_only_its_failed_call_is_made_again(tmp_path, server, capsys):
    write_project(tmp_path, server.base_url, cases=3)
    server.inject("server_error")  # the first reader call fails (no retries configured)
    assert run.main(["--config", "config.yaml"]) == 0
    first = table(tmp_path)
    assert first["reader_failures"] == "1" and first["answers_produced"] == "2"
    assert first["reused"] == "False"
    seen = server.request_count
    assert run.main(["--config", "config.yaml"]) == 0  # not served from the cache: the failed call again
    second = table(tmp_path)
    assert second["reader_failures"] == "0"
    assert calls_of(server, seen) == ["fake-reader", "fake-judge", "fake-judge"]  # 1 answer, 2 verdicts
    assert second["reader_calls_retried"] == "1"
    assert (
        "1 answering call(s) (reader or external system)"
        in (tmp_path / "out" / "latest" / "results.html").read_text()
    )
    seen = server.request_count
    assert run.main(["--config", "config.yaml"]) == 0  # complete now: cached, nothing called
    assert server.request_count == seen and table(tmp_path)["reused"] == "True"


def test_provider_down_exits_2_and_the_next_run_resumes_without_repeating_finished_calls(
    tmp_path, server, capsys
):
    write_project(tmp_path, server.base_url, cases=3)
    server.inject(*["server_error"] * 3)  # every reader call of the cell fails
    assert run.main(["--config", "config.yaml"]) == 2
    err = capsys.readouterr().err
    assert "every reader call failed in cell" in err and "retries_exhausted" in err
    assert table(tmp_path)["reader_failures"] == "3"  # the table was still written, failures counted
    seen = server.request_count
    assert run.main(["--config", "config.yaml"]) == 0  # provider back: resumes
    assert sorted(calls_of(server, seen)) == ["fake-judge"] * 6 + ["fake-reader"] * 3
    assert table(tmp_path)["reader_failures"] == "0"


def test_a_provider_failing_persistently_stops_the_run_with_one_clear_message(tmp_path, server, capsys):
    # One call at a time: with several in flight, a success may land between two failures, and
    # then they are no longer "in a row" (the breaker counts in completion order).
    write_project(tmp_path, server.base_url, cases=9, reader_concurrency=1)
    server.inject(*["server_error"] * 8)  # 8 exhausted calls in a row trip the breaker
    assert run.main(["--config", "config.yaml"]) == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "provider of openai/fake-reader is failing" in err and "8 calls in a row" in err
    assert "Kept:" in err and "run the same command again" in err
    assert "sk-test-DUMMY" not in err
    assert server.fault_log == ["server_error"] * 8  # the breaker stopped the run at the 8th call
    seen = server.request_count
    assert run.main(["--config", "config.yaml"]) == 0  # resumes: the 8 failed calls and the 9th unmade
    assert calls_of(server, seen).count("fake-reader") == 9


@pytest.mark.slow
def test_interrupted_and_killed_runs_are_marked_failed_not_left_running(tmp_path, server):
    """SIGTERM ends a run like Ctrl-C and marks it failed (or hands the marking to a helper that does it
    once the process is gone); a SIGKILLed run is marked by the next run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from zenml.client import Client

    import cli.launch

    write_project(tmp_path, server.base_url, cases=3)
    repo = Path(run.__file__).resolve().parent
    env = os.environ | {"PYTHONPATH": str(repo), "PYTHONUNBUFFERED": "1"}

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(repo / "run.py"), "--config", "config.yaml", "--no-cache"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def wait_for_chunking(process: subprocess.Popen) -> None:
        for line in process.stdout:  # ZenML's own lines are off in tests (WARN); ours are on
            if "ragbench.inputs.chunking" in line:
                return
        raise AssertionError("the run ended before chunking")

    def last_status() -> str:
        return Client().get_pipeline("rag_benchmark").last_run.status.value

    def wait_for_status_to_leave_running(deadline_seconds: float = 180) -> str:
        deadline = time.monotonic() + deadline_seconds  # bounded: the helper runs in its own process
        while last_status() in ("running", "initializing") and time.monotonic() < deadline:
            time.sleep(0.5)
        return last_status()

    process = start()  # SIGTERM: the run marks itself failed before it exits (or its helper does)
    wait_for_chunking(process)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=300) == 128 + signal.SIGTERM
    assert wait_for_status_to_leave_running() == "failed", process.stdout.read()[-4000:]

    process = start()  # the detached helper SIGTERM falls back on marks it once the process is gone
    wait_for_chunking(process)
    cli.launch.mark_runs_failed_after_exit(process.pid)
    process.kill()
    process.wait(timeout=120)
    assert wait_for_status_to_leave_running() == "failed"

    process = start()  # SIGKILL: nobody can mark it until the next run does
    wait_for_chunking(process)
    process.kill()
    process.wait(timeout=120)
    assert last_status() in ("running", "initializing")
    assert run.main(["--config", "config.yaml"]) == 0
    runs = Client().list_pipeline_runs(sort_by="desc:created", size=2).items
    assert runs[1].status.value == "failed"


@pytest.mark.slow
def test_two_runs_at_once_on_one_store_both_complete(tmp_path, server):
    import os
    import subprocess
    import sys
    from pathlib import Path

    write_project(tmp_path, server.base_url, cases=3)
    repo = Path(run.__file__).resolve().parent
    env = os.environ | {"PYTHONPATH": str(repo)}
    processes = [
        subprocess.Popen(
            [sys.executable, str(repo / "run.py"), "--config", "config.yaml", "--set", f"name=run{i}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [out[-3000:] for out in outputs]
    reports = sorted(p for p in (tmp_path / "out").iterdir() if p.name.startswith("rag_benchmark-"))
    assert len(reports) == 2 and all((p / "results.csv").is_file() for p in reports)
    assert (tmp_path / "out" / "latest").resolve() in [p.resolve() for p in reports]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # nothing half-written


METRICS = ["correctness_0to1", "faithfulness_1to5", "fail_good_answers", "mrr", "answers_produced"]


def test_under_injected_faults_the_pipeline_gives_the_clean_metrics_and_counts_every_retry(
    tmp_path, monkeypatch
):
    """30 % rate limits (with Retry-After), 10 % server errors, 5 % timeouts, and 10 % malformed
    replies (broken bodies for the reader, invalid JSON for the judge): same metrics as a clean run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    common = {"rate_limit": 0.3, "server_error": 0.1, "timeout": 0.05}
    rows = {}
    for mode in ("clean", "faulty"):
        folder = tmp_path / mode
        folder.mkdir()
        monkeypatch.chdir(folder)
        reader_rates = common | {"bad_body": 0.1} if mode == "faulty" else {}
        judge_rates = common | {"malformed_json": 0.1} if mode == "faulty" else {}
        with (
            FakeOpenAIServer(
                responder=responder, rates=reader_rates, retry_after=0.05, timeout_delay_s=2, seed=1
            ) as reader,
            FakeOpenAIServer(
                responder=responder, rates=judge_rates, retry_after=0.05, timeout_delay_s=2, seed=2
            ) as judge,
        ):
            write_project(folder, reader.base_url, cases=6)
            settings = "max_retries: 10, json_retries: 5, timeout_s: 1"
            config = (folder / "config.yaml").read_text().replace("max_retries: 0", settings)
            config = config.replace(
                f"evaluation: {{judge: {{api_base: {reader.base_url}",
                f"evaluation: {{judge: {{api_base: {judge.base_url}",
            )
            (folder / "config.yaml").write_text(config)
            assert run.main(["--config", "config.yaml"]) == 0
            rows[mode] = table(folder)
            faults = {
                "reader": [f for f in reader.fault_log if f],
                "judge": [f for f in judge.fault_log if f],
            }
    clean, faulty = rows["clean"], rows["faulty"]
    assert {m: faulty[m] for m in METRICS} == {m: clean[m] for m in METRICS}
    assert faulty["reader_failures"] == faulty["judge_parse_failures"] == "0"
    kinds = {"rate_limit", "server_error", "timeout", "bad_body", "malformed_json"}
    assert set(faults["reader"]) | set(faults["judge"]) == kinds  # every kind met at least once
    # every fault cost exactly one more request, and each one is counted where it belongs
    assert int(faulty["reader_retries"]) == len(faults["reader"])
    malformed = faults["judge"].count("malformed_json")
    assert int(faulty["judge_json_reasks"]) == malformed
    assert int(faulty["judge_retries"]) == len(faults["judge"]) - malformed
