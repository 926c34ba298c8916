"""Command line: validate the config, provision models, run the ZenML benchmark, fetch its report."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ragbench.analysis.judge_card import card_lines
from ragbench.config.model import BenchmarkConfig, ConfigError, load_config
from ragbench.config.preflight import (
    PreflightError,
    run_preflight,
    run_testset_preflight,
    run_training_preflight,
)
from ragbench.inputs.eval_cases import EvalCaseError
from ragbench.inputs.knowledge_base import KnowledgeBaseError
from ragbench.llm.types import LLMConfigError
from ragbench.models.errors import ModelResolutionError
from ragbench.report.pages import rows_to_text
from ragbench.review.labels import LabelFileError
from ragbench.review.server import REVIEW_PORT
from ragbench.runs.dashboard import DEFAULT_PORT, DashboardError
from ragbench.runs.names import (
    BENCHMARK_PIPELINE,
    EVAL_SET_STEP,
    GATE_STEP,
    RESULTS_STEP,
    TESTSET_PIPELINE,
    TRAIN_RERANKER_PIPELINE,
)
from ragbench.runs.review import ReviewSourceError
from ragbench.section import validation_message

if TYPE_CHECKING:
    from ragbench.analysis.results import ResultsTable


class RunStopped(RuntimeError):
    """The pipeline ran but could not finish (a provider down), or a whole cell has no answers."""


USER_ERRORS = (
    RunStopped,
    ReviewSourceError,
    LabelFileError,
    ConfigError,
    EvalCaseError,
    KnowledgeBaseError,
    LLMConfigError,
    ModelResolutionError,
    PreflightError,
    DashboardError,
)
logger = logging.getLogger("ragbench")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="End-to-end RAG benchmark on a ZenML pipeline.")
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=[
            *("run", "race", "init", "testset", "compare", "promote", "schedule", "dashboard", "review"),
            *("config", "train-reranker"),
        ],
        help="run the benchmark (default); race: run it with the cells raced (the config's `search`, or a "
        "race on its first end-to-end headline metric); init FILE: write a starter config that runs from "
        "any folder; "
        "testset: generate an eval set from the knowledge base; compare the newest run with a baseline "
        "(exit 1 when the gate fails); promote RUN to its config's champion (--config: only a run of that "
        "config); schedule runs; dashboard: ZenML's on 127.0.0.1; review: label a run's answers (or, with "
        "--testset, a generated eval set's candidates) on a page on 127.0.0.1; config: print the effective "
        "config (--reference: every key); train-reranker: fine-tune a ColBERT reranker on questions "
        "written from the knowledge base (use it as reranker: trained:<name>)",
    )
    parser.add_argument(
        "run_name", nargs="?", help="promote: the run to mark as champion; init: the config file to write"
    )
    parser.add_argument(
        "--against",
        help="compare: 'previous', 'champion', 'none' or a run name (default: regression.baseline)",
    )
    parser.add_argument("--last", type=int, default=50, help="compare: consider only the newest N runs")
    parser.add_argument(
        "--tag",
        help="run: tag this run (beside the config's `tags`); compare: consider only runs with this tag",
    )
    parser.add_argument("--reference", action="store_true", help="config: print the reference of every key")
    parser.add_argument("--cron", help='schedule: when, as a cron expression, e.g. "0 3 * * *"')
    parser.add_argument("--list", action="store_true", help="schedule: list installed schedules")
    parser.add_argument("--remove", action="store_true", help="schedule: remove this config's schedule")
    parser.add_argument(
        "--port",
        type=int,
        help=f"dashboard (default {DEFAULT_PORT}) or review (default {REVIEW_PORT}): the port on 127.0.0.1",
    )
    parser.add_argument("--run", help="review: the run to review (default: the newest completed one)")
    parser.add_argument(
        "--rubric", help="review: the rubric to label (default: the one the judge is checked on)"
    )
    parser.add_argument("--labels", help="review: the labels file (default: OUTPUT_DIR/review_labels.jsonl)")
    parser.add_argument(
        "--testset", action="store_true", help="review: a testset run's candidates, to keep or reject"
    )
    parser.add_argument("--stop", action="store_true", help="dashboard: stop it")
    parser.add_argument("--config", help="YAML config (default: configs/default.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set grid.chunk_size=[128,256] (repeatable)",
    )
    parser.add_argument("--no-cache", action="store_true", help="recompute every step")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells (testset: the generator's and each filter's calls) with their LLM calls, tokens "
        "and cost; call nothing, download nothing",
    )
    return parser.parse_args(argv)


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record arrives (tests and ZenML swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def configure_logging() -> None:
    """Our messages once, on stderr; ZenML prints its own lines through its own handler."""
    if not logger.handlers:
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    for chatty in ("faiss", "faiss.loader", "sentence_transformers", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def check_output_dir(config: BenchmarkConfig) -> None:
    """A report that cannot be written must fail the run before the pipeline, not after it."""
    root = Path(config.output_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=root).close()
    except OSError as error:
        raise PreflightError(f"output_dir {root} is not writable: {error}") from None


def write_folder(root: Path, name: str, files: dict[str, str]) -> Path:
    """Write into a temporary folder and rename, so a crash never leaves a half-written folder."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    for file_name, content in files.items():
        (staging / file_name).write_text(content, encoding="utf-8")
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    return final


