"""The registry of a run's metrics: the retrieval metrics, every rubric's criteria, every suite.

The results table, intervals, paired tests, compare, the gate, the report and the dry run all read the
metrics from here, so a rubric or suite, built-in or a user's, is a metric everywhere once declared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragbench.keyword_tests import Suite
from ragbench.metrics import LATENCY, MetricInfo, metric_key, retrieval_metrics
from ragbench.rubrics import Rubric


@dataclass(frozen=True)
class Scoring:
    """What a run scores answers with, and the metrics that makes."""

    rubrics: tuple[Rubric, ...]
    suites: tuple[Suite, ...]
    metrics_k: int

    def __post_init__(self) -> None:
        columns = [metric.column for metric in self.metrics()] + [LATENCY.column]
        if twice := sorted({column for column in columns if columns.count(column) > 1}):
            raise ValueError(f"metric name(s) {', '.join(twice)} used twice: every metric needs its own name")

    def metrics(self) -> list[MetricInfo]:
        """Every metric, in display order: the judge's, the suites', then retrieval."""
        judged = [criterion.metric for rubric in self.rubrics for criterion in rubric.criteria]
        return [*judged, *(suite.metric for suite in self.suites), *retrieval_metrics(self.metrics_k)]

    def headline(self) -> list[MetricInfo]:
        """The scores a configuration is chosen by, gated and charted, in display order."""
        side = {c.column for rubric in self.rubrics for c in rubric.criteria if not c.headline}
        side |= {suite.column for suite in self.suites if not suite.headline}
        return [metric for metric in self.metrics() if metric.column not in side]

    def tracked_keys(self) -> list[str]:
        """The run-metadata keys the gate compares, which a regression threshold may name."""
        return [metric_key(metric.column) for metric in [*self.headline(), LATENCY]]


def present(metrics: Sequence[MetricInfo], rows: Sequence[dict]) -> list[MetricInfo]:
    """The metrics some row has a value for: what a run actually computed."""
    computed = {column for row in rows for column, value in row.items() if value is not None}
    return [metric for metric in metrics if metric.column in computed]
