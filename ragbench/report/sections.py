"""The report's sections that rank and compare cells: the best configuration per headline score, the
headline table, the bar charts, scores by case type, the judge's reliability and the significance tests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ragbench.analysis.axes import case_count, numeric, row_interval
from ragbench.analysis.judge_card import JudgeCard, card_lines
from ragbench.analysis.judge_reliability import SCALE
from ragbench.analysis.uncertainty import TEST_NAMES, MetricVerdict
from ragbench.report import charts
from ragbench.report.pages import format_value, interval_cell, rows_to_html_table
from ragbench.report.view import ReportInput
from ragbench.review.alignment import JudgeAlignment
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import PairedComparison
from ragbench.stats.intervals import MIN_CASES, too_few_text


def row_label(row: dict) -> str:
    return str(row.get("label") or row.get("cell"))


def ranked_groups(rows: list[dict], column: str, higher_is_better: bool) -> list[list[tuple[float, dict]]]:
    """Cells with a value in `column`, grouped by equal value (ties), best group first."""
    scored = [(value, row) for row in rows if (value := numeric(row.get(column))) is not None]
    scored.sort(key=lambda pair: -pair[0] if higher_is_better else pair[0])
    groups: list[list[tuple[float, dict]]] = []
    for value, row in scored:
        if groups and math.isclose(groups[-1][0][0], value, rel_tol=1e-9, abs_tol=1e-12):
            groups[-1].append((value, row))
        else:
            groups.append([(value, row)])
    return groups


def first_metric_with_values(report: ReportInput) -> MetricInfo | None:
    """The metric the axis and trade-off charts show: the first headline score anyone has a value for."""
    return next(
        (m for m in report.headline if ranked_groups(report.rows, m.column, m.higher_is_better)), None
    )


NO_SCORES = '<p class="note">No headline score has values.</p>'


def direction_text(metric: MetricInfo) -> str:
    return "higher is better" if metric.higher_is_better else "lower is better"


def cost_text(row: dict, column: str | None) -> str:
    if column is None:
        return ""
    value = numeric(row.get(column))
    return "unknown" if value is None else format_value(value)


def tied_labels(group: list[tuple[float, dict]]) -> str:
    tag = '<span class="tag">tied</span>' if len(group) > 1 else ""
    return "<br>".join(f"{escape(row_label(row))}{tag}" for _, row in group)


def best_section(report: ReportInput) -> str:
    """Best cell per headline score with its margin over the runner-up and what it costs.

    Tied leaders are all listed (one per line, with their own latency and cost) instead of picking
    one arbitrarily; the runner-up is then the best cell that scored differently.
    """
    extra = [c for c in (report.latency_column, report.cost_column) if c is not None]
    header = ["Headline score", "Best", "Best value", "Runner-up", "Runner-up value", "Margin"]
    header += [f"{column} of best" for column in extra]
    body = []
    for metric in report.headline:
        groups = ranked_groups(report.rows, metric.column, metric.higher_is_better)
        if not groups:
            continue
        best = groups[0]
        runner_up = groups[1] if len(groups) > 1 else None
        cells = [
            f"<td>{escape(metric.label)}<br><small>{direction_text(metric)}</small></td>",
            f"<td>{tied_labels(best)}</td>",
            f'<td class="number">{escape(format_value(best[0][0]))}</td>',
        ]
        if runner_up is None:
            none_left = "all tied" if len(best) > 1 else "only one cell has a value"
            cells += [f'<td colspan="3" class="note">none ({none_left})</td>']
        else:
            margin = abs(best[0][0] - runner_up[0][0])
            cells += [
                f"<td>{tied_labels(runner_up)}</td>",
                f'<td class="number">{escape(format_value(runner_up[0][0]))}</td>',
                f'<td class="number">{escape(format_value(margin))}</td>',
            ]
        for column in extra:
            values = "<br>".join(escape(cost_text(row, column)) for _, row in best)
            cells.append(f'<td class="number">{values}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    title = '<h2 id="best">Best configuration per headline score</h2>'
    if not body:
        return title + NO_SCORES
    head = "".join(f"<th>{escape(text)}</th>" for text in header)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'{title}<div class="scroll">{table}</div>'


def short_value(value: object) -> str:
    """An axis value fit for a narrow column: a model path keeps only its last part."""
    if value is None:
        return "none"
    text = str(value)
    return text.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) and "/" in text else text


def display_names(values: Sequence[object]) -> dict[object, str]:
    """Short names for axis values, falling back to the full text where two short names would clash."""
    short = {value: short_value(value) for value in values}
    clashing = {name for name in short.values() if list(short.values()).count(name) > 1}
    return {
        value: ("none" if value is None else str(value)) if name in clashing else name
        for value, name in short.items()
    }


def headline_section(report: ReportInput) -> str:
    """The compact table: one line per cell, the varying axes (short names) and the headline scores."""
    best_rows = {
        metric.column: {id(row) for _, row in groups[0]}
        for metric in report.headline
        if (groups := ranked_groups(report.rows, metric.column, metric.higher_is_better))
    }
    names = {
        axis: display_names(list(dict.fromkeys(r.get(axis) for r in report.rows)))
        for axis in report.varying_axes
    }
    # The varying axes name each cell (the label would repeat them and push the scores off-screen).
    axes = report.varying_axes or ["label"]
    header = [f"<th>{escape(axis)}</th>" for axis in axes]
    for metric in report.headline:
        arrow = "\u2191" if metric.higher_is_better else "\u2193"
        header.append(f'<th title="{direction_text(metric)}">{escape(metric.label)} {arrow}</th>')
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
            value = row.get(axis) if axis != "label" else row_label(row)
            full = "none" if value is None else str(value)
            shown = names[axis][value] if axis in names else full
            title = f' title="{escape(full)}"' if shown != full else ""
            cells.append(f"<td{title}>{escape(shown)}</td>")
        cells[0] = cells[0].replace("</td>", f"{cached}</td>", 1)
        for metric in report.headline:
            css = "number best" if id(row) in best_rows.get(metric.column, ()) else "number"
            cells.append(f'<td class="{css}">{value_with_interval(row, metric.column)}</td>')
        cells += [f'<td class="number">{escape(cost_text(row, column))}</td>' for column in extra]
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


def bar_chart_section(report: ReportInput) -> str:
    """One panel of bars per headline score; a score no cell has, or every cell scores 0 on, is left
    out with a note saying so (its bars would all be empty)."""
    labels = [row_label(row) for row in report.rows]
    shown = [m for m in report.headline if not all_missing(report.rows, m.column)]
    missing = [m for m in report.headline if m not in shown]
    zero = [m for m in shown if all_zero(report.rows, m.column)]
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
        [(m.label, [numeric(row.get(m.column)) for row in report.rows], m.higher_is_better) for m in shown],
        chart_id="bars",
        intervals=[[row_interval(row, m.column) for row in report.rows] for m in shown],
        cases=[[case_count(row, m.column) for row in report.rows] for m in shown],
    )
    note = (
        f'<p class="note">Whiskers: {report.confidence:.0%} bootstrap interval over the cases behind each '
        "bar; n: how many cases that is (in the panel's title when every bar has the same n). A bar "
        "resting on few cases says little. Bars whose whiskers overlap may not differ; the next section "
        "tests it case by case.</p>"
    )
    return f'{title}<div class="charts">{chart}</div>{note}{left_out}'


def all_missing(rows: list[dict], column: str) -> bool:
    return all(numeric(row.get(column)) is None for row in rows)


def all_zero(rows: list[dict], column: str) -> bool:
    """Some cell has a value in `column` and every value there is 0."""
    values = [v for row in rows if (v := numeric(row.get(column))) is not None]
    return bool(values) and all(v == 0 for v in values)


def value_with_interval(row: dict, column: str) -> str:
    """A score and, below it, its interval: ``0.75`` and ``[0.50, 1.00]`` (or that its cases were too few
    for one); both escaped."""
    value = escape(format_value(numeric(row.get(column))))
    interval = row_interval(row, column)
    if interval is None:
        if (few := too_few(row, column)) is not None:
            return f"{value}<br><small>{escape(few)}</small>"
        return value
    return f"{value}<br><small>{escape(interval_cell(*interval))}</small>"


def too_few(row: dict, column: str) -> str | None:
    """``n=2: too few for an interval`` where the row has a value without an interval for that reason."""
    cases = row.get(f"{column}_cases")
    if row_interval(row, column) is None and isinstance(cases, int) and cases < MIN_CASES:
        return too_few_text(cases)
    return None


def case_type_cell(row: dict, column: str) -> str:
    """A score of one case type: ``0.75 [0.50, 1.00] n=4`` (value, interval, cases), escaped."""
    value = numeric(row.get(column))
    if value is None:
        return ""
    text = format_value(value)
    if (interval := row_interval(row, column)) is not None:
        text += f" {interval_cell(*interval)}"
    if (few := too_few(row, column)) is not None:
        text += f" {few}"
    elif (cases := row.get(f"{column}_cases")) is not None:
        text += f" n={cases}"
    return escape(text)


def breakdown_section(
    report: ReportInput, rows: list[dict], anchor: str, title: str, group: tuple[str, str], what: str
) -> str:
    """The headline scores per (cell, group) of `rows` (`ragbench.analysis.case_types.breakdown_rows`),
    the group in column `group[0]` headed `group[1]`; `what` says what a group is. Absent without rows."""
    if not rows:
        return ""
    metrics = [m for m in report.headline if any(numeric(r.get(m.column)) is not None for r in rows)]
    header = ["<th>Configuration</th>", f"<th>{escape(group[1])}</th>"]
    for metric in metrics:
        arrow = "\u2191" if metric.higher_is_better else "\u2193"
        header.append(f'<th title="{direction_text(metric)}">{escape(metric.label)} {arrow}</th>')
    body = []
    for row in rows:
        cells = [f"<td>{escape(row_label(row))}</td>", f"<td>{escape(str(row.get(group[0])))}</td>"]
        cells += [f'<td class="number">{case_type_cell(row, m.column)}</td>' for m in metrics]
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = f"<table><thead><tr>{''.join(header)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    note = (
        f"Each headline score averaged over the cases of one {what}, with its {report.confidence:.0%} "
        "interval and n, the number of cases behind it: a group with few cases says little on its own. "
        "Click a column header to sort."
    )
    return (
        f'<h2 id="{anchor}">{escape(title)}</h2><p class="note">{escape(note)}</p>'
        f'<div class="scroll sortable">{table}</div>'
    )


def case_type_section(report: ReportInput) -> str:
    """The headline scores per case type (the evolution of generated eval cases), one line per (cell,
    case type); absent when the eval set has fewer than two case types."""
    what = "type (the evolution that generated the case)"
    group = ("case_type", "Case type")
    return breakdown_section(report, report.case_type_rows, "case-types", "Scores by case type", group, what)


def turn_mode_section(report: ReportInput) -> str:
    """The headline scores per turn mode: follow-ups after earlier turns given in the case apart from
    those after the cell's own generated turns; absent when no case has a generated turn."""
    what = (
        "turn mode (a single question; a follow-up after earlier turns given in the case, the same for "
        "every cell; or after assistant turns this cell generated, so its own earlier errors carry over)"
    )
    group = ("turns", "Earlier turns")
    return breakdown_section(report, report.turn_mode_rows, "turn-modes", "Scores by turn mode", group, what)


