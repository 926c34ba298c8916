"""The one-page HTML report of a run: best cells, charts, scores by case type, the full table and a
per-question view.

Every value is escaped because it may come from documents, questions, answers, judges or config.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from statistics import fmean
from typing import TypeVar

from pydantic import BaseModel

from ragbench import charts
from ragbench.judge_reliability import SCALE, JudgeReliability
from ragbench.metrics import MetricInfo
from ragbench.pages import (
    document,
    format_value,
    html_section,
    is_number,
    page_header,
    rows_to_html_table,
)
from ragbench.pairwise import PairwiseResult, pairwise_html
from ragbench.uncertainty import TEST_NAMES, MetricVerdict

T = TypeVar("T")


class CasePassage(BaseModel):
    source: str
    text: str
    retrieval_rank: int | None = None


class CaseView(BaseModel):
    """One answer of one cell to one eval case, for the side-by-side view."""

    cell: str
    case_id: str
    question: str
    answer: str | None
    error: str | None = None
    passages: list[CasePassage] = []
    keyword_failures: list[str] = []
    scores: dict[str, str] = {}  # criterion -> the judge's verdict as read (``4 / 5``, ``pass``)
    judge_reasoning: str | None = None


class ReportInput(BaseModel):
    title: str
    notes: list[str] = []
    warnings: list[str] = []
    axes: list[str]
    varying_axes: list[str]
    rows: list[dict]
    headline: list[MetricInfo]
    latency_column: str | None = None
    cost_column: str | None = None
    cases: list[CaseView] = []
    keyword_failures: list[dict] = []
    weak_answers: list[dict] = []
    verdicts: list[MetricVerdict] = []
    confidence: float = 0.95
    judge_reliability: JudgeReliability | None = None
    # per (cell, case type): `label`, `case_type` and each headline score with `_low`, `_high`, `_cases`
    case_type_rows: list[dict] = []
    pairwise: list[PairwiseResult] = []


# ---------------------------------------------------------------------------------------------------
# The one-page report of a run


def _numeric(value: object) -> float | None:
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


def _label(row: dict) -> str:
    return str(row.get("label") or row.get("cell"))


def _ranked(rows: list[dict], column: str, higher_is_better: bool) -> list[list[tuple[float, dict]]]:
    """Cells with a value in `column`, grouped by equal value (ties), best group first."""
    scored = [(value, row) for row in rows if (value := _numeric(row.get(column))) is not None]
    scored.sort(key=lambda pair: -pair[0] if higher_is_better else pair[0])
    groups: list[list[tuple[float, dict]]] = []
    for value, row in scored:
        if groups and math.isclose(groups[-1][0][0], value, rel_tol=1e-9, abs_tol=1e-12):
            groups[-1].append((value, row))
        else:
            groups.append([(value, row)])
    return groups


def _first_metric_with_values(report: ReportInput) -> MetricInfo | None:
    """The metric the axis and trade-off charts show: the first headline score anyone has a value for."""
    return next((m for m in report.headline if _ranked(report.rows, m.column, m.higher_is_better)), None)


NO_SCORES = '<p class="note">No headline score has values.</p>'


def _direction(metric: MetricInfo) -> str:
    return "higher is better" if metric.higher_is_better else "lower is better"


def _cost_text(row: dict, column: str | None) -> str:
    if column is None:
        return ""
    value = _numeric(row.get(column))
    return "unknown" if value is None else format_value(value)


def _tied_labels(group: list[tuple[float, dict]]) -> str:
    tag = '<span class="tag">tied</span>' if len(group) > 1 else ""
    return "<br>".join(f"{escape(_label(row))}{tag}" for _, row in group)


def _best_section(report: ReportInput) -> str:
    """Best cell per headline score with its margin over the runner-up and what it costs.

    Tied leaders are all listed (one per line, with their own latency and cost) instead of picking
    one arbitrarily; the runner-up is then the best cell that scored differently.
    """
    extra = [c for c in (report.latency_column, report.cost_column) if c is not None]
    header = ["Headline score", "Best", "Best value", "Runner-up", "Runner-up value", "Margin"]
    header += [f"{column} of best" for column in extra]
    body = []
    for metric in report.headline:
        groups = _ranked(report.rows, metric.column, metric.higher_is_better)
        if not groups:
            continue
        best = groups[0]
        runner_up = groups[1] if len(groups) > 1 else None
        cells = [
            f"<td>{escape(metric.label)}<br><small>{_direction(metric)}</small></td>",
            f"<td>{_tied_labels(best)}</td>",
            f'<td class="number">{escape(format_value(best[0][0]))}</td>',
        ]
        if runner_up is None:
            none_left = "all tied" if len(best) > 1 else "only one cell has a value"
            cells += [f'<td colspan="3" class="note">none ({none_left})</td>']
        else:
            margin = abs(best[0][0] - runner_up[0][0])
            cells += [
                f"<td>{_tied_labels(runner_up)}</td>",
                f'<td class="number">{escape(format_value(runner_up[0][0]))}</td>',
                f'<td class="number">{escape(format_value(margin))}</td>',
            ]
        for column in extra:
            values = "<br>".join(escape(_cost_text(row, column)) for _, row in best)
            cells.append(f'<td class="number">{values}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    title = '<h2 id="best">Best configuration per headline score</h2>'
    if not body:
        return title + NO_SCORES
    head = "".join(f"<th>{escape(text)}</th>" for text in header)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'{title}<div class="scroll">{table}</div>'


def _short_value(value: object) -> str:
    """An axis value fit for a narrow column: a model path keeps only its last part."""
    if value is None:
        return "none"
    text = str(value)
    return text.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) and "/" in text else text


def _display_names(values: Sequence[object]) -> dict[object, str]:
    """Short names for axis values, falling back to the full text where two short names would clash."""
    short = {value: _short_value(value) for value in values}
    clashing = {name for name in short.values() if list(short.values()).count(name) > 1}
    return {
        value: ("none" if value is None else str(value)) if name in clashing else name
        for value, name in short.items()
    }


def _headline_section(report: ReportInput) -> str:
    """The compact table: one line per cell, the varying axes (short names) and the headline scores."""
    best_rows = {
        metric.column: {id(row) for _, row in groups[0]}
        for metric in report.headline
        if (groups := _ranked(report.rows, metric.column, metric.higher_is_better))
    }
    names = {
        axis: _display_names(list(dict.fromkeys(r.get(axis) for r in report.rows)))
        for axis in report.varying_axes
    }
    # The varying axes name each cell (the label would repeat them and push the scores off-screen).
    axes = report.varying_axes or ["label"]
    header = [f"<th>{escape(axis)}</th>" for axis in axes]
    for metric in report.headline:
        arrow = "\u2191" if metric.higher_is_better else "\u2193"
        header.append(f'<th title="{_direction(metric)}">{escape(metric.label)} {arrow}</th>')
    extra = [c for c in (report.latency_column, report.cost_column) if c is not None]
    header += [f'<th title="lower is better">{escape(column)} \u2193</th>' for column in extra]
    body = []
    for row in report.rows:
        cached = (
            '<span class="tag" title="served from ZenML\'s cache">cached</span>'
            if row.get("reused") is True
            else ""
        )
        cells = []
        for axis in axes:
            value = row.get(axis) if axis != "label" else _label(row)
            full = "none" if value is None else str(value)
            shown = names[axis][value] if axis in names else full
            title = f' title="{escape(full)}"' if shown != full else ""
            cells.append(f"<td{title}>{escape(shown)}</td>")
        cells[0] = cells[0].replace("</td>", f"{cached}</td>", 1)
        for metric in report.headline:
            css = "number best" if id(row) in best_rows.get(metric.column, ()) else "number"
            cells.append(f'<td class="{css}">{_value_with_interval(row, metric.column)}</td>')
        cells += [f'<td class="number">{escape(_cost_text(row, column))}</td>' for column in extra]
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = f"<table><thead><tr>{''.join(header)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    legend = (
        'Best value of each score highlighted. <span class="tag">cached</span> = served from ZenML\'s '
        "cache (computed by an earlier run with identical inputs). Click a column header to sort; full "
        'model names are in the <a href="#full">full table</a>.'
    )
    return (
        f'<h2 id="headline">Headline scores</h2><div class="scroll sortable">{table}</div>'
        f'<p class="note">{legend}</p>'
    )


def _bar_chart_section(report: ReportInput) -> str:
    """One panel of bars per headline score; a score no cell has, or every cell scores 0 on, is left
    out with a note saying so (its bars would all be empty)."""
    labels = [_label(row) for row in report.rows]
    shown = [m for m in report.headline if not _all_missing(report.rows, m.column)]
    missing = [m for m in report.headline if m not in shown]
    zero = [m for m in shown if _all_zero(report.rows, m.column)]
    shown = [m for m in shown if m not in zero]
    title = '<h2 id="charts">Headline scores per configuration</h2>'
    if not shown and not zero:
        return title + NO_SCORES
    notes = []
    if zero:
        names = ", ".join(escape(m.label) for m in zero)
        notes.append(f"{names}: every cell scores 0, so no bars.")
    if missing:
        names = ", ".join(escape(m.label) for m in missing)
        notes.append(f"{names}: no cell has a value, so no bars.")
    left_out = "".join(f'<p class="note">{text}</p>' for text in notes)
    if not shown:
        return title + left_out
    chart = charts.bar_panels(
        labels,
        [(m.label, [_numeric(row.get(m.column)) for row in report.rows], m.higher_is_better) for m in shown],
        chart_id="bars",
        intervals=[[_interval(row, m.column) for row in report.rows] for m in shown],
        cases=[[_case_count(row, m.column) for row in report.rows] for m in shown],
    )
    note = (
        f'<p class="note">Whiskers: {report.confidence:.0%} bootstrap interval over the cases behind each '
        "bar; n: how many cases that is (in the panel's title when every bar has the same n). A bar "
        "resting on few cases says little. Bars whose whiskers overlap may not differ; the next section "
        "tests it case by case.</p>"
    )
    return f'{title}<div class="charts">{chart}</div>{note}{left_out}'


def _all_missing(rows: list[dict], column: str) -> bool:
    return all(_numeric(row.get(column)) is None for row in rows)


def _all_zero(rows: list[dict], column: str) -> bool:
    """Some cell has a value in `column` and every value there is 0."""
    values = [v for row in rows if (v := _numeric(row.get(column))) is not None]
    return bool(values) and all(v == 0 for v in values)


# Retrieval metrics keep their case count in one shared column instead of `<column>_cases`: each is
# computed over the same cases, those with expected sources.
RETRIEVAL_COLUMN_PREFIXES = ("mrr", "hit_rate@", "recall@", "ndcg@", "failure_rate@")


def _case_count(row: dict, column: str) -> int | None:
    """How many cases a cell's score in `column` rests on: `<column>_cases`, or for a retrieval metric
    the cell's `retrieval_cases`; None when the row does not say."""
    source = f"{column}_cases"
    if source not in row and column.startswith(RETRIEVAL_COLUMN_PREFIXES):
        source = "retrieval_cases"
    count = _numeric(row.get(source))
    return None if count is None else int(count)


