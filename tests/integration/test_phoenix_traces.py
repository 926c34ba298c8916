"""A real LangChain RAG app's traces, from a real Phoenix server and from the OTLP file the app also wrote,
scored by real ZenML runs with the fake judge: the logged system reported as a cell with intervals, its
scores written back as span annotations that Phoenix then returns for those spans, and the file and the
server read as the same traces. A Phoenix that is down and a window with no trace stop a run with one
message before any step. Phoenix and the app run in their own venv (`make phoenix-venv`, part of the
slow tier's set-up)."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.fake_openai_server import FakeOpenAIServer
from tests.integration.test_traces_pipeline import judge
from tests.phoenix_server import RAG_APP, listening_addresses, phoenix_server, unavailable_reason
from tests.projects import THREE_TOPICS, printed, write_knowledge_base
from tests.system.test_bench_smoke import check_traces, parse_table, run_bench

pytestmark = pytest.mark.slow
PROJECT = "prod-rag"
QUESTIONS = [
    {"question": "How do I end a loop at once with break?", "tags": ["prod"]},
    {"question": "What closes a file automatically when the block ends?", "tags": ["prod"]},
    {"question": "Which statement raises AssertionError when it is failing?", "tags": ["prod"]},
    {
        "question": "And what does the break statement end?",
        "history": [
            {"role": "user", "content": "How do loops stop?"},
            {"role": "assistant", "content": "With break."},
        ],
        "tags": ["prod"],
    },
    {"question": "Tell me about quantum gravity of zebras", "tags": ["prod"]},
]


def run_app(python: str | Path, root: Path, questions: list[dict], **options: str | bool) -> list[str]:
    """The instrumented app, once per question (`options` its flags: True for one without a value); the
    trace ids it printed."""
    (root / "questions.json").write_text(json.dumps(questions))
    arguments = [
        f"--{key.replace('_', '-')}" + ("" if value is True else f"={value}")
        for key, value in options.items()
    ]
    done = subprocess.run(
        [
            str(python),
            str(RAG_APP),
            "--kb",
            str(root / "kb"),
            "--questions",
            str(root / "questions.json"),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.split()[-1] for line in done.stdout.splitlines() if line.strip()]


def spans_in_phoenix(url: str, expected: int) -> list[dict]:
    """The project's spans once Phoenix has stored them all (it inserts in the background), bounded."""
    deadline = time.monotonic() + 60
    while True:
        body = httpx.get(f"{url}/v1/projects/{PROJECT}/spans/otlpv1", params={"limit": 1000}, timeout=30)
        spans = body.json()["data"] if body.status_code == 200 else []
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def write_config(root: Path, llm: FakeOpenAIServer, traces: str) -> None:
    settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
    (root / "config.yaml").write_text(
        f"name: phoenix-{root.name}".lower()[:60] + "\n"
        "knowledge_base: {kind: folder, path: kb}\noutput_dir: out\n"
        f"eval_cases: {{traces: {traces}}}\n"
        "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\n"
        f"evaluation: {{judge: {settings}}}\ngeneration: {{sample_size: null}}\n"
        f"llm_cache_dir: {root / 'llm-cache'}\n"
        "regression: {baseline: none, min_traces: 5}\n"
        "systems: [{name: prod-rag, traces: true, source_match: {rule: basename}}]\n"
    )


def logged_row(root: Path) -> dict:
    with (root / "out" / "latest" / "results.csv").open() as file:
        (row,) = list(csv.DictReader(file))
    return row


@pytest.fixture(scope="module")
def phoenix():
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    with phoenix_server() as server:
        yield server