def judge_card_html(card: JudgeCard) -> str:
    """One judge's card: detection per planted error type and false alarms, each case's verdict folded."""
    verdicts = rows_to_html_table([verdict.model_dump() for verdict in card.verdicts])
    lines = "".join(f"<p>{escape(line)}</p>" for line in card_lines(card))
    return (
        f"<h3>Judge card: {escape(card.judge)} on {escape(card.rubric)}</h3>{lines}"
        f"<details><summary>Every planted answer and the judge's verdict</summary>"
        f'<div class="scroll">{verdicts}</div></details>'
    )


def judge_section(report: ReportInput) -> str:
    """How far to trust the judge: planted errors, keyword tests, a second judge, human labels."""
    reliability = report.judge_reliability
    if reliability is None and not report.judge_cards and not report.judge_alignments:
        return ""
    parts = ['<h2 id="judge">How far to trust the judge</h2>']
    parts += [judge_card_html(card) for card in report.judge_cards]
    parts += [alignment_html(alignment) for alignment in report.judge_alignments]
    if reliability is None:
        return "".join(parts)
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
    if len(parts) == 1 + len(report.judge_cards) + len(report.judge_alignments):
        parts.append('<p class="note">No score to check the judge against (no rubric with checks_judge).</p>')
    return "".join(parts)


