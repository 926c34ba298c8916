"""Charts for the HTML report, each returned as an SVG string ready to inline in a page.

Figures are built with matplotlib's object API (no pyplot), so no GUI backend, global figure list or
display is involved; text stays text (``svg.fonttype='none'``) and a fixed hash salt makes the output
byte-for-byte reproducible, so a re-rendered report only differs where the numbers differ.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from html import escape

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "ragbench-report",
    "text.usetex": False,
    "text.parse_math": False,  # a "$" in a model name or label must not start TeX math
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.grid": True,
    "grid.color": "#e3e3ea",
    "axes.axisbelow": True,
}
BAR_COLOR = "#9db4d3"
BEST_COLOR = "#2f6db5"
POINT_COLOR = "#8c8c99"
FRONT_COLOR = "#d9661f"
MAX_LABEL_CHARS = 32
LABEL_TAIL_CHARS = 14  # kept at a shortened label's end: "in (UNTRAINED)"

Number = float | int


def shorten(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """Keep chart labels from eating the plot area; the tables carry the full text. The middle goes, not
    the end: labels end in what tells cells apart and in warnings such as "(UNTRAINED)", which must
    stay wherever the stand-in's numbers appear."""
    if len(text) <= limit:
        return text
    tail = min(LABEL_TAIL_CHARS, limit // 2)
    return text[: limit - 1 - tail] + "…" + text[-tail:]


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _to_svg(figure: Figure, chart_id: str, title: str) -> str:
    """The figure as an inline-ready <svg>: no XML prolog, DOCTYPE, metadata or comments, and ids
    prefixed with `chart_id` so several charts can share one HTML page without clashing ids."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.DOTALL)
    svg = re.sub(r"<!--.*?-->\s*", "", svg, flags=re.DOTALL)

    def prefix_ids(tag: re.Match) -> str:
        text = re.sub(r'\bid="([^"]+)"', rf'id="{chart_id}-\1"', tag.group(0))
        text = re.sub(r'\bhref="#([^"]+)"', rf'href="#{chart_id}-\1"', text)
        return re.sub(r"url\(#([^)]+)\)", rf"url(#{chart_id}-\1)", text)

    # Only inside tags: chart text (labels) is escaped, so it holds no "<" and is never rewritten.
    svg = re.sub(r"<[^<>]+>", prefix_ids, svg)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{escape(title)}" ', 1).strip()


Interval = tuple[float, float] | None


def bar_panels(
    labels: Sequence[str],
    panels: Sequence[tuple[str, Sequence[Number | None], bool]],
    chart_id: str,
    intervals: Sequence[Sequence[Interval]] | None = None,
    cases: Sequence[Sequence[int | None]] | None = None,
    title: str = "Headline scores per configuration",
) -> str:
    """Horizontal bars, one small panel per metric (title, value per label, higher_is_better), with
    each bar's interval (low, high) as an error bar when `intervals` gives one per panel and label,
    and the number of cases behind each bar when `cases` does: in the panel's title when every bar
    rests on the same number, else beside each bar's value.

    The best bar of each panel is drawn darker so the winner stands out without reading numbers;
    a missing value shows "n/a" instead of a zero-length bar that would read as a score of 0.
    """
    panel_rows = math.ceil(len(panels) / 4)  # at most four panels side by side, rows filled evenly
    columns = math.ceil(len(panels) / panel_rows)
    panel_height = 0.6 + 0.24 * len(labels)
    with matplotlib.rc_context(_STYLE):
        figure = _new_figure(2.2 + 2.6 * columns, panel_height * panel_rows)
        grid = figure.subplots(panel_rows, columns, sharey=True, squeeze=False)
        positions = list(range(len(labels)))
        for slot, axes in enumerate(grid.flat):
            if slot >= len(panels):
                axes.set_visible(False)
                continue
            panel_title, values, higher_is_better = panels[slot]
            known = [v for v in values if v is not None]
            best = (max if higher_is_better else min)(known) if known else None
            colors = [BEST_COLOR if v is not None and v == best else BAR_COLOR for v in values]
            bars = axes.barh(positions, [0 if v is None else v for v in values], color=colors, height=0.7)
            if any(v < 0 for v in known):  # changes, not scores: the zero line is what a bar is read against
                axes.axvline(0, color="#333333", lw=0.8)
            spans = intervals[slot] if intervals is not None else []
            whiskers = [
                (position, value, span)
                for position, value, span in zip(positions, values, spans, strict=False)
                if value is not None and span is not None
            ]
            if whiskers:
                ys, xs, bounds = zip(*whiskers, strict=True)
                below = [max(0.0, x - low) for x, (low, _) in zip(xs, bounds, strict=True)]
                above = [max(0.0, high - x) for x, (_, high) in zip(xs, bounds, strict=True)]
                axes.errorbar(xs, ys, xerr=[below, above], fmt="none", ecolor="#333333", capsize=3, lw=1)
            counts = list(cases[slot]) if cases is not None else [None] * len(values)
            counts += [None] * (len(values) - len(counts))
            known_counts = {n for v, n in zip(values, counts, strict=False) if v is not None}
            shared = known_counts.pop() if len(known_counts) == 1 else None  # None when unknown or mixed
            texts = [
                "n/a" if v is None else f"{v:.3g}" if shared is not None or n is None else f"{v:.3g} n={n}"
                for v, n in zip(values, counts, strict=False)
            ]
            axes.bar_label(bars, labels=texts, padding=2)
            direction = "higher is better" if higher_is_better else "lower is better"
            each = "" if shared is None else f"; n={shared} cases each"
            axes.set_title(f"{shorten(panel_title, 40)}\n({direction}{each})", fontsize=9)
            axes.set_yticks(positions, [shorten(label) for label in labels])
            axes.grid(axis="y", visible=False)
            axes.margins(x=0.22 if shared is not None or all(n is None for n in counts) else 0.34)
        grid.flat[0].invert_yaxis()  # the y axis is shared: inverting it once reads top-down everywhere
        return _to_svg(figure, chart_id, title)


def _x_positions(x_values: Sequence[object]) -> tuple[list[float], list[str], bool]:
    """Numeric axis values keep their spacing (128 vs 512 tokens); anything else is categorical."""
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in x_values)
    texts = [shorten(str(v), 20) for v in x_values]
    if numeric:
        return [float(v) for v in x_values], texts, True
    return [float(i) for i in range(len(x_values))], texts, False


def axis_effect(
    axis: str,
    metric_label: str,
    x_values: Sequence[object],
    series: dict[str, Sequence[float | None]],
    group_axis: str | None,
    chart_id: str,
    spans: dict[str, Sequence[Interval]] | None = None,
    point_labels: dict[str, Sequence[str | None]] | None = None,
) -> str:
    """Mean metric per value of `axis`, one line per value of `group_axis` (series name -> means).

    `spans` (series name -> (low, high) per axis value) draws an error bar at each point and
    `point_labels` (series name -> text per axis value) writes a small label beside it, e.g. the
    number of cases the point rests on. Lines are nudged sideways a little so that the bars of
    several series at the same axis value do not hide each other.

    A missing mean (no cell with that combination) leaves a gap rather than a misleading zero.
    """
    positions, tick_labels, numeric = _x_positions(x_values)
    with matplotlib.rc_context(_STYLE):
        figure = _new_figure(4.6, 3.2)
        axes: Axes = figure.subplots()
        extent: list[tuple[float, float]] = []
        for index, (name, means) in enumerate(series.items()):
            shift = (index - (len(series) - 1) / 2) * 0.06  # inches
            moved = axes.transData + ScaledTranslation(shift, 0, figure.dpi_scale_trans)
            y = [math.nan if m is None else m for m in means]
            (line,) = axes.plot(positions, y, marker="o", label=shorten(name, 28), transform=moved)
            # a nudged line does not count towards autoscaling: its points (and bars, below) are added
            extent += [(x, m) for x, m in zip(positions, means, strict=True) if m is not None]
            bounds = (spans or {}).get(name, [])
            whiskers = [
                (x, mean, span)
                for x, mean, span in zip(positions, means, bounds, strict=False)
                if mean is not None and span is not None
            ]
            if whiskers:
                xs, ys, limits = zip(*whiskers, strict=True)
                extent += [(x, bound) for x, span in zip(xs, limits, strict=True) for bound in span]
                below = [max(0.0, mean - low) for mean, (low, _) in zip(ys, limits, strict=True)]
                above = [max(0.0, high - mean) for mean, (_, high) in zip(ys, limits, strict=True)]
                axes.errorbar(
                    xs,
                    ys,
                    yerr=[below, above],
                    fmt="none",
                    ecolor=line.get_color(),
                    capsize=3,
                    lw=1,
                    alpha=0.7,
                    transform=moved,
                )
            texts = (point_labels or {}).get(name, [])
            for x, mean, text in zip(positions, means, texts, strict=False):
                if mean is not None and text:
                    axes.annotate(
                        text,
                        (x, mean),
                        xytext=(4 + shift * 72, 2),  # the line's nudge, inches to points
                        textcoords="offset points",
                        fontsize=6.5,
                        color=line.get_color(),
                    )
        if extent:
            axes.update_datalim(extent)
            axes.autoscale_view()
        axes.set_xticks(positions, tick_labels, rotation=0 if numeric or len(positions) < 4 else 30)
        axes.set_xlabel(axis)
        axes.set_ylabel(f"mean {shorten(metric_label, 30)}")
        axes.set_title(f"{shorten(metric_label, 30)} by {axis}")
        axes.margins(x=0.15 if not numeric else 0.08)
        if group_axis is not None:
            axes.legend(title=group_axis, fontsize=8, title_fontsize=8)
        return _to_svg(figure, chart_id, f"{metric_label} by {axis}")


def pareto_front(points: Sequence[tuple[float, float]], higher_is_better: bool) -> list[int]:
    """Indices of the (cost, quality) points no other point beats, ordered by cost.

    Cost (latency, dollars) is always better when lower; quality follows `higher_is_better`. A point
    is dominated when another is at least as good on both and strictly better on one, so identical
    points are all kept: neither is a reason to drop the other.
    """

    def at_least_as_good(a: float, b: float) -> bool:
        return a >= b if higher_is_better else a <= b

    front = [
        i
        for i, (cost, quality) in enumerate(points)
        if not any(
            other_cost <= cost
            and at_least_as_good(other_quality, quality)
            and (other_cost, other_quality) != (cost, quality)
            for other_cost, other_quality in points
        )
    ]
    sign = -1 if higher_is_better else 1
    return sorted(front, key=lambda i: (points[i][0], sign * points[i][1]))


def tradeoff(
    labels: Sequence[str],
    costs: Sequence[float],
    qualities: Sequence[float],
    cost_label: str,
    quality_label: str,
    higher_is_better: bool,
    front: Sequence[int],
    chart_id: str,
) -> str:
    """Quality against a cost (latency, dollars), every point labelled, the Pareto front (indices from
    `pareto_front`, ordered by cost) joined by a line and highlighted."""
    with matplotlib.rc_context(_STYLE):
        figure = _new_figure(5.6, 3.6)
        axes: Axes = figure.subplots()
        axes.scatter(costs, qualities, color=POINT_COLOR, s=22, zorder=2, label="configuration")
        axes.plot(
            [costs[i] for i in front],
            [qualities[i] for i in front],
            color=FRONT_COLOR,
            marker="o",
            markersize=7,
            zorder=3,
            label="Pareto front",
        )
        for label, cost, quality in zip(labels, costs, qualities, strict=True):
            axes.annotate(
                shorten(label, 24), (cost, quality), xytext=(4, 3), textcoords="offset points", fontsize=7
            )
        direction = "higher is better" if higher_is_better else "lower is better"
        axes.set_xlabel(f"{cost_label} (lower is better)")
        axes.set_ylabel(f"{shorten(quality_label, 30)} ({direction})")
        axes.set_title(f"{shorten(quality_label, 30)} against {cost_label}")
        axes.margins(x=0.18, y=0.12)
        axes.legend(fontsize=8)
        return _to_svg(figure, chart_id, f"{quality_label} against {cost_label}")
