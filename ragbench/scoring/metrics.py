"""What a metric is to everything that reads one (table, intervals, paired tests, compare, gate, report),
and the metrics that are not the judge's or a suite's: retrieval and latency.

Light on purpose (pydantic, the stats types and the retrieval measures' declaration only): rubrics and
suites declare their metrics with it, and `ragbench.scoring.registry` gathers them into the run's
registry.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragbench.retrieval.measures import RETRIEVAL_MEASURES, binary_column, first_stage, ranking_measures
from ragbench.stats.inference import StatisticsConfig, Test
from ragbench.stats.intervals import Interval, mean_interval


class MetricInfo(BaseModel):
    """A metric a configuration is chosen by: its column, its name, which way is better, and how two
    cells are compared on it, case by case: the sign-flip permutation test of the mean difference for
    every metric, 1-5 judge scores included, since the mean is what the table shows and the interval
    beside a verdict is that test inverted (ragbench.stats.permutation)."""

    column: str
    label: str
    higher_is_better: bool
    paired_test: Test = "paired_permutation"
    # the lowest and highest value a case can have (None: unbounded, e.g. latency): what a mean's interval
    # and a paired difference's are guaranteed from (ragbench.stats.intervals)
    bounds: tuple[float, float] | None = None
    binary: bool = False  # every case value is 0 or 1 (a rate): its mean's interval is exact

    def interval(self, values: Sequence[float], settings: StatisticsConfig) -> Interval | None:
        """The interval of the mean of this metric's case values, by its scale."""
        return mean_interval(
            values,
            resamples=settings.resamples,
            seed=settings.seed,
            confidence=settings.confidence,
            bounds=self.bounds,
            binary=self.binary,
        )


UNIT = (0.0, 1.0)  # the scale of a rate and of every retrieval metric


# Tracked across runs beside the headline scores (the gate reads it).
LATENCY = MetricInfo(column="latency_p95_s", label="p95 latency (s)", higher_is_better=False)


def retrieval_metrics(metrics_k: int) -> list[MetricInfo]:
    """The retrieval scores a run is chosen by (every retrieval cell computes them over all cases), from
    their declaration in `ragbench.retrieval.measures`."""
    return [
        MetricInfo(
            column=measure.column_at(metrics_k),
            label=measure.label_at(metrics_k),
            higher_is_better=measure.higher_is_better,
            bounds=UNIT,
            binary=measure.binary,
        )
        for measure in RETRIEVAL_MEASURES
        if measure.headline
    ]


def ranking_metrics(metrics_k: int) -> list[MetricInfo]:
    """Every retrieval metric at both rankings a cell is measured at, as results columns with intervals:
    the ranking the reader reads under the plain names (the headline ones among them are
    `retrieval_metrics`), then the first stage's (`ragbench.retrieval.measures.first_stage`)."""
    measures = ranking_measures(metrics_k)
    plain = [(column, label, higher, column) for column, label, higher in measures]
    first = [(first_stage(c), f"{label} (first stage)", higher, c) for c, label, higher in measures]
    return [
        MetricInfo(column=name, label=text, higher_is_better=up, bounds=UNIT, binary=binary_column(measured))
        for name, text, up, measured in [*plain, *first]
    ]


def metric_key(column: str) -> str:
    """A results-table column as a run-metadata key (ZenML's filter syntax splits on ':')."""
    return column.replace("@", "_at_").replace(":", "_")
