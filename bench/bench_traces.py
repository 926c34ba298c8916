"""How fast does ragbench turn a deployed system's traces into scored cases? Traces read and scored per
second for OTLP/JSON exports of 1,000 and 10,000 spans, with the fake OpenAI-compatible server as the
judge, so the figure is ragbench's own work (parsing, the ZenML run, the judge client, the report), not a
model's.

Each export holds RAG traces of three spans (chain, retriever, LLM), as `tests/otlp_traces.py` builds
them, all within the last hours. Two measures per size and source:
- read: the traces parsed into eval cases (`load_eval_suite_from`), what preflight and the load step do;
- scored: a real `run.py` run in its own process, its own ZenML store and an empty LLM cache: every
  trace read, judged on the default rubrics (one judge call each), reported and annotated.

With `--phoenix` the same export also goes to a real Phoenix server on 127.0.0.1 (tests/phoenix_server.py,
in .venv-phoenix: `make phoenix-venv`), and is read from its REST API and annotated there.

    python bench/bench_traces.py [--spans 1000,10000] [--phoenix] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragbench.inputs.eval_cases import EvalCasesConfig, load_eval_suite_from  # noqa: E402
from ragbench.inputs.phoenix import PhoenixClient, PhoenixError, PhoenixSource  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402
from tests.otlp_traces import HOUR_NS, rag_trace, write_jsonl  # noqa: E402
from tests.phoenix_server import PhoenixServer, phoenix_server, unavailable_reason  # noqa: E402
from tests.projects import THREE_TOPICS, write_knowledge_base  # noqa: E402

SPANS_PER_TRACE = 3


def verdict(request: dict) -> str:
    """A fixed verdict in the shape of the rubric asked: the context rubric's four criteria, else a score."""
    if "faithfulness" in request["messages"][0]["content"]:
        scores = {"faithfulness": 5, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        return json.dumps({"reasoning": "read", **scores})
    return json.dumps({"reasoning": "compared", "score": 4})


def write_export(folder: Path, spans: int) -> None:
    """The three-topic knowledge base and an export of `spans` spans (whole traces) of the last hours.
    Each size's trace ids are its own (numbered from spans * 10): one Phoenix server holds every size's
    project, and it stores a trace id once, so a second export reusing ids would lose those traces."""
    write_knowledge_base(folder, THREE_TOPICS)
    now = time.time_ns()
    traces = [
        rag_trace(
            spans * 10 + n,
            f"Question {n} about loops?",
            "Use the break statement.",
            [("loops.md", THREE_TOPICS["loops.md"], 0.8), ("files.md", THREE_TOPICS["files.md"], 0.2)],
            start_ns=now - HOUR_NS - n * 1_000_000,
        )
        for n in range(1, spans // SPANS_PER_TRACE + 1)
    ]
    write_jsonl(folder / "spans.jsonl", traces)


def write_config(folder: Path, name: str, traces: dict, judge: FakeOpenAIServer) -> Path:
    """The project's config, reading `traces` (eval_cases.traces) and scoring them with the fake judge."""
    settings = f"{{api_base: {judge.base_url}, max_retries: 0, json_retries: 0}}"
    config = folder / "config.yaml"
    config.write_text(
        f"name: {name}\n"
        "knowledge_base: {kind: folder, path: kb}\noutput_dir: out\n"
        f"eval_cases: {{traces: {json.dumps(traces)}}}\n"
        "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\n"
        f"evaluation: {{judge: {settings}, judge_check: null}}\ngeneration: {{sample_size: null}}\n"
        f"llm_cache_dir: {folder / 'llm-cache'}\n"
        "regression: {min_traces: 1}\n"  # the smoke run's ten traces are gated too
        "systems: [{name: logged, traces: true}]\n"
    )
    return config


def load_into_phoenix(phoenix: PhoenixServer, export: Path, project: str, spans: int) -> None:
    """The export sent to Phoenix's OTLP/HTTP endpoint, then waited for until the server serves every
    span (it inserts in the background), bounded."""
    loader = ROOT / "tests" / "phoenix" / "load_export.py"
    subprocess.run(
        [str(phoenix.python), str(loader), str(export), phoenix.otlp_http_endpoint, project],
        check=True,
        timeout=600,
    )
    source = PhoenixSource(url=phoenix.url, project=project)
    # Phoenix inserts about 160 spans a second here; each check reads every span, which slows the inserts
    # it waits for, so checks are ten seconds apart
    allowed_s = 120 + spans / 20
    deadline = time.monotonic() + allowed_s
    with PhoenixClient(source) as client:
        while True:
            try:  # a project Phoenix has stored no span of yet is "not found"
                if len(client.spans(None, None).spans) >= spans:
                    return
            except PhoenixError:
                pass
            if time.monotonic() > deadline:
                waited = f"within {allowed_s:.0f} s"
                raise SystemExit(f"Phoenix did not serve the {spans} spans of {export} {waited}")
            time.sleep(10)


def measure(spans: int, scratch: Path, phoenix: PhoenixServer | None) -> dict:
    """One size's row for one source (the file, or Phoenix when given): the read and the scored run, timed."""
    source = "phoenix" if phoenix is not None else "file"
    exported = spans // SPANS_PER_TRACE * SPANS_PER_TRACE  # whole traces: rounded down
    folder = scratch / f"{source}-{spans}"
    folder.mkdir()
    write_export(folder, spans)
    name = f"bench-traces-{source}-{spans}"
    if phoenix is not None:
        load_into_phoenix(phoenix, folder / "spans.jsonl", name, exported)
        traces: dict = {"phoenix": {"url": phoenix.url, "project": name}}
    else:
        traces = {"path": "spans.jsonl"}
    traces |= {"since": "24h", "annotations_path": "annotations.jsonl"}
    with FakeOpenAIServer(responder=verdict) as judge:
        config = write_config(folder, name, traces, judge)
        read = traces if phoenix is not None else traces | {"path": str(folder / "spans.jsonl")}
        started = time.perf_counter()
        cases = load_eval_suite_from(EvalCasesConfig(traces=read)).cases
        read_s = time.perf_counter() - started
        env = os.environ | {
            "ZENML_CONFIG_PATH": str(folder / "zenml"),
            "ZENML_ANALYTICS_OPT_IN": "false",
            "OPENAI_API_KEY": "sk-bench-DUMMY",
        }
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "--config", str(config)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        run_s = time.perf_counter() - started
        calls = judge.request_count
    if done.returncode != 0:
        raise SystemExit(
            f"the run of {spans} spans from the {source} failed ({done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )
    annotated = {json.loads(line)["trace_id"] for line in (folder / "annotations.jsonl").open()}
    if len(annotated) != len(cases):
        raise SystemExit(f"{len(cases)} traces read, {len(annotated)} annotated")
    return {
        "source": source,
        "spans": exported,
        "traces": len(cases),
        "read_s": round(read_s, 3),
        "read_traces_per_s": round(len(cases) / read_s),
        "run_s": round(run_s, 1),
        "scored_traces_per_s": round(len(cases) / run_s, 1),
        "judge_calls": calls,
        "annotated": len(annotated),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", default="1000,10000", help="comma-separated export sizes, in spans")
    parser.add_argument(
        "--phoenix", action="store_true", help="also from a real Phoenix server (.venv-phoenix)"
    )
    parser.add_argument("--smoke", action="store_true", help="one export of 30 spans")
    args = parser.parse_args()
    sizes = [30] if args.smoke else [int(size) for size in args.spans.split(",")]
    if args.phoenix and (reason := unavailable_reason()) is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory() as scratch:
        rows = [measure(spans, Path(scratch), None) for spans in sizes]
        if args.phoenix:
            with phoenix_server() as phoenix:
                rows += [measure(spans, Path(scratch), phoenix) for spans in sizes]
    print(
        f"Traces read and scored per second, {SPANS_PER_TRACE} spans per trace, the fake judge on "
        f"127.0.0.1, {os.cpu_count()} cores. read: the traces (a file, or Phoenix's REST API) parsed into "
        "cases; scored: a whole run.py run in its own process (ZenML start-up included), every trace judged, "
        "reported and annotated (in Phoenix too, for its source)."
    )
    print()
    print(rows_to_text(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
