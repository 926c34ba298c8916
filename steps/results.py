from typing import Annotated

from zenml import log_metadata, step
from zenml.types import CSVString, HTMLString

import ragbench.generation
import ragbench.judge
import ragbench.report
import ragbench.results
from ragbench.generation import AnswerEvaluation, AnswerSet
from ragbench.judge import judge_warnings
from ragbench.report import html_page, html_section, rows_to_csv, rows_to_html_table
from ragbench.results import (
    WEAK_CORRECTNESS,
    CellResult,
    keyword_failure_rows,
    results_rows,
    weak_answer_rows,
)
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.report, ragbench.results, ragbench.generation, ragbench.judge))
def build_results_table(
    retrieval_results: list[CellResult],
    answer_sets: list[AnswerSet],
    answer_evaluations: list[AnswerEvaluation],
    title: str,
    notes: list[str],
    warnings: list[str],
) -> tuple[Annotated[CSVString, "results_csv"], Annotated[HTMLString, "results_html"]]:
    """One row per grid cell; also logged on the run so runs can be compared from metadata alone."""
    rows = results_rows(retrieval_results, answer_sets, answer_evaluations)
    judge_notes = judge_warnings(j for evaluation in answer_evaluations for j in evaluation.judgements)
    log_metadata({"results": {row["cell"]: row for row in rows}, "judge_warnings": judge_notes})
    sections = [rows_to_html_table(rows)]
    if answer_sets:
        sections += [
            html_section("Keyword test failures", keyword_failure_rows(answer_evaluations)),
            html_section(
                f"Answers the judge scored 1-{WEAK_CORRECTNESS} for correctness, or could not score",
                weak_answer_rows(answer_sets, answer_evaluations),
            ),
        ]
    page = html_page(title, sections, notes=notes, warnings=[*warnings, *judge_notes])
    return CSVString(rows_to_csv(rows)), HTMLString(page)
