"""What query rewriting changed: each cell that rewrites its queries against its twin that searches them as
asked (the same cell with `query_rewrite` off), on each retrieval metric, paired case by case, and apart on
the follow-ups (cases with a conversation before their question) and the single questions: a rewrite that
finds the follow-ups may cost the single questions, and a difference confined to a few follow-ups is lost
in a mean over the whole set."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ragbench.analysis.paired_change import PairedChange
from ragbench.analysis.uncertainty import CaseValues
from ragbench.grid.cell import CellSpec
from ragbench.retrieval.measures import FIRST_STAGE_PREFIX
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig

FOLLOW_UPS, SINGLE_QUESTIONS, ALL_CASES = "follow-ups", "single questions", "all cases"


class RewriteGain(PairedChange):
    """One rewriting cell against its `off` twin on one retrieval metric over one group of cases."""

    SIDES = ("searched_as_asked", "rewritten")

    cell: str  # cell id
    against: str  # the twin's cell id
    cases_group: str  # FOLLOW_UPS, SINGLE_QUESTIONS or ALL_CASES (an eval set without conversations)
    searched_as_asked: float
    rewritten: float

    def text(self) -> str:
        """E.g. ``MRR on follow-ups 0.266 -> 0.515 (+0.249 [-0.006, +0.514], p=0.078, 13 cases)``."""
        return f"{self.label} on {self.cases_group} {self.change_text()}"


def rewrite_gains(
    cells: Sequence[CellSpec],
    case_values: Mapping[str, CaseValues],
    metrics: Sequence[MetricInfo],
    follow_ups: Collection[str],
    settings: StatisticsConfig,
) -> list[RewriteGain]:
    """For every cell that rewrites and has an `off` twin in the grid, every metric of `metrics` measuring
    the searched ranking (not a first stage's own column), the paired difference on the cases both cells
    scored: over the follow-ups and the single questions apart when the eval set has both, else over all."""
    by_id = {cell.id: cell for cell in cells}
    gains = []
    for cell in (cell for cell in cells if cell.query_rewrite is not None):
        twin = cell.model_copy(update={"query_rewrite": None})
        if twin.id not in by_id:
            continue
        for metric in (m for m in metrics if not m.column.startswith(FIRST_STAGE_PREFIX)):
            rewritten = case_values.get(cell.id, {}).get(metric.column, {})
            as_asked = case_values.get(twin.id, {}).get(metric.column, {})
            shared = {case: value for case, value in rewritten.items() if case in as_asked}
            groups = {
                FOLLOW_UPS: {case: value for case, value in shared.items() if case in follow_ups},
                SINGLE_QUESTIONS: {case: value for case, value in shared.items() if case not in follow_ups},
            }
            if not all(groups.values()):
                groups = {ALL_CASES: shared}
            for group, values in groups.items():
                keys = {"cell": cell.id, "against": twin.id, "cases_group": group}
                if gain := RewriteGain.between(metric, as_asked, values, settings, **keys):
                    gains.append(gain)
    return gains