def write_outputs(config: BenchmarkConfig, run_name: str, files: dict[str, str]) -> Path:
    """The run's report folder, and `latest` pointing at it."""
    output_root = Path(config.output_dir)
    final = write_folder(output_root, run_name, files)
    latest_tmp = output_root / f".latest-{os.getpid()}"
    latest_tmp.unlink(missing_ok=True)
    latest_tmp.symlink_to(final.name)
    latest_tmp.replace(output_root / "latest")  # atomic: another run never sees it missing
    return final


def finished_steps(knowledge_base_fingerprint: str, eval_fingerprint: str, runs: int = 20) -> set[str]:
    """Step ids that recent runs on the same documents and eval cases finished (for the dry run)."""
    from zenml.client import Client

    open_store()
    client = Client()
    try:
        pipeline = client.get_pipeline(BENCHMARK_PIPELINE)
    except KeyError:
        return set()
    done: set[str] = set()
    for pipeline_run in client.list_pipeline_runs(pipeline_id=pipeline.id, size=runs, sort_by="desc:created"):
        metadata = pipeline_run.run_metadata
        if (
            metadata.get("knowledge_base_fingerprint") == knowledge_base_fingerprint
            and metadata.get("eval_fingerprint") == eval_fingerprint
        ):
            done |= {
                name
                for name, step in pipeline_run.steps.items()
                if step.status.value in ("completed", "cached")
            }
    return done


def raced(config: BenchmarkConfig) -> BenchmarkConfig:
    """The config with its cells raced: its own `search`, else a race with the defaults on its first
    end-to-end headline metric."""
    if config.search is not None:
        return config
    from ragbench.retrieval.measures import is_retrieval_column

    metrics = [m.column for m in config.scoring().headline() if not is_retrieval_column(m.column)]
    if not metrics or not config.grid.reader:
        raise ConfigError("race: the config computes no end-to-end metric (it needs readers and a judge)")
    data = config.model_dump(mode="json") | {"search": {"strategy": "race", "metric": metrics[0]}}
    try:
        return BenchmarkConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(validation_message(error)) from None


def print_plan(config: BenchmarkConfig) -> int:
    """The dry run: every check that needs no model, key or server (config, knowledge base, eval cases,
    index parameters, model names this machine can resolve, docker settings, named secrets, the output
    folder), then the plan; what only a real run can check is listed, never passed over in silence."""
    from pipelines.options import run_options, step_environment
    from ragbench.config.dry_run import (
        judge_alignment_calls,
        judge_card_calls,
        label_correction_line,
        plan_rows,
        reference_calls,
    )
    from ragbench.config.expand import expand_grid
    from ragbench.retrieval.rerank import resolve_reranker

    open_store()
    run_options(config)  # a typo in orchestration.docker fails here
    preflight = run_preflight(config, plan_only=True, step_environment=step_environment(config))
    check_output_dir(config)
    rerankers = {
        name: resolve_reranker(name)
        for name in dict.fromkeys(c.reranker for c in expand_grid(config) if c.reranker)
    }
    done = finished_steps(preflight.knowledge_base_fingerprint, preflight.eval_suite.fingerprint)
    rows = plan_rows(config, preflight.eval_suite.cases, done, rerankers)
    print(rows_to_text(rows))  # preflight has logged its warnings (size estimate included) above
    for choice in rerankers.values():
        if choice.is_standin:
            print(f"\nRERANKER: the UNTRAINED stand-in ({choice.label}) would run for {choice.requested}")
    if preflight.unchecked:
        print("\nChecked only by a real run:\n" + "\n".join(f"  - {item}" for item in preflight.unchecked))
    new = sum(row["status"] == "new" for row in rows)
    total_calls = sum(row["llm_calls"] for row in rows)
    costs = [row["cost_usd"] for row in rows]
    cost = "unknown (a model litellm cannot price)" if None in costs else f"${sum(costs):.4f}"
    print(
        f"\n{len(rows)} cells: {new} new, {len(rows) - new} reused from earlier runs on the same documents "
        f"and eval cases (unless code changed since). New LLM calls: {total_calls}, cost {cost}; "
        "completion tokens assume every answer uses max_tokens."
    )
    if (card_calls := judge_card_calls(config, preflight.eval_suite.cases)) is not None:
        print(card_calls)
    if (alignment_calls := judge_alignment_calls(config)) is not None:
        print(alignment_calls)
    if (correction := label_correction_line(config)) is not None:
        print(correction)
    if (fetched := reference_calls(config, preflight.eval_suite.cases)) is not None:
        print(fetched)
    if (search := config.search) is not None:
        cases = len(preflight.eval_suite.cases)
        most = min(cases, search.max_cases or config.generation.sample_size or cases)
        print(
            f"The cells race on {search.metric} in rounds of {search.batch} cases, at most {most}: the calls "
            "above are what every cell answering the fixed sample would make; the race stops the cells "
            "significantly behind after each round, and its report says how many calls it used."
        )
    return 0


