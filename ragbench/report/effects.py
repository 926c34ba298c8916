"""The report's sections on settings and costs: each axis's effect, the quality-latency-cost trade-off, the
indexes' build and search costs, and the full table."""

from __future__ import annotations

from html import escape

from ragbench.analysis.axes import AxisPoint, axis_points, numeric, per_series
from ragbench.inputs.tables import is_number
from ragbench.report import charts
from ragbench.report.pages import rows_to_html_table
from ragbench.report.sections import (
    NO_SCORES,
    all_zero,
    direction_text,
    display_names,
    first_metric_with_values,
    row_label,
)
from ragbench.report.view import ReportInput
from ragbench.retrieval.measures import INDEX_COST_COLUMNS


def axis_effect_section(report: ReportInput) -> str:
    title = '<h2 id="axes">Effect of each setting</h2>'
    metric = first_metric_with_values(report)
    if not report.varying_axes:
        return f'{title}<p class="note">Only one configuration: no setting varies.</p>'
    if metric is None:
        return title + NO_SCORES
    label = escape(metric.label)
    if all_zero(report.rows, metric.column):
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
        x_names = display_names(x_values)
        shown_x = [x if is_number(x) else x_names[x] for x in x_values]
        group_names = display_names(list(series)) if group_axis is not None else {None: "all cells"}
        named = {group_names[group]: points for group, points in series.items()}
        svgs.append(
            charts.axis_effect(
                axis,
                metric.label,
                shown_x,
                per_series(named, lambda point: point.mean),
                group_axis,
                chart_id=f"axis{number}",
                spans=per_series(named, lambda point: point.span),
                point_labels=per_series(named, AxisPoint.label),
            )
        )
    note = f"Mean {label} ({direction_text(metric)}) over the cells with each value" + (
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


def tradeoff_section(report: ReportInput) -> str:
    """Quality against latency and against cost, with the Pareto front named in text as well."""
    title = '<h2 id="tradeoffs">Quality against latency and cost</h2>'
    metric = first_metric_with_values(report)
    if metric is None:
        return title + NO_SCORES
    parts = []
    for kind, column in (("latency", report.latency_column), ("cost", report.cost_column)):
        if column is None:
            parts.append(f'<p class="note">No quality-against-{kind} chart: this run reports no {kind}.</p>')
            continue
        if all_zero(report.rows, column):
            parts.append(f'<p class="note">{zero_cost_note(kind, column, report.rows)}</p>')
            continue
        points = [
            (row, cost, quality)
            for row in report.rows
            if (cost := numeric(row.get(column))) is not None
            and (quality := numeric(row.get(metric.column))) is not None
        ]
        if not points:
            parts.append(
                f'<p class="note">No quality-against-{kind} chart: no cell has both a known '
                f"{escape(column)} and a {escape(metric.label)}.</p>"
            )
            continue
        front = charts.pareto_front([(cost, quality) for _, cost, quality in points], metric.higher_is_better)
        svg = charts.tradeoff(
            [row_label(row) for row, _, _ in points],
            [cost for _, cost, _ in points],
            [quality for _, _, quality in points],
            column,
            metric.label,
            metric.higher_is_better,
            front,
            chart_id=kind,
        )
        left_out = len(report.rows) - len(points)
        front_names = ", ".join(escape(row_label(points[i][0])) for i in front)
        text = f"Pareto front (no other cell is as good or better for less {escape(column)}): {front_names}."
        if left_out:
            text += f" {left_out} cell(s) left out: unknown {escape(column)} or {escape(metric.label)}."
        parts.append(f'<figure>{svg}<figcaption class="note">{text}</figcaption></figure>')
    return f'{title}<div class="charts">{"".join(parts)}</div>'


def zero_cost_note(kind: str, column: str, rows: list[dict]) -> str:
    """Why a trade-off chart is left out when every known latency or cost is 0 (escaped)."""
    unknown = sum(numeric(row.get(column)) is None for row in rows)
    rest = f" ({unknown} cell(s) of unknown {escape(column)})" if unknown else ""
    if kind == "cost":
        return f"Cost: every call cost $0 (local models){rest}, so no quality-against-cost chart."
    return (
        f"{kind.capitalize()}: every cell's {escape(column)} is 0{rest}, so no quality-against-{kind} chart."
    )


def approximate_rows(report: ReportInput) -> list[dict]:
    return [row for row in report.rows if row.get("recall_vs_exact") is not None]


def index_section(report: ReportInput) -> str:
    """What an approximate index's speed costs in quality, on the eval set's own queries."""
    rows = approximate_rows(report)
    if not rows:
        return ""
    quality = first_metric_with_values(report)
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


def full_table_section(report: ReportInput) -> str:
    return (
        '<h2 id="full">All results</h2><p class="note">Every column; click a header to sort.</p>'
        f'<div class="scroll sortable wide">{rows_to_html_table(report.rows)}</div>'
    )
