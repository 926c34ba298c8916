"""The regression gate fails closed, runs inside the pipeline, and alerts through ZenML's alerter.

Real pipelines (MiniLM, FAISS, ZenML) with fake LLM providers on loopback; the alerter is ZenML's own
Slack alerter with slack_sdk's client pointed at a recording Slack API on 127.0.0.1.
"""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from zenml.client import Client

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import newest_run, write_keyword_topics

STAGES = ("chunk", "index", "retrieve", "answer", "judge")


def responder(request: dict) -> str:
    if not request.get("response_format"):
        return f"About {last_user_text(request).rsplit('Question:', 1)[-1].strip()} [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


def write_project(
    root: Path, name: str, readers: list[tuple[str, str]], cases: int, reader_concurrency: int = 4
) -> None:
    """`readers`: (model, api_base) pairs, one grid cell each; relative paths throughout. Each test has
    its own config `name`: runs of one name are one history, and the gate compares within it."""
    write_keyword_topics(root, cases)
    entries = ", ".join(f"{{model: {model}, api_base: {base}}}" for model, base in readers)
    judge = f"[{{model: openai/fake-judge, api_base: {readers[0][1]}}}]" if readers else "[]"
    (root / "config.yaml").write_text(
        f"name: {name}\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        "eval_cases: cases.jsonl\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, top_n: 1,"
        f" reader: [{entries}], judge: {judge}}}\n"
        "retrieval: {metrics_k: 1}\n"
        f"generation: {{reader: {{max_retries: 0, concurrency: {reader_concurrency}}}}}\n"
        "evaluation: {judge: {max_retries: 0}, rubrics: [correctness], judge_check: null}\n"  # no card
        "llm_cache_dir: llm-cache\n"
        "output_dir: out\n"
    )


class SlackAPI:
    """A recording stand-in for Slack's Web API: every call answers ok; chat.postMessage is kept."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                if self.path.endswith("chat.postMessage"):
                    owner.messages.append(json.loads(body))
                reply = json.dumps({"ok": True, "channel": {"id": "C1"}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack(monkeypatch) -> Iterator[SlackAPI]:
    """ZenML's Slack alerter on a stack of its own, its Slack client sent to 127.0.0.1."""
    import slack_sdk
    from zenml.enums import StackComponentType
    from zenml.integrations.slack.alerters import slack_alerter

    api = SlackAPI()

    class LocalWebClient(slack_sdk.WebClient):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **{**kwargs, "base_url": api.url})

    monkeypatch.setattr(slack_sdk, "WebClient", LocalWebClient)
    monkeypatch.setattr(slack_alerter, "WebClient", LocalWebClient)
    client = Client()
    previous = client.active_stack_model.name
    client.create_stack_component(
        name="gate-test-slack",
        flavor="slack",
        component_type=StackComponentType.ALERTER,
        configuration={"slack_token": "xoxb-gate-test", "slack_channel_id": "C1"},
    )
    client.create_stack(
        name="gate-test-alerting",
        components={
            StackComponentType.ORCHESTRATOR: "default",
            StackComponentType.ARTIFACT_STORE: "default",
            StackComponentType.ALERTER: "gate-test-slack",
        },
    )
    client.activate_stack("gate-test-alerting")
    try:
        yield api
    finally:
        client.activate_stack(previous)
        client.delete_stack("gate-test-alerting")
        client.delete_stack_component("gate-test-slack", StackComponentType.ALERTER)
        api.close()


@pytest.fixture
def provider(tmp_path, monkeypatch) -> Iterator[FakeOpenAIServer]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as fake:
        yield fake