def launch(
    pipeline_name: str,
    config: BenchmarkConfig,
    use_cache: bool,
    preflight: Callable[..., object],
    tags: list[str],
    function: str | None = None,
) -> Any:
    """One way to start either pipeline: every check before the run (`preflight` with the environment the
    steps will see, the output folder), a run name known in advance, and the finished run; a run that
    stops, or never starts, ends in one message naming it. `function`: the pipeline function, when it is not
    named as its pipeline (the raced run is registered under the benchmark's name)."""
    from pipelines.options import run_options, step_environment

    open_store()
    options = run_options(config)
    preflight(config, step_environment=step_environment(config))
    check_output_dir(config)

    import pipelines

    mark_runs_failed(abandoned=True)
    run_name = new_run_name(pipeline_name, config.name)
    pipeline = getattr(pipelines, function or pipeline_name)
    try:
        pipeline.with_options(enable_cache=use_cache, run_name=run_name, tags=tags, **options)(
            config=config.model_dump(mode="json")
        )
    except KeyboardInterrupt:
        mark_runs_failed(abandoned=False)
        raise
    except Exception as error:  # a step failed (ZenML kept every finished step), or the run never started
        raise RunStopped(describe_failed_run(run_name, error)) from None
    pipeline_run = finished_run(run_name)
    if pipeline_run.status.value != "completed":
        raise RunStopped(describe_failed_run(run_name))
    return pipeline_run


def print_training_plan(config: BenchmarkConfig) -> int:
    """What `train-reranker` would do, calling nothing."""
    training = config.reranker_training
    size, _ = config.section_chunking(training)
    model = training.generator_settings().model
    print(
        f"train-reranker {config.trained_reranker_name}: up to {training.chunks} call(s) of {model} writing "
        f"one question per chunk of {size} tokens (cached calls are free)"
        + (", plus an inverse-cloze question per chunk (no call)" if training.cloze else "")
        + f"; then at most {training.epochs} epoch(s) or {training.max_minutes:g} min of training on "
        f"{training.device}. Eval cases held out: those of {config.eval_cases.label}."
    )
    return 0


def run_train_reranker(config: BenchmarkConfig, use_cache: bool) -> int:
    """Write questions, mine pairs and train; print what the checkpoint reached and how to use it."""
    from ragbench.models.trained import artifact_name

    pipeline_run = launch(TRAIN_RERANKER_PIPELINE, config, use_cache, run_training_preflight, [])
    name = config.trained_reranker_name
    artifact = pipeline_run.steps["train_reranker_checkpoint"].outputs[artifact_name(name)][0]
    summary = artifact.run_metadata
    rows = [{"field": key, "value": value} for key, value in summary.items() if key != "held_out_case_ids"]
    print(rows_to_text(rows))
    print(
        f"\nZenML artifact: {artifact_name(name)} version {artifact.version} ({summary.get('label')}); "
        f"{len(summary.get('held_out_case_ids', []))} eval case(s) held out of training.\n"
        f"Benchmark it: grid.reranker: [off, trained:{name}]  (or trained:{name}@{artifact.version})"
    )
    return 0