def alignment_html(alignment: JudgeAlignment) -> str:
    """One judge against a person's labels: kappa before and after alignment (held out), each with its
    interval, the confusion matrices, and every labelled verdict."""
    parts = [f"<h3>{escape(alignment.judge)} against your labels</h3>"]
    parts.append(
        '<p class="note">Kappa is quadratic-weighted on 1-5 scores; the interval is a bootstrap over the '
        "labelled answers. After alignment, the judge saw other answers a person graded but never one of the "
        "case it graded: each labelled verdict is a held-out prediction.</p>"
    )
    parts += [f"<p>{escape(line)}</p>" for line in alignment.lines()]
    for criterion in alignment.criteria:
        for side, found in (("before", criterion.before), ("after", criterion.after)):
            if found is None:
                continue
            rows = [
                {"person": value}
                | {f"judge {j}": count for j, count in zip(found.categories, counts, strict=True)}
                for value, counts in zip(found.categories, found.confusion, strict=True)
            ]
            parts.append(
                f"<details><summary>{escape(criterion.criterion)} {side}: confusion (rows: the person)"
                f"</summary>{rows_to_html_table(rows)}</details>"
            )
    verdicts = [v.model_dump() for v in alignment.verdicts]
    parts.append(
        f"<details><summary>Every labelled answer: the person, the judge before and after</summary>"
        f'<div class="scroll">{rows_to_html_table(verdicts)}</div></details>'
    )
    return "".join(parts)


