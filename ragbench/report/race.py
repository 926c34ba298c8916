"""The report's race section: how the race ended, the calls it used against a full evaluation, and the
elimination trace (every cell's outcome with the evidence that stopped it, every look). Escaped like every
table of the report."""

from __future__ import annotations

from html import escape

from ragbench.analysis.racing import STOP_REASONS, RaceTrace
from ragbench.report.pages import rows_to_html_table


def race_section(race: RaceTrace | None, names: dict[str, str]) -> str:
    if race is None:
        return ""
    settings = race.settings
    margin = f", equivalence margin ±{settings.margin:g}" if settings.margin is not None else ""
    budget = f", budget {settings.budget_calls} calls" if settings.budget_calls is not None else ""
    how = (
        f"Every surviving cell answered the next {settings.batch} cases of one seeded order (at most "
        f"{len(race.order)}{budget}{margin}); after each round each survivor was compared with the leader on "
        f"{race.metric_label} by the {race.test.replace('_', ' ')} test, Holm over the survivors at alpha "
        f"{settings.alpha:g} split evenly over {race.planned_looks} planned looks (Bonferroni), and the "
        "cells significantly behind stopped. Retrieval metrics cover every case in every cell. A stopped "
        "cell's scores rest on its own n: read them with their intervals."
    )
    ended = STOP_REASONS[race.stop] if race.stop else "not finished"
    return (
        '<h2 id="race">The race</h2>'
        f"<p><b>{escape(race.summary(names))}</b> Ended because {escape(ended)}.</p>"
        f'<p class="note">{escape(how)}</p>'
        "<h3>Cells</h3>"
        + rows_to_html_table(race.cell_rows(names))
        + "<h3>Looks</h3>"
        + rows_to_html_table(race.look_rows(names))
    )