def test_the_apps_traces_from_phoenix_and_from_its_file_are_scored_and_annotated(
    phoenix, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    port = int(phoenix.url.rsplit(":", 1)[1])
    assert listening_addresses(port) == {"127.0.0.1"}  # the server listens on this machine only
    write_knowledge_base(tmp_path, THREE_TOPICS)
    trace_ids = run_app(
        phoenix.python,
        tmp_path,
        QUESTIONS,
        phoenix_endpoint=phoenix.otlp_http_endpoint,
        otlp_file=str(tmp_path / "spans.jsonl"),
        project=PROJECT,
    )
    assert len(trace_ids) == len(QUESTIONS)
    file_spans = [
        span
        for line in (tmp_path / "spans.jsonl").read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    served = spans_in_phoenix(phoenix.url, len(file_spans))
    assert {span["span_id"] for span in served} == {span["spanId"] for span in file_spans}

    with FakeOpenAIServer(responder=judge) as llm:
        write_config(tmp_path, llm, f"{{phoenix: {{url: {phoenix.url}, project: {PROJECT}}}, since: 1h}}")
        code, out, err = printed()
        assert code == 0, err + out
        from_phoenix = logged_row(tmp_path)
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert f"Phoenix {phoenix.url} project {PROJECT}" in html and "Logged system prod-rag" in html

        write_config(tmp_path, llm, "{path: spans.jsonl, since: 1h, annotations_path: scores.jsonl}")
        code, out, err = printed()
        assert code == 0, err + out
        from_file = logged_row(tmp_path)
    # the logged system is a cell with intervals, the same from the server and from the file
    assert from_phoenix["external"] == "prod-rag" and from_phoenix["answers_produced"] == str(len(QUESTIONS))
    low, mean, high = (float(from_phoenix[f"faithfulness_1to5{end}"]) for end in ("_low", "", "_high"))
    assert low <= mean <= high and low < high
    assert mean == pytest.approx(1 + 4 * 4 / 5)  # the question about zebras found nothing
    for column in (
        "faithfulness_1to5",
        "faithfulness_1to5_low",
        "faithfulness_1to5_high",
        "answers_produced",
    ):
        assert from_phoenix[column] == from_file[column]
    # the documents the app retrieved, with the sources and scores its LangChain documents carry in their
    # metadata (OpenInference's LangChain instrumentation records no document id or score of their own)
    records = [
        json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").read_text().splitlines()
    ]
    contexts = [context for record in records for context in record["contexts"]]
    assert len(contexts) == 2 * len(QUESTIONS) and {context["source"] for context in contexts} <= set(
        THREE_TOPICS
    )
    # the scores went back to Phoenix, which now returns them for those spans
    roots = sorted(span["span_id"] for span in served if not span.get("parent_span_id"))
    annotations = httpx.get(
        f"{phoenix.url}/v1/projects/{PROJECT}/span_annotations",
        params={"span_ids": roots, "limit": 1000},
        timeout=30,
    ).json()["data"]
    faithfulness = {a["span_id"]: a for a in annotations if a["name"] == "faithfulness"}
    assert sorted(faithfulness) == roots
    assert sorted(a["result"]["score"] for a in faithfulness.values()) == [1.0, 5.0, 5.0, 5.0, 5.0]
    assert all(
        a["identifier"].startswith("ragbench:") and a["annotator_kind"] == "LLM"
        for a in faithfulness.values()
    )
    # the file source's annotations are the same scores, keyed by the same spans
    lines = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert {(a["span_id"], a["score"]) for a in lines if a["name"] == "faithfulness"} == {
        (span_id, a["result"]["score"]) for span_id, a in faithfulness.items()
    }


def test_a_phoenix_that_is_down_or_an_empty_window_stops_the_run_before_any_step(
    phoenix, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    write_knowledge_base(tmp_path, THREE_TOPICS)
    with FakeOpenAIServer(responder=judge) as llm:
        with FakeOpenAIServer(responder=judge) as gone:
            down = gone.base_url.rsplit("/", 1)[0]  # a port that was serving, and is closed now
        write_config(tmp_path, llm, f"{{phoenix: {{url: {down}, project: {PROJECT}}}, since: 1h}}")
        code, _, err = printed()
        assert code == 2 and "failed 4 times, last: ConnectError" in err and "Is the server running" in err
        past = "start: '2020-01-01T00:00:00Z', end: '2020-01-02T00:00:00Z'"
        write_config(tmp_path, llm, f"{{phoenix: {{url: {phoenix.url}, project: {PROJECT}}}, {past}}}")
        code, _, err = printed()
        assert code == 2 and "no RAG trace to score" in err
    assert llm.request_count == 0 and not (tmp_path / "out").exists()


def test_the_traces_bench_reads_and_scores_from_phoenix_too(tmp_path):
    """bench/bench_traces.py --phoenix on its smoke size: the export sent to a Phoenix of its own, read back
    through the REST API, scored and annotated there, beside the file's row (check_traces)."""
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    script = Path(__file__).parents[2] / "bench" / "bench_traces.py"
    shown = run_bench(script, ["--smoke", "--phoenix"], tmp_path / "zenml", timeout=900)
    check_traces(shown)
    assert len(parse_table(shown)) == 2
