"""One metric's paired change between two rankings of the same cases (a cell's first stage and its reranked
ranking; a rewriting cell and its twin searching as asked): the two means, the mean difference, and the
interval and p-value of one sign-flip permutation test (`stats.paired_difference_test`). The reranking and
rewriting sections are its two uses; each names its two sides (`SIDES`) and adds what it is keyed by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import BaseModel

from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import StatisticsConfig, paired_difference_test


class PairedChange(BaseModel):
    """`after` minus `before` on one metric over `cases`: a subclass stores the two means under the field
    names of `SIDES` (its artifacts' schema), everything else is shared."""

    SIDES: ClassVar[tuple[str, str]]  # the field names of the before and after means

    column: str
    label: str
    higher_is_better: bool
    difference: float
    low: float
    high: float
    p_value: float
    cases: int

    @classmethod
    def between(
        cls,
        metric: MetricInfo,
        before: Mapping[str, float],
        after: Mapping[str, float],
        settings: StatisticsConfig,
        **keys: str,
    ) -> Self | None:
        """The change on the cases both sides scored (case id -> value), or None when they share none."""
        cases = [case for case in after if case in before]
        if not cases:
            return None
        first, second = [before[case] for case in cases], [after[case] for case in cases]
        difference, low, high, p_value = paired_difference_test(
            first, second, seed=settings.seed, resamples=settings.resamples, confidence=settings.confidence
        )
        sides = zip(cls.SIDES, (first, second), strict=True)
        means = {side: round(sum(values) / len(cases), 4) for side, values in sides}
        return cls(
            column=metric.column,
            label=metric.label,
            higher_is_better=metric.higher_is_better,
            difference=round(difference, 4),
            low=round(low, 4),
            high=round(high, 4),
            p_value=p_value,
            cases=len(cases),
            **means,
            **keys,
        )

    @property
    def means(self) -> tuple[float, float]:
        return getattr(self, self.SIDES[0]), getattr(self, self.SIDES[1])

    @property
    def verdict(self) -> str:
        """Better or worse when the interval excludes zero, else not told apart."""
        if self.low <= 0 <= self.high:
            return "not told apart"
        return "better" if (self.difference > 0) == self.higher_is_better else "worse"

    def _interval(self) -> str:
        return interval_text(self.low, self.high, digits=3, signed=True)

    def change_text(self) -> str:
        """E.g. ``0.862 -> 0.832 (-0.030 [-0.071, +0.010], p=0.16, 50 cases)``."""
        before, after = self.means
        return (
            f"{before:.3f} -> {after:.3f} ({self.difference:+.3f} {self._interval()}, "
            f"p={self.p_value:.3g}, {self.cases} cases)"
        )

    def table_columns(self, before_name: str, after_name: str, confidence: float) -> dict[str, str]:
        """The report table's shared columns, the two sides under the section's names."""
        before, after = self.means
        return {
            "metric": self.label,
            before_name: f"{before:.3f}",
            after_name: f"{after:.3f}",
            "difference": f"{self.difference:+.3f}",
            f"{confidence:.0%} interval": self._interval(),
            "p": f"{self.p_value:.3g}",
            f"{after_name} is": self.verdict,
        }
