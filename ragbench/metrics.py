"""The tracked metrics: the scores a configuration is chosen by and the gate watches, in one place.

Light on purpose (pydantic and the stats types only): the config model checks regression thresholds
against this list, and the results table, run metadata and compare read it.
"""

from __future__ import annotations

from pydantic import BaseModel

from ragbench.stats import Test


class MetricInfo(BaseModel):
    """A metric a configuration is chosen by: its column, its name, which way is better, and how two
    cells are compared on it, case by case: a permutation test of the mean difference, or Wilcoxon's
    signed-rank test for ordinal 1-5 judge scores (a mean difference would treat them as evenly spaced)."""

    column: str
    label: str
    higher_is_better: bool
    paired_test: Test = "paired_permutation"


# Tracked across runs beside the headline scores (the gate reads it).
LATENCY = MetricInfo(column="latency_p95_s", label="p95 latency (s)", higher_is_better=False)


def headline_candidates(metrics_k: int) -> list[MetricInfo]:
    """Every score a run can be chosen by, in display order (a run shows those it computed)."""
    return [
        MetricInfo(
            column="correctness_0to1",
            label="correctness (0-1)",
            higher_is_better=True,
            paired_test="wilcoxon",
        ),
        MetricInfo(column="fail_good_answers", label="missing good words (rate)", higher_is_better=False),
        MetricInfo(column="fail_bad_answers", label="bad words (rate)", higher_is_better=False),
        MetricInfo(
            column="fail_declines", label="answered instead of declining (rate)", higher_is_better=False
        ),
        MetricInfo(
            column="faithfulness_1to5",
            label="faithfulness (1-5)",
            higher_is_better=True,
            paired_test="wilcoxon",
        ),
        MetricInfo(column="mrr", label="MRR", higher_is_better=True),
        MetricInfo(column=f"hit_rate@{metrics_k}", label=f"hit rate@{metrics_k}", higher_is_better=True),
    ]


def metric_key(column: str) -> str:
    """A results-table column as a run-metadata key (ZenML's filter syntax splits on ':')."""
    return column.replace("@", "_at_").replace(":", "_")


def tracked_metric_keys(metrics_k: int) -> list[str]:
    """The keys a regression threshold may name."""
    return [metric_key(metric.column) for metric in [*headline_candidates(metrics_k), LATENCY]]
