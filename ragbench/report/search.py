"""The report's search section: what each stage kept, dropped and cut and on what evidence (means, p and
the Holm level), then the search's estimate of the finalists beside their numbers on the held-out cases,
and how much the search flattered its winner. Escaped like every table of the report."""

from __future__ import annotations

from html import escape

from ragbench.analysis.search_findings import SearchFindings
from ragbench.report.model_search import trials_html
from ragbench.report.pages import rows_to_html_table


def search_section(search: SearchFindings | None, names: dict[str, str]) -> str:
    if search is None:
        return ""
    split = search.split
    how = (
        f"The seeded case order was cut in two: {len(split.search)} search case(s), on which every decision "
        f"below was made, and {len(split.held_out)} held-out case(s) (share {split.share:g}), which no "
        "decision saw. Each retrieval stage kept the tie set of its best key: every key the paired sign-flip "
        "test, Holm over the stage's comparisons, did not put significantly behind the best; the cells of "
        "the keys kept were raced on the end-to-end metric (the race's section), and the race's best "
        "finalists answered the held-out cases. The headline verdict on the search's metric comes from the "
        "held-out cases alone, with the search's winner as the best."
    )
    summary = "".join(f"<li>{escape(line)}</li>" for line in search.summary(names))
    confirmation = search.confirmation_rows(names)
    if search.trials is not None:  # a model-based search: its trials instead of stages
        body = '<h2 id="search">Search: model-based</h2>' + trials_html(search.trials, names)
    else:
        body = (
            '<h2 id="search">Search</h2>'
            f"<ul>{summary}</ul>"
            f'<p class="note">{escape(how)}</p>'
            "<h3>Stages</h3>" + rows_to_html_table(search.decision_rows())
        )
    return (
        body
        + (f"<ul>{summary}</ul>" if search.trials is not None else "")
        + (
            "<h3>Search estimate against the held-out cases</h3>" + rows_to_html_table(confirmation)
            if confirmation
            else "<p><b>Not confirmed</b>: search.holdout is 0.</p>"
        )
    )