def test_an_outage_fails_the_gate_and_alerts_it_never_compares_older_runs(tmp_path, provider, slack, capsys):
    # one reader call at a time, so 8 failures in a row trip the breaker and the run fails
    write_project(
        tmp_path, "outage", [("openai/fake-reader", provider.base_url)], cases=9, reader_concurrency=1
    )
    config = ["--config", "config.yaml"]
    assert run.main(config) == 0
    assert run.main(config) == 0
    good = newest_run()
    assert good.run_metadata["gate_status"] == "passed" and good.run_metadata["compared_metrics"] > 0
    assert not slack.messages  # a passing night is quiet
    provider.all_fail = True
    capsys.readouterr()
    assert (
        run.main([*config, "--no-cache", "--set", "llm_cache_dir=fresh-cache"]) == 2
    )  # nothing cached to fall back on
    broken = newest_run()
    assert broken.status.value == "failed"
    assert broken.name in capsys.readouterr().err  # the failed run is reported by its own name
    (alert,) = slack.messages
    assert broken.name in alert["text"] and "failed" in alert["text"] and "sk-test-DUMMY" not in alert["text"]
    assert run.main(["compare", *config]) == 1  # the newest run is judged, whatever its status
    out = capsys.readouterr().out
    assert f"run {broken.name} did not finish" in out and "FAILED" in out
    provider.all_fail = False
    assert run.main(config) == 0  # back: judged against the last good run, not the broken one
    assert newest_run().run_metadata["baseline_run"] == good.name


def test_a_cell_whose_reader_failed_entirely_is_missing_not_skipped(tmp_path, provider, capsys):
    with FakeOpenAIServer(responder=responder) as second:
        write_project(
            tmp_path,
            "one-cell-down",
            [("openai/reader-a", provider.base_url), ("openai/reader-b", second.base_url)],
            cases=3,
        )
        assert run.main(["--config", "config.yaml"]) == 0
        second.all_fail = True
        capsys.readouterr()
        assert run.main(["--config", "config.yaml", "--no-cache", "--set", "llm_cache_dir=fresh-cache"]) == 2
    captured = capsys.readouterr()
    assert "every reader call failed in cell" in captured.err
    metadata = newest_run().run_metadata
    assert metadata["gate_status"] == "incomplete" and metadata["missing_metrics"] >= 2
    gate_page = (tmp_path / "out" / "latest" / "gate.html").read_text()
    assert "missing" in gate_page and "reader-b" in gate_page
    missing = [line for line in captured.out.splitlines() if line.startswith("MISSING")]
    assert missing and all("reader_b" in line for line in missing)
    assert any(line.startswith("MISSING correctness") for line in missing)


def test_operational_settings_change_no_cell_and_no_step(tmp_path, provider, capsys):
    write_project(tmp_path, "tuned", [("openai/fake-reader", provider.base_url)], cases=3)
    assert run.main(["--config", "config.yaml"]) == 0
    first = newest_run()
    calls = provider.request_count
    tuned = [
        "generation.reader.concurrency=2",
        "generation.reader.timeout_s=30",
        "generation.reader.max_retries=3",
        "generation.reader.json_retries=1",
        "evaluation.judge.concurrency=3",
        "evaluation.judge.api_key_env=OPENAI_API_KEY",
    ]
    assert run.main(["--config", "config.yaml", *(f"--set={item}" for item in tuned)]) == 0
    second = newest_run()
    assert provider.request_count == calls  # nothing asked again
    statuses = {name: step.status.value for name, step in second.steps.items() if name.startswith(STAGES)}
    assert statuses and set(statuses.values()) == {"cached"}, statuses
    assert second.run_metadata["cell_ids"] == first.run_metadata["cell_ids"]
    metadata = second.run_metadata
    assert metadata["gate_status"] == "passed" and metadata["baseline_run"] == first.name
    assert metadata["compared_metrics"] > 0 and metadata["regressions"] == 0
    assert run.main(["compare", "--config", "config.yaml"]) == 0
    assert "added cell" not in capsys.readouterr().out


def test_three_cases_one_source_lost_is_a_regression_by_the_threshold_rule(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, "three-cases", [], cases=3)  # retrieval only
    assert run.main(["--config", "config.yaml"]) == 0
    # one case loses its source document: its fact moves into another page
    (tmp_path / "kb" / "break.md").write_text("# Moved\nThis page has moved.")
    with (tmp_path / "kb" / "with.md").open("a") as page:
        page.write("\nThe break statement is a Python keyword.")
    capsys.readouterr()
    assert run.main(["--config", "config.yaml"]) == 1
    out = capsys.readouterr().out
    regression = next(line for line in out.splitlines() if line.startswith("REGRESSION hit_rate_at_1"))
    assert "cannot decide at n = 3" in regression and "threshold rule" in regression