def _interval(row: dict, column: str) -> tuple[float, float] | None:
    low, high = _numeric(row.get(f"{column}_low")), _numeric(row.get(f"{column}_high"))
    return None if low is None or high is None else (low, high)


def _value_with_interval(row: dict, column: str) -> str:
    """A score and, below it, its interval: ``0.75`` and ``[0.50, 1.00]``; both escaped."""
    value = escape(format_value(_numeric(row.get(column))))
    interval = _interval(row, column)
    if interval is None:
        return value
    low, high = (escape(format_value(bound)) for bound in interval)
    return f"{value}<br><small>[{low}, {high}]</small>"


def _case_type_cell(row: dict, column: str) -> str:
    """A score of one case type: ``0.75 [0.50, 1.00] n=4`` (value, interval, cases), escaped."""
    value = _numeric(row.get(column))
    if value is None:
        return ""
    text = format_value(value)
    if (interval := _interval(row, column)) is not None:
        text += f" [{format_value(interval[0])}, {format_value(interval[1])}]"
    if (cases := row.get(f"{column}_cases")) is not None:
        text += f" n={cases}"
    return escape(text)


def _case_type_section(report: ReportInput) -> str:
    """The headline scores per case type (the evolution of generated eval cases), one line per (cell,
    case type); absent when the eval set has fewer than two case types."""
    if not report.case_type_rows:
        return ""
    metrics = [
        m
        for m in report.headline
        if any(_numeric(r.get(m.column)) is not None for r in report.case_type_rows)
    ]
    header = ["<th>Configuration</th>", "<th>Case type</th>"]
    for metric in metrics:
        arrow = "\u2191" if metric.higher_is_better else "\u2193"
        header.append(f'<th title="{_direction(metric)}">{escape(metric.label)} {arrow}</th>')
    body = []
    for row in report.case_type_rows:
        cells = [f"<td>{escape(_label(row))}</td>", f"<td>{escape(str(row.get('case_type')))}</td>"]
        cells += [f'<td class="number">{_case_type_cell(row, m.column)}</td>' for m in metrics]
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = f"<table><thead><tr>{''.join(header)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    note = (
        "Each headline score averaged over the cases of one type (the evolution that generated the case), "
        f"with its {report.confidence:.0%} bootstrap interval and n, the number of cases behind it: a type "
        "with few cases says little on its own. Click a column header to sort."
    )
    return (
        f'<h2 id="case-types">Scores by case type</h2><p class="note">{escape(note)}</p>'
        f'<div class="scroll sortable">{table}</div>'
    )


