"""A run's terminal summary, beside its HTML report (`run_page`): the cells with their headline scores,
then the race, the verdicts, the label correction, what reranking and query rewriting changed, the judge's
reliability, cards and alignment, the pairwise comparisons, notes and warnings (presentation only: every
number comes from the results table)."""

from __future__ import annotations

from ragbench.analysis.judge_card import card_lines
from ragbench.analysis.results import ResultsTable
from ragbench.report.corrected import label_correction_lines
from ragbench.report.pages import rows_to_text
from ragbench.report.run_page import summary_rows


def run_summary(table: ResultsTable, folder: str) -> str:
    """What `run.py` prints of a finished run before its gate: `folder` holds its report files."""
    names = {row["cell"]: row["label"] for row in table.rows}
    lines = ["", rows_to_text(summary_rows(table)), f"(all columns: {folder}/results.csv)"]
    if table.search is not None:
        lines.append("\n" + "\n".join(table.search.summary(names)))
    if table.race is not None:
        lines.append("\n" + table.race.summary(names))
    if table.verdicts:
        lines.append(
            "\nIs the best really better? (paired tests on the same cases, Holm-corrected; intervals "
            f"adjusted for the number of comparisons, then the unadjusted {table.confidence:.0%} one)"
        )
        lines += [f"  {verdict.sentence()}" for verdict in table.verdicts]
    lines += label_correction_lines(table.label_correction, table.configured_metrics, names)
    if table.rerank_gains:
        lines.append(
            "\nWhat reranking changed (the ranking the reader reads against the first stage, paired on the "
            f"same cases; {table.confidence:.0%} interval of the difference):"
        )
        lines += [f"  {names[gain.cell]}: {gain.text()}" for gain in table.rerank_gains]
    if table.rewrite_gains:
        lines.append(
            "\nWhat query rewriting changed (each rewriting cell against the same cell searching the "
            f"question as asked, paired on the same cases; {table.confidence:.0%} interval of the "
            "difference):"
        )
        lines += [f"  {names[rewrite.cell]}: {rewrite.text()}" for rewrite in table.rewrite_gains]
    if table.judge_reliability is not None:
        lines += table.judge_reliability.lines()
    lines += ["\n" + "\n".join(card_lines(card)) for card in table.judge_cards]
    lines += ["\n" + "\n".join(alignment.lines()) for alignment in table.judge_alignments]
    lines += [comparison.text() for comparison in table.pairwise]
    lines += table.notes
    lines += [f"WARNING: {warning}" for warning in table.warnings]
    return "\n".join(lines)
