"""What reranking changed, cell by cell: each retrieval metric of the ranking the reader reads against the
first stage's, paired case by case on the same cases (every case with expected sources), with the interval
and p-value of one sign-flip permutation test of the mean difference (`stats.paired_difference_test`), as
`bench/bench_trained_reranker.py` computes its gains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragbench.analysis.paired_change import PairedChange
from ragbench.analysis.uncertainty import CaseValues
from ragbench.grid.cell import CellSpec
from ragbench.retrieval.measures import first_stage
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig


class RerankGain(PairedChange):
    """One reranking cell's change on one retrieval metric: reranked minus first stage; `column` is the
    ranking the reader reads (the first stage's is prefixed)."""

    SIDES = ("first_stage", "reranked")

    cell: str  # cell id
    first_stage: float
    reranked: float

    def text(self) -> str:
        """E.g. ``MRR 0.862 -> 0.832 (-0.030 [-0.071, +0.010], p=0.16, 50 cases)``."""
        return f"{self.label} {self.change_text()}"


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
            if gain := RerankGain.between(metric, first, reranked, settings, cell=cell.id):
                gains.append(gain)
    return gains
