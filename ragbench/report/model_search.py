"""The trials of the report's "Search: model-based" section: how the search ran (TPE over the grid's cells,
a cell budget, the pruner on paired per-case values), every trial in the order it was asked with its
cases, mean and whether it was pruned, and the winner. The confirmation on held-out cases follows them,
as for any search (`ragbench.report.search`). Escaped like every table of the report."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from ragbench.analysis.trials import ModelSearchTrace
from ragbench.report.pages import rows_to_html_table


def trials_html(search: ModelSearchTrace, names: Mapping[str, str]) -> str:
    """The trials' summary, how the search ran, and one row per trial: the body of the report's search
    section for a model-based search (`ragbench.report.search`), and the trials artifact's page."""
    how = (
        f"TPE (Optuna, seed {search.seed}) suggested cells of the grid, each axis a categorical parameter, "
        f"the first {search.startup_trials} at random, at most {search.max_cells} cells in all. Each trial "
        f"answered the {search.search_cases} search cases {search.batch} at a time in one seeded order, and "
        f"after each batch its per-case {search.metric_label} was compared, paired, with the best complete "
        "trial's on the same cases by the race's sign-flip test of the mean, at alpha split over a full "
        "trial's batches; a trial significantly behind was pruned. The winner is the best complete trial's "
        "mean on the search cases, which picked it: the best of many noisy means is flattered, so the "
        "held-out cases, which no trial saw, give its confirmed estimate."
    )
    return (
        f"<p><b>{escape(search.summary(names))}</b></p>"
        f'<p class="note">{escape(how)}</p>'
        "<h3>Trials</h3>" + rows_to_html_table(search.rows(names))
    )