def run_benchmark(config: BenchmarkConfig, use_cache: bool) -> int:
    from ragbench.runs.compare import config_tag
    from ragbench.runs.gate import GateResult

    tags = [config_tag(config.name), *config.tags]
    raced = "rag_race" if config.search is not None else None
    pipeline_run = launch(BENCHMARK_PIPELINE, config, use_cache, run_preflight, tags, function=raced)
    results_step = pipeline_run.steps[RESULTS_STEP]
    table: ResultsTable = results_step.outputs["results"][0].load()
    records = results_step.outputs["case_records"][0].load()
    gate: GateResult = pipeline_run.steps[GATE_STEP].outputs["gate"][0].load()
    files = {
        "results.csv": table.csv(),
        "results.html": table.report_html,
        "cases.jsonl": records.jsonl(),
        "case_values.csv": table.case_values_csv(),
        "gate.html": gate.html(),
        **({"case_types.csv": table.case_type_csv()} if table.case_type_rows else {}),
    }
    folder = write_outputs(config, pipeline_run.name, files)
    print()
    print(rows_to_text(table.summary_rows()))
    print(f"(all columns: {folder}/results.csv)")
    if table.race is not None:
        print("\n" + table.race.summary({row["cell"]: row["label"] for row in table.rows}))
    if table.verdicts:
        print(
            "\nIs the best really better? (paired tests on the same cases, Holm-corrected; intervals "
            f"adjusted for the number of comparisons, then the unadjusted {table.confidence:.0%} one)"
        )
        for verdict in table.verdicts:
            print(f"  {verdict.sentence()}")
    if table.judge_reliability is not None:
        for line in table.judge_reliability.lines():
            print(line)
    for card in table.judge_cards:
        print("\n" + "\n".join(card_lines(card)))
    for alignment in table.judge_alignments:
        print("\n" + "\n".join(alignment.lines()))
    for comparison in table.pairwise:
        print(comparison.text())
    for note in table.notes:
        print(note)
    for warning in table.warnings:
        print(f"WARNING: {warning}")
    print(f"\n{gate.text()}")
    print(f"\nZenML run: {pipeline_run.name}  report: {folder}/results.html  gate: {folder}/gate.html")
    if gate.status == "incomplete":
        raise RunStopped(
            "; ".join(table.incomplete.values()) + ". Their steps are not cached: run again to retry only "
            "the failed calls."
        )
    return gate.exit_code


def finished_run(run_name: str, poll_s: float = 5.0) -> Any:
    """The run as the store has it once it has finished: an asynchronous orchestrator (Kubernetes...)
    returns while the run is still going, and the object `pipeline()` returns is stale either way."""
    from zenml.client import Client

    while True:
        try:
            pipeline_run = Client().get_pipeline_run(run_name)
        except KeyError:  # the pipeline returned, yet ZenML never made the run
            raise RunStopped(describe_failed_run(run_name)) from None
        if pipeline_run.status.is_finished:
            return pipeline_run
        time.sleep(poll_s)


def new_run_name(pipeline_name: str, config_name: str) -> str:
    """A name known before the run starts, so a run that fails is reported by its own name (the
    pipeline's `last_run` may be another process's run)."""
    import uuid

    stamp = time.strftime("%Y_%m_%d-%H_%M_%S", time.gmtime())
    return f"{pipeline_name}-{config_name}-{stamp}-{uuid.uuid4().hex[:6]}"


def print_testset_plan(config: BenchmarkConfig) -> int:
    from ragbench.config.dry_run import testset_plan_rows

    chunks = run_testset_preflight(config, plan_only=True)
    rows = testset_plan_rows(config, chunks)
    print(rows_to_text(rows))
    costs = [row["cost_usd"] for row in rows]
    cost = "unknown (a model litellm cannot price)" if None in costs else f"${sum(costs):.4f}"
    print(
        f"\nAt most {sum(row['calls'] for row in rows)} LLM calls, cost {cost} (every candidate generated "
        "and checked by every configured filter, completions of max_tokens, passages as long as the chunk "
        f"size; cached calls are free). The knowledge base makes about {chunks} chunks of "
        f"{config.section_chunking(config.testset)[0]} tokens."
    )
    return 0


