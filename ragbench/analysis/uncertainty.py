"""How far a run's numbers can be trusted, computed from per-case values, never from other means.

Each metric of each cell gets an interval; on each headline metric the best cell is tested, paired
case by case, against every other cell (Holm-corrected), which names the cells tied with the best; and
from the paired differences of the top two cells comes an estimate of how many cases would tell them
apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.stats import (
    PairedComparison,
    StatisticsConfig,
    cases_needed,
    compare_to_best,
    mean_interval,
    tie_set,
)
from ragbench.scoring.metrics import MetricInfo

TEST_NAMES: dict[str, str] = {
    "paired_permutation": "paired permutation test",
    "wilcoxon": "Wilcoxon signed-rank test",
}

# column -> case id -> value, for one cell
CaseValues = dict[str, dict[str, float]]


def with_intervals(row: dict, values: CaseValues, settings: StatisticsConfig) -> dict:
    """`<column>_low` and `<column>_high` beside every column that has per-case values."""
    out = dict(row)
    for column, by_case in values.items():
        interval = mean_interval(
            list(by_case.values()),
            resamples=settings.resamples,
            seed=settings.seed,
            confidence=settings.confidence,
        )
        if interval is not None:
            out[f"{column}_low"], out[f"{column}_high"] = round(interval.low, 4), round(interval.high, 4)
    return out


class MetricVerdict(BaseModel):
    """The best cell on one headline metric against every other cell, paired on the cases both scored."""

    column: str
    label: str
    higher_is_better: bool
    best: str  # cell id
    comparisons: list[PairedComparison]  # candidate and reference are cell ids
    tied: list[str]  # the best and every cell not told apart from it (cell ids)
    runner_up: str | None
    cases_needed: int | None  # to separate best and runner-up at their observed difference, 80% power
    names: dict[str, str] = {}  # cell id -> its label, for people

    def name(self, cell: str) -> str:
        return self.names.get(cell, cell)

    @property
    def runner_up_comparison(self) -> PairedComparison | None:
        return next((c for c in self.comparisons if c.candidate == self.runner_up), None)

    def sentence(self) -> str:
        """The decision in plain words, e.g. for the terminal summary. Cells with the same value on
        every case (e.g. two rerank settings sharing one retrieval) are named apart: they are not a
        runner-up, there is nothing to tell apart."""
        best_name = self.name(self.best)
        if not self.comparisons:
            return f"{self.label}: only {best_name} has a value."
        same = [c.candidate for c in self.comparisons if c.difference == 0]
        best = best_name + (f" (and {len(same)} cell(s) with the same value on every case)" if same else "")
        versus = self.runner_up_comparison
        runner_up = self.name(self.runner_up) if self.runner_up else None
        if versus is None:
            n = self.comparisons[0].n
            return (
                f"{self.label}: {best_name} and {len(same)} other cell(s) score the same on all {n} case(s)."
            )
        if versus.verdict != "tied":
            return (
                f"{self.label}: {best} is better than every other cell (runner-up {runner_up}: "
                f"{versus.difference:+.3g}, p={versus.p_holm:.3g} after Holm, {versus.n} case(s))."
            )
        tied = [self.name(c.candidate) for c in self.comparisons if c.verdict == "tied" and c.difference != 0]
        names = ", ".join(tied) if len(tied) <= 3 else "listed in the report"
        text = f"{self.label}: {best} tied with {len(tied)} other cell(s) ({names}) on {versus.n} case(s)"
        if self.cases_needed is None:
            return text + "."
        return (
            f"{text}; about {self.cases_needed} cases would tell it from {runner_up} "
            f"({versus.difference:+.3g}) if the difference is real."
        )


def compare_cells(
    headline: Sequence[MetricInfo],
    values_by_cell: Mapping[str, CaseValues],
    settings: StatisticsConfig,
    names: Mapping[str, str] | None = None,
) -> list[MetricVerdict]:
    """One verdict per headline metric that at least two cells have values for; cells by id (`names`:
    their labels, for people)."""
    verdicts = []
    for metric in headline:
        values = {cell: v[metric.column] for cell, v in values_by_cell.items() if v.get(metric.column)}
        compared = compare_to_best(
            values,
            higher_is_better=metric.higher_is_better,
            test=metric.paired_test,
            alpha=settings.alpha,
            seed=settings.seed,
            resamples=settings.resamples,
        )
        if compared is None:
            continue
        best, comparisons = compared
        runner_up = _closest(comparisons, metric.higher_is_better)
        needed = None
        if runner_up is not None:
            shared = [case for case in values[best] if case in values[runner_up.candidate]]
            differences = [values[runner_up.candidate][c] - values[best][c] for c in shared]
            needed = cases_needed(differences, alpha=settings.alpha)
        verdicts.append(
            MetricVerdict(
                column=metric.column,
                label=metric.label,
                higher_is_better=metric.higher_is_better,
                best=best,
                comparisons=comparisons,
                tied=tie_set(best, comparisons),
                runner_up=runner_up.candidate if runner_up else None,
                cases_needed=needed,
                names=dict(names or {}),
            )
        )
    return verdicts


def _closest(comparisons: Sequence[PairedComparison], higher_is_better: bool) -> PairedComparison | None:
    """The runner-up: the other cell whose paired difference from the best is smallest but not zero."""
    differing = [c for c in comparisons if c.difference != 0]
    if not differing:
        return None
    return min(differing, key=lambda c: (-c.difference if higher_is_better else c.difference, c.candidate))
