"""The report's query-rewriting section: each rewriting cell against its twin that searches the question as
asked, per retrieval metric, on the follow-ups and the single questions apart, with the paired difference,
its interval and p-value. Escaped like every table of the report."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ragbench.analysis.rewriting import RewriteGain
from ragbench.report.pages import rows_to_html_table


def rewriting_section(gains: Sequence[RewriteGain], names: dict[str, str], confidence: float) -> str:
    if not gains:
        return ""
    rows = [
        {
            "cell": names.get(gain.cell, gain.cell),
            "against": names.get(gain.against, gain.against),
            "cases": f"{gain.cases_group} ({gain.cases})",
        }
        | gain.table_columns("as asked", "rewritten", confidence)
        for gain in gains
    ]
    how = (
        "Each cell that rewrites its queries (query_rewrite) against the same cell searching every "
        "question as asked, on the follow-ups (a conversation before the question) and the single "
        "questions apart: the difference is rewritten minus as asked, paired case by case, with the "
        "interval and p-value of one sign-flip permutation test. A mean over the whole eval set can hide a "
        "change confined to a few follow-ups, or a cost to the single questions."
    )
    return f'<h2 id="rewriting">What query rewriting changed</h2><p class="note">{escape(how)}</p>' + (
        rows_to_html_table(rows)
    )