def run_testset(config: BenchmarkConfig, use_cache: bool) -> int:
    """Generate, critique and filter an eval set; export it as JSONL beside the ZenML artifact."""
    from ragbench.testset.assemble import EvalSet

    pipeline_run = launch(TESTSET_PIPELINE, config, use_cache, run_testset_preflight, [])
    artifact = pipeline_run.steps[EVAL_SET_STEP].outputs[config.eval_set_name][0]
    eval_set: EvalSet = artifact.load()
    summary = eval_set.summary
    failures = summary["generator_failures"] + summary["critic_failures"]
    folder = write_folder(
        Path(config.output_dir) / "testsets",
        f"{eval_set.name}-v{artifact.version}" + ("-INCOMPLETE" if failures else ""),
        {
            "cases.jsonl": eval_set.jsonl(),
            "rejected.jsonl": eval_set.jsonl("rejected"),
            "summary.json": json.dumps(summary, indent=2) + "\n",
            "eval_set.html": eval_set.html(),
        },
    )
    print(eval_set.summary_text())
    for warning in eval_set.warnings:
        print(f"WARNING: {warning}")
    print(
        f"\nZenML artifact: {eval_set.name} version {artifact.version}; files: {folder}/cases.jsonl "
        f"(kept), rejected.jsonl, summary.json\nBenchmark on it: eval_cases: {{artifact: {eval_set.name}, "
        f"version: {artifact.version}}}  or  eval_cases: {folder}/cases.jsonl"
    )
    if failures:
        raise RunStopped(
            f"{summary['generator_failures']} generator and {summary['critic_failures']} critic call(s) "
            f"failed, so version {artifact.version} is incomplete and a benchmark refuses it. Run again to "
            "retry only the failed calls (the others are cached)."
        )
    if not eval_set.cases:
        raise RunStopped("no case passed the critics: see rejected.jsonl for their reasons")
    return 0


def open_store() -> None:
    """Create or migrate the ZenML store under a lock: two runs starting at once on a new store would
    otherwise both try to create its tables, and one would fail."""
    from filelock import FileLock
    from zenml.client import Client
    from zenml.utils.io_utils import get_global_config_directory

    Path(get_global_config_directory()).mkdir(parents=True, exist_ok=True)
    with FileLock(Path(get_global_config_directory()) / ".ragbench-store.lock"):
        Client().zen_store  # noqa: B018 - touching the store is what initialises it


def mark_runs_failed(abandoned: bool) -> None:
    for name in (BENCHMARK_PIPELINE, TESTSET_PIPELINE):
        mark_pipeline_runs_failed(name, abandoned)


def mark_pipeline_runs_failed(pipeline_name: str, abandoned: bool) -> None:
    """Runs left "running" are marked failed: this process's own when it is interrupted, or
    (`abandoned`) those whose process on this machine no longer exists (killed, or the machine slept)."""
    from zenml.client import Client
    from zenml.enums import ExecutionStatus
    from zenml.models import PipelineRunUpdate

    client = Client()
    try:
        pipeline = client.get_pipeline(pipeline_name)
    except KeyError:
        return
    host = socket.gethostname()
    for status in (ExecutionStatus.INITIALIZING, ExecutionStatus.RUNNING):
        for pipeline_run in client.list_pipeline_runs(pipeline_id=pipeline.id, status=status, size=100).items:
            metadata = pipeline_run.run_metadata
            pid = metadata.get("orchestrator_pid")
            if metadata.get("orchestrator_host") != host or not isinstance(pid, int):
                continue
            if (pid == os.getpid()) if not abandoned else not process_alive(pid):
                reason = "interrupted" if not abandoned else f"its process {pid} ended without finishing it"
                client.zen_store.update_run(
                    pipeline_run.id, PipelineRunUpdate(status=ExecutionStatus.FAILED, status_reason=reason)
                )
                logger.warning("marked run %s failed: %s", pipeline_run.name, reason)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def compare_command(config: BenchmarkConfig, against: str | None, last: int, tag: str | None) -> int:
    """The gate by hand: the newest run of the config, whatever its status, against `against` (default:
    the config's `regression.baseline`). Exit 1 when the gate fails, 0 when it passes, 2 (via
    RunStopped) on bad input."""
    from zenml.client import Client

    from ragbench.runs.gate import judge_run
    from steps.history import config_runs, failure_of, find_baseline, run_record

    open_store()
    runs = config_runs(config.name, tag, last)
    if not runs:
        raise RunStopped(f"no run of config {config.name!r} to compare")
    current = runs[0]
    failure = failure_of(current)
    mode = against or config.regression.baseline
    if mode in ("previous", "champion", "none"):
        baseline = find_baseline(config.name, mode, current, tag)
        if baseline is None and mode != "none" and failure is None:
            how = "promote one with `run.py promote RUN`" if mode == "champion" else "run it again"
            raise RunStopped(f"no {mode} run of config {config.name!r} to compare {current.name} with: {how}")
    else:
        try:
            baseline = Client().get_pipeline_run(mode)
        except KeyError:
            raise RunStopped(f"no run named {mode!r}") from None
    verdict = judge_run(
        run_record(current),
        run_record(baseline) if baseline is not None else None,
        config=config.name,
        baseline_mode=mode if mode in ("previous", "champion", "none") else f"run {mode}",
        regression=config.regression,
        statistics=config.statistics,
        failure=failure,
    )
    print(verdict.text())
    comparison = verdict.comparison
    if comparison is not None:
        folder = Path(config.output_dir) / "compare"
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{current.name}__vs__{comparison.baseline}"
        for suffix, content in (
            ("html", verdict.html()),
            ("csv", comparison.csv()),
            ("json", comparison.json()),
        ):
            (folder / f"{stem}.{suffix}").write_text(content, encoding="utf-8")
        print(f"(written: {folder / stem}.html, .csv, .json)")
    return verdict.exit_code