def _judge_section(report: ReportInput) -> str:
    """How far to trust the judge: keyword tests, a second judge, human labels."""
    reliability = report.judge_reliability
    if reliability is None:
        return ""
    parts = ['<h2 id="judge">How far to trust the judge</h2>']
    parts += [f"<p>{escape(line)}</p>" for line in reliability.lines()]
    keyword = reliability.keyword
    if keyword is not None and keyword.contradictions:
        parts.append(
            '<p class="note">Contradictions: the judge gave 5 although a keyword test failed, or 1 although '
            "every keyword test passed. Either the judge or the keywords are wrong here: read the answer.</p>"
        )
        parts.append(rows_to_html_table([c.model_dump() for c in keyword.contradictions]))
    for human in reliability.human:
        rows = [
            {"human": score} | {f"judge {j}": count for j, count in zip(SCALE, counts, strict=True)}
            for score, counts in zip(SCALE, human.confusion, strict=True)
        ]
        parts.append(f"<h3>{escape(human.judge)} against human labels</h3>{rows_to_html_table(rows)}")
    if len(parts) == 1:
        parts.append('<p class="note">No score to check the judge against (no rubric with checks_judge).</p>')
    return "".join(parts)


def _significance_section(report: ReportInput) -> str:
    """Per headline score, the best cell tested against every other cell on the same cases."""
    title = '<h2 id="significance">Is the best really better?</h2>'
    if not report.verdicts:
        return f'{title}<p class="note">Fewer than two cells have a headline score: nothing to compare.</p>'
    parts = [
        f'<p class="note">Each cell answers the same cases, so the best cell on each score is compared with '
        f"every other cell case by case (paired), and the p-values are Holm-corrected for the number of "
        f"comparisons. <b>tied</b>: the data cannot tell the two apart at this number of cases. "
        f"Difference = other cell minus best, with its {report.confidence:.0%} interval.</p>"
    ]
    for verdict in report.verdicts:
        rows = [
            {
                "cell": verdict.name(c.candidate),
                "difference": round(c.difference, 4),
                "interval": f"[{format_value(round(c.low, 4))}, {format_value(round(c.high, 4))}]",
                "cases": c.n,
                "test": TEST_NAMES[c.test],
                "p (Holm)": round(c.p_holm, 4),
                "verdict": c.verdict,
            }
            for c in verdict.comparisons
        ]
        tied = ", ".join(verdict.name(cell) for cell in verdict.tied)
        parts.append(
            f"<h3>{escape(verdict.label)}</h3><p><b>{escape(verdict.sentence())}</b><br>"
            f"Tied with the best: {escape(tied)}</p>"
            f'<div class="scroll">{rows_to_html_table(rows)}</div>'
        )
    return title + "".join(parts)


