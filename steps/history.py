"""A config's runs in the ZenML store: which run is judged, which is its baseline, and what compare
needs of each. Shared by the gate step and `run.py compare`, so both pick the same runs."""

from __future__ import annotations

import logging
from typing import Any

from ragbench.runs.compare import champion_tag, config_tag
from ragbench.runs.names import BENCHMARK_PIPELINE, RESULTS_STEP
from ragbench.runs.record import RunRecord, is_baseline
from ragbench.store import given_store

logger = logging.getLogger("ragbench")


def config_runs(config_name: str, tag: str | None = None, last: int = 50) -> list[Any]:
    """This config's runs, newest first, whatever their status (a failed newest run is judged too)."""
    tags = [f"equals:{config_tag(config_name)}", *([f"equals:{tag}"] if tag else [])]
    return given_store().runs(BENCHMARK_PIPELINE, tags, size=last)


def find_baseline(config_name: str, mode: str, current: Any, tag: str | None = None) -> Any | None:
    """`previous`: the newest run of the config created before `current` that passed its gate or holds the
    config's champion tag (`ragbench.runs.record.is_baseline`); `champion`: the run promoted for this config;
    `none`: no baseline."""
    if mode == "none":
        return None
    champion = champion_tag(config_name)
    if mode == "champion":
        champions = given_store().runs(None, [f"equals:{champion}"], size=1)
        return champions[0] if champions else None
    earlier = (
        run
        for run in config_runs(config_name, tag)
        if run.id != current.id and run.created <= current.created
    )
    return next(
        (
            run
            for run in earlier
            if is_baseline(
                run.status.value, run.run_metadata, champion=any(t.name == champion for t in run.tags)
            )
        ),
        None,
    )


def run_record(pipeline_run: Any) -> RunRecord:
    return RunRecord.from_metadata(
        pipeline_run.name, str(pipeline_run.created), pipeline_run.run_metadata, run_case_values(pipeline_run)
    )


def run_case_values(pipeline_run: Any) -> dict:
    """The per-case values a run's results table kept; empty for runs made before it kept them, or whose
    table this version cannot load (its type lived at another import path then): the comparison then
    falls back to the intervals in the run's metadata, and says so in each row's rule."""
    table = results_table(pipeline_run, "compared by intervals")
    return table.case_values if table is not None else {}


def results_table(pipeline_run: Any, otherwise: str) -> Any | None:
    """The run's results table, or None when it has none (it failed before) or this version cannot load
    it (its type lived at another import path then: logged with what is done `otherwise`)."""
    try:
        return pipeline_run.steps[RESULTS_STEP].outputs["results"][0].load()
    except (KeyError, IndexError):
        return None
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        logger.warning(
            "per-case values of run %s are unreadable here (%s): %s", pipeline_run.name, error, otherwise
        )
        return None


def latest_results(config_name: str, last: int = 10) -> tuple[str, Any] | None:
    """(run name, results table) of the config's newest run among its `last` whose results table loads:
    the pilot the dry run plans what the next run can detect from. None when there is none."""
    for pipeline_run in config_runs(config_name, last=last):
        if (table := results_table(pipeline_run, "not planned from")) is not None:
            return pipeline_run.name, table
    return None


def config_name_of(pipeline_run: Any) -> str | None:
    """The `name` of the config a benchmark run was started with (its pipeline parameter)."""
    config = (pipeline_run.config.parameters or {}).get("config")
    return config.get("name") if isinstance(config, dict) else None


def failure_of(pipeline_run: Any) -> str | None:
    """Why a run did not finish: its failing step and error, or its status; None for a completed run."""
    status = pipeline_run.status.value
    if status == "completed":
        return None
    failed = [
        f"step {name}: {(step.exception_info and step.exception_info.message) or 'unknown error'}"
        for name, step in pipeline_run.steps.items()
        if step.status.value == "failed"
    ]
    return f"status {status}" + (f" ({'; '.join(failed)})" if failed else "")
