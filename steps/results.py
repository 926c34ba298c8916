from typing import Annotated

from zenml import log_metadata, step
from zenml.types import CSVString, HTMLString

import ragbench.report
import ragbench.results
from ragbench.report import html_page, rows_to_csv, rows_to_html_table
from ragbench.results import CellResult
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.report, ragbench.results))
def build_results_table(
    cell_results: list[CellResult], title: str
) -> tuple[Annotated[CSVString, "results_csv"], Annotated[HTMLString, "results_html"]]:
    """One row per grid cell; also logged on the run so runs can be compared from metadata alone."""
    rows = [result.row() for result in cell_results]
    log_metadata({"results": {row["cell"]: row for row in rows}})
    page = html_page(title, [rows_to_html_table(rows)])
    return CSVString(rows_to_csv(rows)), HTMLString(page)