def init_command(file: str | None) -> int:
    """Write a starter config (named after its file, runnable from any folder) and say what to run next."""
    from ragbench.config.starter import write_starter

    path = Path(file or "ragbench.yaml")
    try:
        write_starter(path)
    except (ValueError, FileExistsError) as error:
        raise RunStopped(str(error)) from None
    print(f"wrote {path}: try `python run.py --config {path} --dry-run`, then without --dry-run")
    return 0


def promote_command(run_name: str | None, config: BenchmarkConfig | None) -> int:
    """Mark a run as its config's champion: a tag exclusive per config, so every config keeps one. Only a
    completed benchmark run (never a testset run, which has no metrics to be a baseline with) of the config
    named by `--config`, when one is given."""
    from zenml import Tag, add_tags
    from zenml.client import Client

    from ragbench.runs.compare import champion_tag
    from steps.history import config_name_of

    if not run_name:
        raise RunStopped("promote needs a run name: run.py promote RUN")
    open_store()
    try:
        pipeline_run = Client().get_pipeline_run(run_name)
    except KeyError:
        raise RunStopped(f"no run named {run_name!r}") from None
    config_name = config_name_of(pipeline_run)
    if pipeline_run.pipeline is None or pipeline_run.pipeline.name != BENCHMARK_PIPELINE:
        kind = pipeline_run.pipeline.name if pipeline_run.pipeline is not None else "unknown"
        raise RunStopped(f"{run_name} is a {kind} run, not a benchmark run: only those can be champions")
    if pipeline_run.status.value != "completed" or not config_name:
        raise RunStopped(f"{run_name} is not a completed benchmark run: only those can be champions")
    if config is not None and config.name != config_name:
        raise RunStopped(
            f"{run_name} is a run of config {config_name!r}, not of {config.name!r} (--config): promote "
            "a run of the config whose champion it should be"
        )
    add_tags(tags=[Tag(name=champion_tag(config_name), exclusive=True)], run=pipeline_run.id)
    print(f"{pipeline_run.name} is the champion of config {config_name!r}")
    return 0


