"""The pipeline's last step: judge this run against its baseline, store the verdict, alert; and the
failure hook that alerts when a run breaks before reaching it. Either way a broken night is never
silent, whoever started the run (run.py, Python, a ZenML schedule on any orchestrator)."""

from __future__ import annotations

import logging
from typing import Annotated

from zenml import add_tags, get_step_context, log_metadata, step
from zenml.client import Client

from materializers.gate_result import GateResultMaterializer
from ragbench.analysis.results import ResultsTable
from ragbench.llm.redaction import redact
from ragbench.runs.compare import config_tag
from ragbench.runs.gate import GateResult, RegressionConfig, judge_run
from ragbench.runs.record import GATE_STATUS, RunRecord, run_metadata
from ragbench.stats.inference import StatisticsConfig
from steps.history import config_name_of, find_baseline, run_record
from steps.store import this_run

logger = logging.getLogger("ragbench")


@step(enable_cache=False, output_materializers=GateResultMaterializer)
def regression_gate(
    results: ResultsTable, config_name: str, regression: RegressionConfig, statistics: StatisticsConfig
) -> Annotated[GateResult, "gate"]:
    """Never cached: the baseline is whatever the store holds when this run ends."""
    pipeline_run = this_run()
    baseline = find_baseline(config_name, regression.baseline, pipeline_run)
    current = RunRecord.from_metadata(
        pipeline_run.name, str(pipeline_run.created), run_metadata(results), results.case_values
    )
    verdict = judge_run(
        current,
        run_record(baseline) if baseline is not None else None,
        config=config_name,
        baseline_mode=regression.baseline,
        regression=regression,
        statistics=statistics,
    )
    log_metadata(verdict.metadata(), run_id_name_or_prefix=pipeline_run.id)
    if not verdict.passed:
        post_alert(verdict.text())
    return verdict


def alert_failed_run(exception: BaseException) -> None:
    """`on_failure` hook of the pipeline: tag the run with its config (a run that fails early has no
    tag yet, and compare must find it), record the failure and alert."""
    context = get_step_context()
    pipeline_run = context.pipeline_run
    config_name = config_name_of(pipeline_run)
    reason = redact(f"step {context.step_run.name} failed: {type(exception).__name__}: {exception}")
    if config_name is not None:
        add_tags(tags=[config_tag(config_name)], run=pipeline_run.id)
    log_metadata(
        {GATE_STATUS: "failed", "gate_passed": False, "gate_reasons": [reason]},
        run_id_name_or_prefix=pipeline_run.id,
    )
    post_alert(f"RAG benchmark run {pipeline_run.name} ({config_name or 'unknown config'}) failed: {reason}")


def post_alert(message: str) -> bool:
    """Through the active stack's alerter (Slack, Discord, ...) when it has one; the default stack has
    none, and then the verdict is in the run's metadata and artifacts only."""
    alerter = Client().active_stack.alerter
    if alerter is None:
        logger.info("no alerter in the active stack: the verdict is in the run's metadata and gate artifact")
        return False
    try:
        return bool(alerter.post(redact(message)))
    except Exception as error:  # an alerting outage must not hide the verdict it was carrying
        logger.warning("the %s alerter failed: %s", alerter.name, redact(str(error)))
        return False