def _ordered_values(rows: list[dict], axis: str) -> list[object]:
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
    x_values = _ordered_values(rows, axis)
    groups = _ordered_values(rows, group_axis) if group_axis is not None else [None]
    series: dict[object, list[AxisPoint | None]] = {}
    for group in groups:
        points: list[AxisPoint | None] = []
        for x in x_values:
            cells = [
                (number, row)
                for row in rows
                if row.get(axis) == x
                and (group_axis is None or row.get(group_axis) == group)
                and (number := _numeric(row.get(column))) is not None
            ]
            if not cells:
                points.append(None)
                continue
            counts = [_case_count(row, column) for _, row in cells]
            spans = [_interval(row, column) for _, row in cells]
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


def _per_series(series: dict[str, list[AxisPoint | None]], part: Callable[[AxisPoint], T]) -> dict:
    """One part of every point (its mean, span or label), None where the series has no point."""
    return {name: [None if p is None else part(p) for p in points] for name, points in series.items()}


def _axis_effect_section(report: ReportInput) -> str:
    title = '<h2 id="axes">Effect of each setting</h2>'
    metric = _first_metric_with_values(report)
    if not report.varying_axes:
        return f'{title}<p class="note">Only one configuration: no setting varies.</p>'
    if metric is None:
        return title + NO_SCORES
    label = escape(metric.label)
    if _all_zero(report.rows, metric.column):
        return f'{title}<p class="note">{label}: every cell scores 0, so there is no effect to plot.</p>'
    svgs, skipped = [], []
    for number, axis in enumerate(report.varying_axes):
        group_axis = next((other for other in report.varying_axes if other != axis), None)
        x_values, series = axis_points(report.rows, axis, metric.column, group_axis)
        with_values = [i for i in range(len(x_values)) if any(points[i] for points in series.values())]
        if len(with_values) < 2:
            skipped.append(
                f"{escape(axis)}: only one of its values has a {label} (the others have none), so no chart."
            )
            continue
        x_names = _display_names(x_values)
        shown_x = [x if is_number(x) else x_names[x] for x in x_values]
        group_names = _display_names(list(series)) if group_axis is not None else {None: "all cells"}
        named = {group_names[group]: points for group, points in series.items()}
        svgs.append(
            charts.axis_effect(
                axis,
                metric.label,
                shown_x,
                _per_series(named, lambda point: point.mean),
                group_axis,
                chart_id=f"axis{number}",
                spans=_per_series(named, lambda point: point.span),
                point_labels=_per_series(named, AxisPoint.label),
            )
        )
    note = f"Mean {label} ({_direction(metric)}) over the cells with each value" + (
        "; one line per value of the first other varying setting." if len(report.varying_axes) > 1 else "."
    )
    if svgs:
        note += (
            f" Bars: from the lowest to the highest bound of the {report.confidence:.0%} bootstrap "
            "intervals of the cells behind the point (the spread of their own uncertainty, not an interval "
            "of the mean). Label: n = the cases behind each cell (a range when they differ) and how many "
            "cells the point averages. A mean over few cases says little: points whose bars overlap may "
            "not differ."
        )
    notes = "".join(f'<p class="note">{text}</p>' for text in skipped)
    charts_html = f'<div class="charts">{"".join(svgs)}</div>' if svgs else ""
    return f'{title}<p class="note">{note}</p>{notes}{charts_html}'