def significance_section(report: ReportInput) -> str:
    """Per headline score, the best cell tested against every other cell on the same cases, each verdict
    beside the interval it can be read against (adjusted for the number of comparisons)."""
    title = '<h2 id="significance">Is the best really better?</h2>'
    if not report.verdicts:
        return f'{title}<p class="note">Fewer than two cells have a headline score: nothing to compare.</p>'
    parts = [
        '<p class="note">Each cell answers the same cases, so the best cell on each score is compared with '
        "every other cell case by case (paired), and the p-values are Holm-corrected for the number of "
        "comparisons. Cells with the same values on every case are compared once, together. "
        "<b>tied</b>: the data cannot tell the two apart at this number of cases. "
        "Difference = other cell minus best. <b>Adjusted interval</b>: the verdict's own test inverted (the "
        "sign-flip permutation test of the mean; a t-test for label-corrected scores) at the level Holm "
        "tested that comparison at, so a cell is tied exactly when its adjusted interval contains zero. "
        f"<b>Unadjusted</b>: the {report.confidence:.0%} interval of that one comparison alone, narrower, as "
        "if it were the only one made.</p>"
    ]
    for verdict in report.verdicts:
        rows = _comparison_rows(verdict, verdict.comparisons)
        tested = next((c for c in verdict.comparisons if not c.identical), None)
        lines = [f"<b>{escape(verdict.sentence())}</b>"]
        if verdict.twins:
            twins = ", ".join(verdict.name(cell) for cell in verdict.twins)
            lines.append(f"Same values as the best on every case: {escape(twins)}")
        if tested and tested.family is not None and tested.adjusted_confidence is not None:
            levels = sorted({c.adjusted_confidence for c in verdict.comparisons if c.adjusted_confidence})
            shown = ", ".join(f"{level * 100:.3g}%" for level in levels)
            lines.append(
                f"{tested.family} distinct comparison(s): adjusted intervals at {escape(shown)} (each at the "
                "level Holm tested it at; column level)"
            )
        lines.append(f"Tied with the best: {escape(', '.join(verdict.name(cell) for cell in verdict.tied))}")
        table = f'<div class="scroll">{rows_to_html_table(rows)}</div>' if rows else ""
        if beside := _comparison_rows(verdict, verdict.labels_alone):
            table += (
                "<p>The labels alone, beside (the person's labels without the judge; the verdict above uses, "
                "per comparison, the narrower of the label-corrected and the labels-alone interval):</p>"
                f'<div class="scroll">{rows_to_html_table(beside)}</div>'
            )
        parts.append(f"<h3>{escape(verdict.title)}</h3><p>{'<br>'.join(lines)}</p>{table}")
    return title + "".join(parts)


def _comparison_rows(verdict: MetricVerdict, comparisons: Sequence[PairedComparison]) -> list[dict]:
    return [
        {
            "cell": verdict.together(c.cells),
            "difference": round(c.difference, 4),
            "adjusted interval": interval_cell(c.adjusted_low, c.adjusted_high),
            "level": "" if c.adjusted_confidence is None else f"{c.adjusted_confidence * 100:.4g}%",
            "unadjusted interval": interval_cell(c.low, c.high),
            "cases": c.n,
            "test": TEST_NAMES[c.test],
            "p (Holm)": round(c.p_holm, 4),
            "verdict": c.verdict,
        }
        for c in comparisons
        if not c.identical
    ]
