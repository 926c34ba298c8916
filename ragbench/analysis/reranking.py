"""What reranking changed, cell by cell: each retrieval metric of the ranking the reader reads against the
first stage's, paired case by case on the same cases (every case with expected sources), with the interval
and p-value of one sign-flip permutation test of the mean difference (`stats.paired_difference_test`), as
`bench/bench_trained_reranker.py` computes its gains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.stats import StatisticsConfig, paired_difference_test
from ragbench.analysis.uncertainty import CaseValues
from ragbench.grid.cell import CellSpec
from ragbench.retrieval.measures import first_stage
from ragbench.scoring.metrics import MetricInfo


class RerankGain(BaseModel):
    """One reranking cell's change on one retrieval metric: reranked minus first stage, over `cases`."""

    cell: str  # cell id
    column: str  # the metric's column for the ranking the reader reads (the first stage's is prefixed)
    label: str
    higher_is_better: bool
    first_stage: float
    reranked: float
    difference: float
    low: float
    high: float
    p_value: float
    cases: int

    def text(self) -> str:
        """E.g. ``MRR 0.862 -> 0.832 (-0.030 [-0.071, +0.010], p=0.16, 50 cases)``."""
        return (
            f"{self.label} {self.first_stage:.3f} -> {self.reranked:.3f} ({self.difference:+.3f} "
            f"[{self.low:+.3f}, {self.high:+.3f}], p={self.p_value:.3g}, {self.cases} cases)"
        )


def rerank_gains(
    cells: Sequence[CellSpec],
    case_values: Mapping[str, CaseValues],
    metrics: Sequence[MetricInfo],
    settings: StatisticsConfig,
) -> list[RerankGain]:
    """For every cell that reranks and every metric of `metrics` it has at both rankings (a first stage's
    own column has no counterpart and is passed over), the paired difference on the cases both scored."""
    gains = []
    for cell in (cell for cell in cells if cell.reranker is not None):
        values = case_values.get(cell.id, {})
        for metric in metrics:
            reranked, first = values.get(metric.column), values.get(first_stage(metric.column))
            if not reranked or not first:
                continue
            cases = [case for case in reranked if case in first]
            before, after = [first[case] for case in cases], [reranked[case] for case in cases]
            difference, low, high, p_value = paired_difference_test(
                before,
                after,
                seed=settings.seed,
                resamples=settings.resamples,
                confidence=settings.confidence,
            )
            gains.append(
                RerankGain(
                    cell=cell.id,
                    column=metric.column,
                    label=metric.label,
                    higher_is_better=metric.higher_is_better,
                    first_stage=round(sum(before) / len(cases), 4),
                    reranked=round(sum(after) / len(cases), 4),
                    difference=round(difference, 4),
                    low=round(low, 4),
                    high=round(high, 4),
                    p_value=p_value,
                    cases=len(cases),
                )
            )
    return gains