def _tradeoff_section(report: ReportInput) -> str:
    """Quality against latency and against cost, with the Pareto front named in text as well."""
    title = '<h2 id="tradeoffs">Quality against latency and cost</h2>'
    metric = _first_metric_with_values(report)
    if metric is None:
        return title + NO_SCORES
    parts = []
    for kind, column in (("latency", report.latency_column), ("cost", report.cost_column)):
        if column is None:
            parts.append(f'<p class="note">No quality-against-{kind} chart: this run reports no {kind}.</p>')
            continue
        if _all_zero(report.rows, column):
            parts.append(f'<p class="note">{_zero_cost_note(kind, column, report.rows)}</p>')
            continue
        points = [
            (row, cost, quality)
            for row in report.rows
            if (cost := _numeric(row.get(column))) is not None
            and (quality := _numeric(row.get(metric.column))) is not None
        ]
        if not points:
            parts.append(
                f'<p class="note">No quality-against-{kind} chart: no cell has both a known '
                f"{escape(column)} and a {escape(metric.label)}.</p>"
            )
            continue
        front = charts.pareto_front([(cost, quality) for _, cost, quality in points], metric.higher_is_better)
        svg = charts.tradeoff(
            [_label(row) for row, _, _ in points],
            [cost for _, cost, _ in points],
            [quality for _, _, quality in points],
            column,
            metric.label,
            metric.higher_is_better,
            front,
            chart_id=kind,
        )
        left_out = len(report.rows) - len(points)
        front_names = ", ".join(escape(_label(points[i][0])) for i in front)
        text = f"Pareto front (no other cell is as good or better for less {escape(column)}): {front_names}."
        if left_out:
            text += f" {left_out} cell(s) left out: unknown {escape(column)} or {escape(metric.label)}."
        parts.append(f'<figure>{svg}<figcaption class="note">{text}</figcaption></figure>')
    return f'{title}<div class="charts">{"".join(parts)}</div>'