def _crontab(*args: str, text: str | None = None) -> str:
    """Run the user's crontab command (RAGBENCH_CRONTAB overrides which one, for tests)."""
    command = os.environ.get("RAGBENCH_CRONTAB", "crontab")
    if shutil.which(command) is None:
        raise RunStopped(
            f"{command!r} not found: install cron (Debian: apt-get install cron) to schedule runs"
        )
    done = subprocess.run([command, *args], input=text, capture_output=True, text=True, check=False)
    if args == ("-l",) and done.returncode != 0 and "no crontab" in done.stderr.lower():
        return ""
    if done.returncode != 0:
        raise RunStopped(f"{command} {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def schedule_command(args: argparse.Namespace, config: BenchmarkConfig) -> int:
    """Where a schedule lives follows the active orchestrator: ZenML registers it when the orchestrator
    schedules (ZenML's `is_schedulable`), the crontab holds it otherwise. --list and --remove look at
    both, the crontab only where a crontab command exists, so an orchestrator that schedules never
    needs cron."""
    from pipelines import schedules as zenml_schedules
    from ragbench.runs import schedule

    if not (args.list or args.remove):
        if not args.cron:
            raise RunStopped("schedule needs --cron EXPRESSION (or --list / --remove)")
        if args.overrides:
            raise RunStopped("a schedule runs the config file as it is: put the --set values into the file")
        try:
            cron = schedule.check_cron(args.cron)
        except schedule.ScheduleError as error:
            raise RunStopped(str(error)) from None
    has_crontab = shutil.which(os.environ.get("RAGBENCH_CRONTAB", "crontab")) is not None
    open_store()
    try:
        if args.list:
            lines = schedule.entries(_crontab("-l")) if has_crontab else []
            lines += [installed.line() for installed in zenml_schedules.list_schedules()]
            print("\n".join(lines) or "no ragbench schedule installed")
            return 0
        if args.remove:
            done = []
            if has_crontab:
                text, removed = schedule.without_entry(_crontab("-l"), config.name)
                if removed:
                    _crontab("-", text=text)
                    done.append(f"removed the crontab entry of {config.name!r}")
            removal = zenml_schedules.remove_schedule(config.name)
            if removal is not None:
                done.append(removal.text())
            print("\n".join(done) or f"no schedule of {config.name!r}")
            return 0
        if zenml_schedules.orchestrator_schedules():
            from pipelines.options import step_environment

            # refused now if it cannot run where its steps will: keys checked in the secrets it names
            run_preflight(config, step_environment=step_environment(config))
            installed, replaced = zenml_schedules.install_schedule(config, cron)
            if replaced is not None:
                print(replaced.text())
            print(
                f"registered the ZenML schedule {installed.name!r} ({cron}) of {config.name!r} on "
                f"{installed.orchestrator}; it runs the config as it is now: install again after editing it"
            )
            frozen = [
                label
                for label, on_client in (
                    ("knowledge base", config.knowledge_base.on_client),
                    ("eval cases", config.eval_cases.on_client),
                )
                if on_client
            ]
            if frozen:
                print(
                    f"its {' and '.join(frozen)} are files on this machine, stored with the schedule as they "
                    "are now: give them as URIs (s3://, gs://...) for scheduled runs to read them anew"
                )
            try:  # the crontab is only read for a hint here: without one (or unreadable), no hint
                in_crontab = has_crontab and schedule.without_entry(_crontab("-l"), config.name)[1]
            except RunStopped:
                in_crontab = False
            if in_crontab:
                print(f"your crontab schedules {config.name!r} too: `crontab -e` to delete that entry")
            return 0
        run_preflight(config, plan_only=True)  # a schedule of a config that cannot run is refused now
        from zenml.client import Client

        orchestrator = Client().active_stack.orchestrator.flavor
        current = _crontab("-l")
        repo = Path(__file__).resolve().parent
        config_file = Path(args.config or repo / "configs" / "default.yaml").resolve()
        log = Path(config.output_dir).resolve() / "schedule.log"
        command = schedule.benchmark_command(repo, sys.executable, config_file, log)
        line = schedule.entry_line(cron, command, config.name)
        _crontab("-", text=schedule.with_entry(current, line, config.name))
        print(f"installed in your crontab (the {orchestrator} orchestrator cannot schedule):\n{line}")
        if (other := zenml_schedules.find_schedule(config.name)) is not None:
            print(f"ZenML schedules it too ({other.line()}): `run.py schedule --remove` removes both")
        return 0
    except zenml_schedules.ZenMLScheduleError as error:
        raise RunStopped(str(error)) from None


def dashboard_command(port: int, stop: bool) -> int:
    """Start ZenML's dashboard on 127.0.0.1, past its onboarding survey, and say where a run's
    report is; or stop it."""
    from zenml.client import Client

    from ragbench.runs import dashboard

    if stop:
        dashboard.stop()
        print("stopped the ZenML dashboard; this machine's runs use the local store directly again")
        return 0
    open_store()
    url = dashboard.start(port)
    print(f"ZenML dashboard: {url}  (bound to {dashboard.HOST}; stop it with `run.py dashboard --stop`)")
    try:
        newest = Client().get_pipeline(BENCHMARK_PIPELINE).last_run
    except (KeyError, RuntimeError):
        print("no benchmark run yet: runs appear there as they happen")
        return 0
    print(
        f"newest benchmark run: {dashboard.run_url(url, str(newest.id))}\n"
        "its report: click the `results` artifact in the graph, then Visualization > report.html"
    )
    return 0


def review_command(args: argparse.Namespace, config: BenchmarkConfig) -> int:
    """Serve the review page until Ctrl-C, then publish the labels as a new `review_labels` version."""
    from ragbench.review.labels import LabelStore
    from ragbench.review.sampling import SAMPLE_ORDERS, sample_progress_sentence
    from ragbench.review.server import ReviewServer, ReviewSession
    from ragbench.runs import review

    open_store()
    labels_path = Path(args.labels or Path(config.output_dir) / "review_labels.jsonl")
    store = LabelStore(labels_path)
    if args.testset:
        run_name, items = review.candidate_items_of_run(args.run)
    else:
        run_name, items = review.answer_items_of_run(args.run, args.rubric, config.name)
    correction = config.evaluation.label_correction
    session = ReviewSession(
        items,
        store,
        title=f"review of {run_name}",
        seed=config.generation.seed,
        target_width=correction.target_width if correction is not None else 0.2,
    )
    server = ReviewServer(session, port=REVIEW_PORT if args.port is None else args.port)
    # Ctrl-C, or SIGTERM from a process manager, stops serving; then the labels are published
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"review page: {server.url}  ({len(items)} items; labels saved to {labels_path}; Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    for found in session.agreement():
        print(found.sentence())
    for order in SAMPLE_ORDERS:
        for progress in session.progress(order):
            if progress["sampled_cases"]:
                print(sample_progress_sentence(order, progress))
    if args.testset:
        exported = review.write_text(
            labels_path.with_name("testset_labels.jsonl"), review.testset_labels_jsonl(store.labels, items)
        )
        print(f"candidate labels for testset.labels: {exported}")
    published = review.publish_labels(store.labels)
    if published:
        print(
            f"labels published as the artifact {published} (evaluation.judge_alignment.labels, "
            "evaluation.label_correction.labels)"
        )
    return 0


def describe_failed_run(run_name: str, error: BaseException | None = None) -> str:
    """One message for a run that stopped: which step, its (redacted) error, and what was kept; or, when
    ZenML has no run of that name (the pipeline raised while compiling, ZenML refused the run), that it
    never started and `error`, the exception the launch raised (redacted: it may quote config values)."""
    from zenml.client import Client

    from ragbench.llm.redaction import redact

    cause = redact(f"{type(error).__name__}: {error}".strip()) if error is not None else None
    try:
        pipeline_run = Client().get_pipeline_run(run_name)
    except KeyError:
        return (
            f"run {run_name} did not start: {cause or 'ZenML has no run of that name'}. No step ran and "
            "nothing was kept; fix the cause and run the same command again."
        )
    failed = [(name, step) for name, step in pipeline_run.steps.items() if step.status.value == "failed"]
    finished = sum(step.status.value in ("completed", "cached") for step in pipeline_run.steps.values())
    reasons = [
        f"step {name} failed: {(step.exception_info and step.exception_info.message) or 'unknown error'}"
        for name, step in failed
    ]
    why = redact("; ".join(reasons)) or cause or "a step failed"
    return (
        f"run {pipeline_run.name} stopped; {why}. Kept: {finished} "
        "finished steps (cached) and every successful LLM call (LLM cache); run the same command again "
        "to resume from them."
    )


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler or a user stopping the run): mark this process's run failed, then exit at
    once. Raising instead would let whichever code happens to be running swallow the interrupt."""
    try:
        logger.warning("stopped by signal %d: marking the run failed", signum)
        mark_runs_failed(abandoned=False)
    finally:
        os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    signal.signal(signal.SIGTERM, _terminate)  # a stopped run is marked failed, not left "running"
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "init":
            return init_command(args.run_name)
        if args.command == "promote":
            named = load_config(args.config, args.overrides) if args.config else None
            return promote_command(args.run_name, named)
        if args.command == "dashboard":
            return dashboard_command(args.port or DEFAULT_PORT, args.stop)
        if args.command == "config" and args.reference:
            from ragbench.config.reference import reference_markdown

            print(reference_markdown(), end="")
            return 0
        config = load_config(args.config, args.overrides)
        if args.command == "config":
            print(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), end="")
            return 0
        if args.command == "review":
            return review_command(args, config)
        if args.command == "race":
            config = raced(config)
        if args.tag and args.command in ("run", "race", "testset", "schedule"):
            config = config.model_copy(update={"tags": [*config.tags, args.tag]})
        if args.command == "compare":
            return compare_command(config, args.against, args.last, args.tag)
        if args.command == "schedule":
            return schedule_command(args, config)
        if args.command == "train-reranker":
            if args.dry_run:
                return print_training_plan(config)
            return run_train_reranker(config, not args.no_cache)
        if args.command == "testset":
            return print_testset_plan(config) if args.dry_run else run_testset(config, not args.no_cache)
        if args.dry_run:
            return print_plan(config)
        return run_benchmark(config, use_cache=not args.no_cache)
    except USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