def test_an_unnamed_config_is_named_after_its_file_and_runs_carry_cli_tags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, "unused", [], cases=2)
    text = (tmp_path / "config.yaml").read_text().replace("name: unused\n", "")
    (tmp_path / "nightly-docs.yaml").write_text(text)
    assert run.main(["config", "--config", "nightly-docs.yaml"]) == 0
    assert capsys.readouterr().out.startswith("name: nightly-docs\n")
    assert run.main(["--config", "nightly-docs.yaml", "--tag", "nightly"]) == 0
    tags = {tag.name for tag in newest_run().tags}
    assert {"config-nightly-docs", "nightly"} <= tags
    assert run.main(["compare", "--config", "nightly-docs.yaml", "--tag", "nightly"]) == 2  # one run so far
    assert "no previous run of config 'nightly-docs'" in capsys.readouterr().err


def test_a_night_whose_judge_was_down_never_becomes_the_yardstick(tmp_path, monkeypatch, capsys):
    """good, good, judge down, then a night whose judge scores every answer 1: the last night fails against
    the last good one. Then an eval-set change fails by default and passes once accepted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    verdict = {"score": 5}

    def judge(request: dict) -> str:
        return json.dumps({"reasoning": "compared with the reference", **verdict})

    with FakeOpenAIServer(responder=responder) as reader, FakeOpenAIServer(responder=judge) as grader:
        write_project(tmp_path, "judge-down", [("openai/fake-reader", reader.base_url)], cases=6)
        config = (
            (tmp_path / "config.yaml")
            .read_text()
            .replace(
                f"judge: [{{model: openai/fake-judge, api_base: {reader.base_url}}}]",
                f"judge: [{{model: openai/fake-judge, api_base: {grader.base_url}}}]",
            )
        )
        (tmp_path / "config.yaml").write_text(config)
        assert f"api_base: {grader.base_url}}}]" in config
        base = ["--config", "config.yaml"]
        assert run.main(base) == 0
        assert run.main(base) == 0
        good = newest_run()
        assert good.run_metadata["gate_status"] == "passed"

        # night 3: the judge is down (every step recomputed, nothing in the LLM cache to fall back on)
        grader.all_fail = True
        capsys.readouterr()
        assert run.main([*base, "--no-cache", "--set", "llm_cache_dir=night-3"]) == 2
        down = newest_run()
        assert down.run_metadata["gate_status"] == "incomplete"
        (why,) = down.run_metadata["incomplete_cells"].values()
        assert "the judge could not score correctness on any of its 6 answer(s)" in why
        assert "the judge could not score correctness" in capsys.readouterr().err

        # night 4: the judge is back but calls every answer wrong: compared with night 2, never night 3
        grader.all_fail = False
        verdict["score"] = 1
        assert run.main([*base, "--no-cache", "--set", "llm_cache_dir=night-4"]) == 1
        wrong = newest_run()
        metadata = wrong.run_metadata
        assert metadata["gate_status"] == "regressed" and metadata["baseline_run"] == good.name
        out = capsys.readouterr().out
        assert "REGRESSION correctness_0to1" in out and "1 -> 0" in out

        # a changed eval set fails the gate by default, and passes once the config accepts it
        verdict["score"] = 5
        with (tmp_path / "cases.jsonl").open("a") as cases:
            cases.write(
                "\n" + json.dumps({"id": "extra", "question": "What is pass?", "expected_sources": []})
            )
        assert run.main(base) == 1
        changed = newest_run().run_metadata
        assert changed["gate_status"] == "regressed" and changed["baseline_run"] == good.name
        assert any("eval set changed" in reason for reason in changed["gate_reasons"])
        assert "regression.on_eval_change=warn" in capsys.readouterr().out
        assert run.main([*base, "--set", "regression.on_eval_change=warn"]) == 0
        accepted = newest_run()
        assert any(
            "accepted by regression.on_eval_change: warn" in r for r in accepted.run_metadata["gate_reasons"]
        )
        assert run.main(base) == 0  # the accepted run is now the yardstick
        assert newest_run().run_metadata["baseline_run"] == accepted.name