def _zero_cost_note(kind: str, column: str, rows: list[dict]) -> str:
    """Why a trade-off chart is left out when every known latency or cost is 0 (escaped)."""
    unknown = sum(_numeric(row.get(column)) is None for row in rows)
    rest = f" ({unknown} cell(s) of unknown {escape(column)})" if unknown else ""
    if kind == "cost":
        return f"Cost: every call cost $0 (local models){rest}, so no quality-against-cost chart."
    return (
        f"{kind.capitalize()}: every cell's {escape(column)} is 0{rest}, so no quality-against-{kind} chart."
    )


INDEX_COST_COLUMNS = (
    "recall_vs_exact",
    "search_ms_per_query",
    "exact_search_ms_per_query",
    "index_build_s",
    "index_mb",
)


def _approximate_rows(report: ReportInput) -> list[dict]:
    return [row for row in report.rows if row.get("recall_vs_exact") is not None]


def _index_section(report: ReportInput) -> str:
    """What an approximate index's speed costs in quality, on the eval set's own queries."""
    rows = _approximate_rows(report)
    if not rows:
        return ""
    quality = _first_metric_with_values(report)
    table = []
    for row in rows:
        exact, approximate = row.get("exact_search_ms_per_query"), row.get("search_ms_per_query")
        speedup = exact / approximate if exact and approximate else None
        table.append(
            {
                "cell": row["label"],
                "index": row.get("index"),
                "top_k": row.get("top_k"),
                **{column: row.get(column) for column in INDEX_COST_COLUMNS},
                "speed-up vs flat": None if speedup is None else round(speedup, 2),
                **({quality.label: row.get(quality.column)} if quality else {}),
            }
        )
    return (
        '<h2 id="indexes">Approximate indexes: speed against recall</h2><p class="note">recall_vs_exact: the '
        "share of the exact (flat) search's top_k that the approximate index returns for the same eval "
        "questions (1.0 = identical sets). Search times are per query, query encoding excluded, measured on "
        "the eval set's questions in one batch: a few dozen queries on a small knowledge base time noise "
        "more than the index; bench/bench_scale.py measures them at 100k chunks.</p>"
        f'<div class="scroll sortable">{rows_to_html_table(table)}</div>'
    )


def _full_table_section(report: ReportInput) -> str:
    return (
        '<h2 id="full">All results</h2><p class="note">Every column; click a header to sort.</p>'
        f'<div class="scroll sortable wide">{rows_to_html_table(report.rows)}</div>'
    )


