"""Each axis's effect: every cell's score grouped by the value of one varying axis (one series per value of
another), the numbers the report's effect plots draw."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import fmean
from typing import TypeVar

from ragbench.inputs.tables import is_number
from ragbench.retrieval.measures import is_retrieval_column


def ordered_values(rows: list[dict], axis: str) -> list[object]:
    """The values of an axis: numbers ascending, anything else in grid order."""
    values = list(dict.fromkeys(row.get(axis) for row in rows))
    return sorted(values) if all(is_number(v) for v in values) else values


@dataclass(frozen=True)
class AxisPoint:
    """One point of an effect plot: the mean of a score over the cells sharing an axis value (and a
    series value), how many cells and cases it rests on and the span of those cells' own intervals."""

    mean: float
    cells: int
    cases: tuple[int, int] | None = None  # fewest and most cases behind one cell; None: unknown
    span: tuple[float, float] | None = None  # lowest `_low` to highest `_high` of the cells

    def label(self) -> str:
        """``n=3`` for one cell, ``n=3, 2 cells`` (``n=3–5`` when the cells differ) for several."""
        parts = []
        if self.cases is not None:
            fewest, most = self.cases
            parts.append(f"n={fewest}" if fewest == most else f"n={fewest}–{most}")
        if self.cells > 1 or not parts:
            parts.append(f"{self.cells} cell" + ("s" if self.cells > 1 else ""))
        return ", ".join(parts)


def axis_points(
    rows: list[dict], axis: str, column: str, group_axis: str | None
) -> tuple[list[object], dict[object, list[AxisPoint | None]]]:
    """Per value of `axis`, one series per value of `group_axis` (None: one series), the mean of
    `column` over the cells with a value there and what it rests on (None: no such cell)."""
    x_values = ordered_values(rows, axis)
    groups = ordered_values(rows, group_axis) if group_axis is not None else [None]
    series: dict[object, list[AxisPoint | None]] = {}
    for group in groups:
        points: list[AxisPoint | None] = []
        for x in x_values:
            cells = [
                (number, row)
                for row in rows
                if row.get(axis) == x
                and (group_axis is None or row.get(group_axis) == group)
                and (number := numeric(row.get(column))) is not None
            ]
            if not cells:
                points.append(None)
                continue
            counts = [case_count(row, column) for _, row in cells]
            spans = [row_interval(row, column) for _, row in cells]
            known = [span for span in spans if span is not None]
            points.append(
                AxisPoint(
                    mean=fmean(number for number, _ in cells),
                    cells=len(cells),
                    cases=None if None in counts else (min(counts), max(counts)),
                    span=(min(s[0] for s in known), max(s[1] for s in known)) if known else None,
                )
            )
        series[group] = points
    return x_values, series


def axis_means(
    rows: list[dict], axis: str, column: str, group_axis: str | None
) -> tuple[list[object], dict[object, list[float | None]]]:
    """Mean of `column` per value of `axis`, one series per value of `group_axis` (None: one series).

    Returns the axis values and, per group value, the mean at each axis value (None: no cell there).
    """
    x_values, series = axis_points(rows, axis, column, group_axis)
    return x_values, {
        group: [None if point is None else point.mean for point in points] for group, points in series.items()
    }


def per_series(series: dict[str, list[AxisPoint | None]], part: Callable[[AxisPoint], T]) -> dict:
    """One part of every point (its mean, span or label), None where the series has no point."""
    return {name: [None if p is None else part(p) for p in points] for name, points in series.items()}


T = TypeVar("T")


def numeric(value: object) -> float | None:
    """A metric as a number; rows may hold CSV strings, and None, blanks and NaN all mean "no value"."""
    if is_number(value):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def row_interval(row: dict, column: str) -> tuple[float, float] | None:
    low, high = numeric(row.get(f"{column}_low")), numeric(row.get(f"{column}_high"))
    return None if low is None or high is None else (low, high)


def case_count(row: dict, column: str) -> int | None:
    """How many cases a cell's score in `column` rests on: `<column>_cases`, or for a retrieval metric
    the cell's `retrieval_cases`; None when the row does not say."""
    source = f"{column}_cases"
    if source not in row and is_retrieval_column(column):
        source = "retrieval_cases"
    count = numeric(row.get(source))
    return None if count is None else int(count)
