"""How fast does ragbench turn a deployed system's traces into scored cases? Traces read and scored per
second for OTLP/JSON exports of 1,000 and 10,000 spans, with the fake OpenAI-compatible server as the
judge, so the figure is ragbench's own work (parsing, the ZenML run, the judge client, the report), not a
model's.

Each export holds RAG traces of three spans (chain, retriever, LLM), as `tests/otlp_traces.py` builds
them, all within the last hours. Two measures per size:
- read: the export parsed into eval cases (`load_eval_suite_from`), what preflight and the load step do;
- scored: a real `run.py` run in its own process, its own ZenML store and an empty LLM cache: every
  trace read, judged on the default rubrics (one judge call each), reported and annotated.

    python bench/bench_traces.py [--spans 1000,10000] [--smoke]
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
from ragbench.report.pages import rows_to_text  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402
from tests.otlp_traces import HOUR_NS, rag_trace, write_jsonl  # noqa: E402
from tests.projects import THREE_TOPICS, write_knowledge_base  # noqa: E402

SPANS_PER_TRACE = 3


def verdict(request: dict) -> str:
    """A fixed verdict in the shape of the rubric asked: the context rubric's four criteria, else a score."""
    if "faithfulness" in request["messages"][0]["content"]:
        scores = {"faithfulness": 5, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        return json.dumps({"reasoning": "read", **scores})
    return json.dumps({"reasoning": "compared", "score": 4})


def write_project(folder: Path, spans: int, judge: FakeOpenAIServer) -> Path:
    """A project of `spans` spans (whole traces) over the three-topic knowledge base; its config."""
    write_knowledge_base(folder, THREE_TOPICS)
    now = time.time_ns()
    traces = [
        rag_trace(
            n,
            f"Question {n} about loops?",
            "Use the break statement.",
            [("loops.md", THREE_TOPICS["loops.md"], 0.8), ("files.md", THREE_TOPICS["files.md"], 0.2)],
            start_ns=now - HOUR_NS - n * 1_000_000,
        )
        for n in range(1, spans // SPANS_PER_TRACE + 1)
    ]
    write_jsonl(folder / "spans.jsonl", traces)
    settings = f"{{api_base: {judge.base_url}, max_retries: 0, json_retries: 0}}"
    config = folder / "config.yaml"
    config.write_text(
        f"name: bench-traces-{spans}\n"
        "knowledge_base: {kind: folder, path: kb}\noutput_dir: out\n"
        "eval_cases: {traces: {path: spans.jsonl, since: 24h, annotations_path: annotations.jsonl}}\n"
        "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\n"
        f"evaluation: {{judge: {settings}, judge_check: null}}\ngeneration: {{sample_size: null}}\n"
        f"llm_cache_dir: {folder / 'llm-cache'}\n"
        "systems: [{name: logged, traces: true}]\n"
    )
    return config


def measure(spans: int, scratch: Path) -> dict:
    """One size's row: the read and the scored run, timed."""
    folder = scratch / f"spans-{spans}"
    folder.mkdir()
    with FakeOpenAIServer(responder=verdict) as judge:
        config = write_project(folder, spans, judge)
        started = time.perf_counter()
        cases = load_eval_suite_from(EvalCasesConfig(traces={"path": str(folder / "spans.jsonl")})).cases
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
            f"the run of {spans} spans failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    annotated = {json.loads(line)["trace_id"] for line in (folder / "annotations.jsonl").open()}
    if len(annotated) != len(cases):
        raise SystemExit(f"{len(cases)} traces read, {len(annotated)} annotated")
    return {
        "spans": spans,
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
    parser.add_argument("--smoke", action="store_true", help="one export of 30 spans")
    args = parser.parse_args()
    sizes = [30] if args.smoke else [int(size) for size in args.spans.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        rows = [measure(spans, Path(scratch)) for spans in sizes]
    print(
        f"Traces read and scored per second, {SPANS_PER_TRACE} spans per trace, the fake judge on "
        f"127.0.0.1, {os.cpu_count()} cores. read: the export parsed into cases; scored: a whole run.py "
        "run in its own process (ZenML start-up included), every trace judged, reported and annotated."
    )
    print()
    print(rows_to_text(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