def _json_for_script(data: object) -> str:
    """JSON that cannot end its <script> element or start markup, whatever text it carries."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _case_data(cases: list[CaseView]) -> list[dict]:
    """Cases in first-seen order, each with every cell's answer; keyword failures sorted so that two
    cells failing the same checks compare equal in the browser."""
    by_case: dict[str, dict] = {}
    for view in cases:
        case = by_case.setdefault(
            view.case_id, {"id": view.case_id, "question": view.question, "answers": []}
        )
        case["answers"].append(
            {
                "cell": view.cell,
                "answer": view.answer,
                "error": view.error,
                "scores": view.scores,
                "keyword_failures": sorted(view.keyword_failures),
                "judge_reasoning": view.judge_reasoning,
                "passages": [
                    {"source": p.source, "text": p.text, "rank": p.retrieval_rank} for p in view.passages
                ],
            }
        )
    return list(by_case.values())


def _default_pair(report: ReportInput, cells: list[str]) -> tuple[str, str]:
    """Open the comparison on the best cell and its runner-up on the first headline score."""
    metric = _first_metric_with_values(report)
    ranked = []
    if metric is not None:
        ranked = [
            str(row.get("cell"))
            for group in _ranked(report.rows, metric.column, metric.higher_is_better)
            for _, row in group
        ]
    order = [cell for cell in ranked if cell in cells] + [cell for cell in cells if cell not in ranked]
    return order[0], order[1] if len(order) > 1 else order[0]


def _case_section(report: ReportInput) -> str:
    if not report.cases:
        return ""
    labels = {str(row.get("cell")): _label(row) for row in report.rows}
    answered = dict.fromkeys(view.cell for view in report.cases)
    cells = [cell for cell in labels if cell in answered] + [cell for cell in answered if cell not in labels]
    left, right = _default_pair(report, cells)

    def options(selected: str) -> str:
        return "".join(
            f'<option value="{escape(cell)}"{" selected" if cell == selected else ""}>'
            f"{escape(labels.get(cell, cell))}</option>"
            for cell in cells
        )

    return (
        '<h2 id="cases">Answers side by side</h2>'
        '<p class="note">Pick two configurations to compare their answer to every question.</p>'
        '<div class="controls">'
        f'<label>Left <select id="cell-a">{options(left)}</select></label>'
        f'<label>Right <select id="cell-b">{options(right)}</select></label>'
        '<label><input type="checkbox" id="only-differ"> only where they differ</label>'
        '<span id="case-count" class="note"></span></div>'
        '<noscript><p class="note">This view needs JavaScript; the tables and charts above do not.</p>'
        '</noscript><div id="case-list"></div><script type="application/json" id="case-data">'
        f"{_json_for_script(_case_data(report.cases))}</script>"
    )


def _failure_sections(report: ReportInput) -> str:
    if not (report.cases or report.keyword_failures or report.weak_answers):
        return ""
    return '<div id="failures"></div>' + "".join(
        [
            html_section("Keyword test failures", report.keyword_failures),
            html_section("Weak answers: low scores, or the judge could not score", report.weak_answers),
        ]
    )


def _pairwise_section(report: ReportInput) -> str:
    """Each blinded pairwise comparison: which answer set the judge preferred, case by case."""
    if not report.pairwise:
        return ""
    return '<h2 id="pairwise">Pairwise: which answers the judge preferred</h2>' + "".join(
        pairwise_html(result) for result in report.pairwise
    )


def _navigation(report: ReportInput) -> str:
    links = [
        ("best", "Best"),
        ("significance", "Really better?"),
        *([("judge", "Judge")] if report.judge_reliability else []),
        *([("pairwise", "Pairwise")] if report.pairwise else []),
        ("headline", "Headline table"),
        ("charts", "Charts"),
        *([("case-types", "By case type")] if report.case_type_rows else []),
        ("axes", "Settings"),
        ("tradeoffs", "Trade-offs"),
        *([("indexes", "Index speed vs recall")] if _approximate_rows(report) else []),
        ("full", "All results"),
    ]
    if report.cases:
        links.append(("cases", "Answers side by side"))
    if report.cases or report.keyword_failures or report.weak_answers:
        links.append(("failures", "Failures"))
    return "<nav>" + "".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in links) + "</nav>"


# Sorts every table inside a ".sortable" container by the clicked column: numbers numerically, text
# naturally, blanks last in both directions.
SORT_SCRIPT = """
(() => {
  "use strict";
  const key = (cell, numeric) => {
    const text = cell ? cell.textContent.trim() : "";
    if (!numeric) return text;
    const value = parseFloat(text);
    return Number.isNaN(value) ? "" : value;
  };
  for (const table of document.querySelectorAll(".sortable table")) {
    const headers = Array.from(table.tHead.rows[0].cells);
    headers.forEach((header, index) => {
      const sort = () => {
        const ascending = header.getAttribute("aria-sort") !== "ascending";
        headers.forEach((other) => other.removeAttribute("aria-sort"));
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const numeric = rows.some((row) => row.cells[index] && row.cells[index].classList.contains("number"));
        const keyed = rows.map((row) => [key(row.cells[index], numeric), row]);
        keyed.sort(([a], [b]) => {
          if (a === "" || b === "") return (a === "") - (b === "");
          const order = numeric ? a - b : a.localeCompare(b, undefined, { numeric: true });
          return ascending ? order : -order;
        });
        body.append(...keyed.map(([, row]) => row));
      };
      header.tabIndex = 0;
      header.addEventListener("click", sort);
      header.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sort();
        }
      });
    });
  }
})();
"""

# Renders the side-by-side answers from the JSON data block. Every piece of data goes in through
# textContent (or new Option), never innerHTML, so no answer, passage or label can become markup.
CASE_SCRIPT = """
(() => {
  "use strict";
  const cases = JSON.parse(document.getElementById("case-data").textContent);
  const pickA = document.getElementById("cell-a");
  const pickB = document.getElementById("cell-b");
  const onlyDiffer = document.getElementById("only-differ");
  const list = document.getElementById("case-list");
  const count = document.getElementById("case-count");
  const element = (tag, className, text) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const answersOf = new Map(cases.map((item) => [item, new Map(item.answers.map((a) => [a.cell, a]))]));
  const differ = (a, b) =>
    !a || !b || a.answer !== b.answer || JSON.stringify(a.scores) !== JSON.stringify(b.scores) ||
    a.keyword_failures.join("\\n") !== b.keyword_failures.join("\\n");
  const answerBlock = (pick, entry) => {
    const box = element("div", "answer");
    box.append(element("h4", null, pick.selectedOptions[0].textContent));
    if (!entry) {
      box.append(element("p", "note", "This configuration did not answer this question."));
      return box;
    }
    if (entry.answer === null) {
      box.append(element("p", "error", "No answer: " + (entry.error || "reader failed")));
    } else {
      box.append(element("p", "answer-text", entry.answer));
    }
    const scores = Object.entries(entry.scores).map(([name, verdict]) => name + " " + verdict);
    box.append(element("p", "meta", "Judge: " + (scores.length ? scores.join("; ") : "not judged")));
    const failures = entry.keyword_failures.length ? entry.keyword_failures.join("; ") : "none";
    box.append(element("p", "meta", "Keyword failures: " + failures));
    if (entry.judge_reasoning) box.append(element("p", "meta", "Reasoning: " + entry.judge_reasoning));
    if (entry.passages.length) {
      const passages = element("ol", "meta");
      for (const passage of entry.passages) {
        const details = element("details");
        const rank = passage.rank === null ? "" : " (retrieval rank " + passage.rank + ")";
        details.append(element("summary", null, passage.source + rank));
        details.append(element("div", "passage-text", passage.text));
        const item = element("li");
        item.append(details);
        passages.append(item);
      }
      box.append(passages);
    }
    return box;
  };
  const render = () => {
    list.replaceChildren();
    let shown = 0;
    for (const item of cases) {
      const a = answersOf.get(item).get(pickA.value);
      const b = answersOf.get(item).get(pickB.value);
      if ((!a && !b) || (onlyDiffer.checked && !differ(a, b))) continue;
      const card = element("section", "case");
      card.append(element("h3", null, item.id + ": " + item.question));
      const pair = element("div", "pair");
      pair.append(answerBlock(pickA, a), answerBlock(pickB, b));
      card.append(pair);
      list.append(card);
      shown += 1;
    }
    count.textContent = shown + " of " + cases.length + " questions shown";
  };
  for (const control of [pickA, pickB, onlyDiffer]) control.addEventListener("change", render);
  render();
})();
"""


def render_report(report: ReportInput) -> str:
    """One self-contained HTML page for a run: no network, charts as inline SVG, tables that read
    without JavaScript, and a side-by-side answer view when the run has answers."""
    body = [
        page_header(report.title, report.notes, report.warnings),
        _navigation(report),
        _best_section(report),
        _significance_section(report),
        _judge_section(report),
        _pairwise_section(report),
        _headline_section(report),
        _bar_chart_section(report),
        _case_type_section(report),
        _axis_effect_section(report),
        _tradeoff_section(report),
        _index_section(report),
        _full_table_section(report),
        _case_section(report),
        _failure_sections(report),
    ]
    scripts = [SORT_SCRIPT, CASE_SCRIPT] if report.cases else [SORT_SCRIPT]
    return document(report.title, "".join(body), scripts)
