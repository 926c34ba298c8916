"""Starting a pipeline from the command line: the store opened, every check before the run, a run name
known in advance, the finished run read back from the store, and runs left "running" marked failed."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cli.command import RunStopped
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import PreflightError
from ragbench.runs.names import BENCHMARK_PIPELINE, TESTSET_PIPELINE, TRAIN_RERANKER_PIPELINE

# Every pipeline `launch` starts (the raced benchmark is registered under the benchmark's name): an
# interrupted run of any of them is marked failed.
PIPELINES = (BENCHMARK_PIPELINE, TESTSET_PIPELINE, TRAIN_RERANKER_PIPELINE)
logger = logging.getLogger("ragbench")


def open_store() -> None:
    """Create or migrate the ZenML store under a lock (two runs starting at once on a new store would
    otherwise both try to create its tables, and one would fail), and give it to the core."""
    from filelock import FileLock
    from zenml.client import Client
    from zenml.utils.io_utils import get_global_config_directory

    from ragbench.store import use_store
    from steps.store import ZenMLStore

    Path(get_global_config_directory()).mkdir(parents=True, exist_ok=True)
    with FileLock(Path(get_global_config_directory()) / ".ragbench-store.lock"):
        Client().zen_store  # noqa: B018 - touching the store is what initialises it
    use_store(ZenMLStore())


class _StoreOpenedOnUse:
    """The ZenML store, opened (`open_store`, which gives it to the core in this one's place) the first
    time the core asks it anything: a config that reads nothing stored opens no store."""

    def __getattr__(self, name: str) -> Any:
        from ragbench.store import given_store

        open_store()
        return getattr(given_store(), name)


def give_store_on_use() -> None:
    """Give the core a store that ZenML opens only when it is first asked (`_StoreOpenedOnUse`), unless it
    has one already (a real run opened the store before it plans: its steps keep that one)."""
    from ragbench.store import StoreNotGiven, given_store, use_store

    try:
        given_store()
    except StoreNotGiven:
        use_store(_StoreOpenedOnUse())


def check_output_dir(config: BenchmarkConfig) -> None:
    """A report that cannot be written must fail the run before the pipeline, not after it."""
    root = Path(config.output_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=root).close()
    except OSError as error:
        raise PreflightError(f"output_dir {root} is not writable: {error}") from None


def launch(
    pipeline_name: str,
    config: BenchmarkConfig,
    use_cache: bool,
    preflight: Callable[..., Mapping[str, Any] | None],
    tags: list[str],
    function: str | None = None,
) -> Any:
    """One way to start every pipeline: every check before the run (`preflight` with the environment the
    steps will see, the output folder), a run name known in advance, and the finished run; a run that
    stops, or never starts, ends in one message naming it. `function`: the pipeline function, when it is not
    named as its pipeline (the raced run is registered under the benchmark's name). `preflight` returns
    the pipeline's parameters besides `config` (the benchmark's plan), or None."""
    from pipelines.options import run_options, step_environment

    open_store()
    options = run_options(config)
    parameters = preflight(config, step_environment=step_environment(config)) or {}
    check_output_dir(config)

    import pipelines

    mark_runs_failed(abandoned=True)
    run_name = new_run_name(pipeline_name, config.name)
    pipeline = getattr(pipelines, function or pipeline_name)
    try:
        pipeline.with_options(enable_cache=use_cache, run_name=run_name, tags=tags, **options)(
            config=config.model_dump(mode="json"), **parameters
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


def finished_run(run_name: str, poll_s: float = 5.0) -> Any:
    """The run as the store has it once it has finished: an asynchronous orchestrator (Kubernetes...)
    returns while the run is still going, and the object `pipeline()` returns is stale either way."""
    from steps.store import ZenMLStore

    while True:
        try:
            pipeline_run = ZenMLStore().run(run_name)
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


def describe_failed_run(run_name: str, error: BaseException | None = None) -> str:
    """One message for a run that stopped: which step, its (redacted) error, and what was kept; or, when
    ZenML has no run of that name (the pipeline raised while compiling, ZenML refused the run), that it
    never started and `error`, the exception the launch raised (redacted: it may quote config values)."""
    from ragbench.llm.redaction import redact
    from steps.store import ZenMLStore

    cause = redact(f"{type(error).__name__}: {error}".strip()) if error is not None else None
    try:
        pipeline_run = ZenMLStore().run(run_name)
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


def mark_runs_failed(abandoned: bool) -> None:
    """Runs of every pipeline left "running": this process's own when it is interrupted, or
    (`abandoned`) those whose process on this machine no longer exists (killed, or the machine slept)."""
    for name in PIPELINES:
        mark_pipeline_runs_failed(name, abandoned)


def mark_runs_failed_after_exit(pid: int | None = None) -> None:
    """Start a detached process that waits for process `pid` (this one by default) to end, then marks
    its runs failed (as abandoned): for when marking them in place failed. It outlives this process and
    shares its store."""
    import subprocess
    import sys

    pid = os.getpid() if pid is None else pid
    repo = str(Path(__file__).resolve().parents[1])
    subprocess.Popen(
        [sys.executable, "-c", f"import cli.launch; cli.launch.mark_runs_failed_once_ended({pid})"],
        env=os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))},
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # not killed with this process's group
    )


def mark_runs_failed_once_ended(pid: int, wait_seconds: float = 600) -> None:
    """The helper `mark_runs_failed_after_exit` starts: wait (bounded) for `pid` to end, then mark runs
    whose process is gone failed."""
    deadline = time.monotonic() + wait_seconds
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    mark_runs_failed(abandoned=True)


def mark_pipeline_runs_failed(pipeline_name: str, abandoned: bool) -> None:
    """`mark_runs_failed` for one pipeline: only runs this machine's orchestrator started are looked at."""
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
