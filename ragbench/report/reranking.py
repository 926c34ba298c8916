"""The report's reranking section: for every cell that reranks, each retrieval metric of the first stage's
ranking beside the reranked one's (the passages the reader is given), with their paired difference, its
interval and p-value. Escaped like every table of the report."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ragbench.analysis.reranking import RerankGain
from ragbench.report import charts
from ragbench.report.pages import rows_to_html_table


def reranking_section(gains: Sequence[RerankGain], names: dict[str, str], confidence: float) -> str:
    if not gains:
        return ""
    rows = [
        {"cell": names.get(gain.cell, gain.cell), "cases": gain.cases}
        | gain.table_columns("first stage", "reranked", confidence)
        for gain in gains
    ]
    how = (
        "Each reranking cell reranks every case's top_k candidates before its reader takes the first top_n. "
        "Its retrieval columns without a prefix measure that reranked ranking, the first_stage_* columns the "
        "ranking before it (in the full table, with their intervals). The difference is reranked minus first "
        "stage, paired case by case on every case with expected sources, with the interval and p-value of "
        "one sign-flip permutation test; hit rate@top_n counts the reader's top_n passages."
    )
    return (
        '<h2 id="reranking">What reranking changed</h2>'
        f'<p class="note">{escape(how)}</p>{gains_chart(gains, names, confidence)}' + rows_to_html_table(rows)
    )


def gains_chart(gains: Sequence[RerankGain], names: dict[str, str], confidence: float) -> str:
    """One panel per metric, one bar per reranking cell: its paired change (reranked minus first stage)
    with the interval as whiskers, so a bar whose whiskers cross zero reads as "not told apart" at a glance.
    A bar's direction says better or worse with the panel's "higher is better"."""
    cells = list(dict.fromkeys(gain.cell for gain in gains))
    metrics = list(dict.fromkeys((gain.label, gain.higher_is_better) for gain in gains))
    by_key = {(gain.cell, gain.label): gain for gain in gains}
    found = [[by_key.get((cell, label)) for cell in cells] for label, _ in metrics]
    chart = charts.bar_panels(
        [names.get(cell, cell) for cell in cells],
        [
            (f"{label} change", [g.difference if g else None for g in row], higher)
            for (label, higher), row in zip(metrics, found, strict=True)
        ],
        chart_id="rerank-gains",
        intervals=[[(g.low, g.high) if g else None for g in row] for row in found],
        cases=[[g.cases if g else None for g in row] for row in found],
        title="Reranked minus first stage, per reranking cell",
    )
    note = (
        f'<p class="note">Bars: reranked minus first stage; whiskers: its {confidence:.0%} paired interval. '
        "Whiskers that cross zero: not told apart.</p>"
    )
    return f'<div class="charts">{chart}</div>{note}'
