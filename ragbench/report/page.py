"""The one-page HTML report of a run: best cells, charts, scores by case type, the full table and a
per-question view.

Every value is escaped because it may come from documents, questions, answers, judges or config.
"""

from __future__ import annotations

from pathlib import Path

from ragbench.report.cases import case_section, failure_sections, pairwise_section
from ragbench.report.corrected import label_correction_section
from ragbench.report.effects import (
    approximate_rows,
    axis_effect_section,
    full_table_section,
    index_section,
    tradeoff_section,
)
from ragbench.report.pages import document, page_header, rows_to_html_table
from ragbench.report.race import race_section
from ragbench.report.reranking import reranking_section
from ragbench.report.rewriting import rewriting_section
from ragbench.report.search import search_section
from ragbench.report.sections import (
    bar_chart_section,
    best_section,
    case_type_section,
    headline_section,
    judge_section,
    significance_section,
    turn_mode_section,
)
from ragbench.report.view import ReportInput

# ---------------------------------------------------------------------------------------------------
# The one-page report of a run


# Retrieval metrics keep their case count in one shared column instead of `<column>_cases`: each is
# computed over the same cases, those with expected sources.


def _navigation(report: ReportInput) -> str:
    links = [
        ("best", "Best"),
        *([("search", "Search")] if report.search else []),
        *([("race", "The race")] if report.race else []),
        ("significance", "Really better?"),
        *([("reranking", "Reranking")] if report.rerank_gains else []),
        *([("rewriting", "Query rewriting")] if report.rewrite_gains else []),
        *([("judge", "Judge")] if report.judge_reliability or report.judge_cards else []),
        *([("pairwise", "Pairwise")] if report.pairwise else []),
        ("headline", "Headline table"),
        ("charts", "Charts"),
        *([("case-types", "By case type")] if report.case_type_rows else []),
        *([("turn-modes", "By turn mode")] if report.turn_mode_rows else []),
        ("axes", "Settings"),
        ("tradeoffs", "Trade-offs"),
        *([("indexes", "Index speed vs recall")] if approximate_rows(report) else []),
        ("full", "All results"),
        *([("references", "References")] if report.references else []),
    ]
    if report.cases:
        links.append(("cases", "Answers side by side"))
    if report.cases or report.keyword_failures or report.weak_answers:
        links.append(("failures", "Failures"))
    return "<nav>" + "".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in links) + "</nav>"


def references_section(report: ReportInput) -> str:
    """What this run fetched for the cases whose reference is computed at run time, and from where."""
    if not report.references:
        return ""
    return (
        '<h2 id="references">References fetched at run time</h2><p class="note">Each was fetched once by '
        "this run, before any answer; a case whose fetch failed is scored on nothing that needs it.</p>"
        + rows_to_html_table(report.references)
    )


def script(name: str) -> str:
    """A script the report inlines (kept as package data, `ragbench/report/*.js`: JavaScript, not strings)."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


def render_report(report: ReportInput) -> str:
    """One self-contained HTML page for a run: no network, charts as inline SVG, tables that read
    without JavaScript, and a side-by-side answer view when the run has answers."""
    body = [
        page_header(report.title, report.notes, report.warnings),
        _navigation(report),
        best_section(report),
        search_section(report.search, {row["cell"]: row["label"] for row in report.rows}),
        race_section(report.race, {row["cell"]: row["label"] for row in report.rows}),
        significance_section(report),
        reranking_section(
            report.rerank_gains, {row["cell"]: row["label"] for row in report.rows}, report.confidence
        ),
        rewriting_section(
            report.rewrite_gains, {row["cell"]: row["label"] for row in report.rows}, report.confidence
        ),
        label_correction_section(report),
        judge_section(report),
        pairwise_section(report),
        headline_section(report),
        bar_chart_section(report),
        case_type_section(report),
        turn_mode_section(report),
        axis_effect_section(report),
        tradeoff_section(report),
        index_section(report),
        full_table_section(report),
        references_section(report),
        case_section(report),
        failure_sections(report),
    ]
    scripts = [script("sort.js"), script("cases.js")] if report.cases else [script("sort.js")]
    return document(report.title, "".join(body), scripts)
