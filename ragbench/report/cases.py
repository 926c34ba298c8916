"""The report's case-level sections: answers of two cells side by side (data in a JSON block the inlined
script renders), keyword failures and weak answers, and the pairwise verdicts."""

from __future__ import annotations

import json
from html import escape

from ragbench.report.pages import html_section
from ragbench.report.pairwise import pairwise_html
from ragbench.report.sections import (
    first_metric_with_values,
    ranked_groups,
    row_label,
)
from ragbench.report.view import CaseView, ReportInput


def json_for_script(data: object) -> str:
    """JSON that cannot end its <script> element or start markup, whatever text it carries."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def case_data(cases: list[CaseView]) -> list[dict]:
    """Cases in first-seen order, each with every cell's answer; keyword failures sorted so that two
    cells failing the same checks compare equal in the browser. A conversation with generated turns is
    shown per answer (each cell's reader wrote its own); the case's shows those turns without text."""
    by_case: dict[str, dict] = {}
    for view in cases:
        given = [turn | {"content": ""} if turn.get("generate") else turn for turn in view.history]
        case = by_case.setdefault(
            view.case_id,
            {"id": view.case_id, "question": view.question, "history": given, "answers": []},
        )
        case["answers"].append(
            {
                "cell": view.cell,
                **({"history": view.history} if given != view.history else {}),
                "answer": view.answer,
                "searched": view.searched,
                "error": view.error,
                "scores": view.scores,
                "keyword_failures": sorted(view.keyword_failures),
                "judge_reasoning": view.judge_reasoning,
                "scorer_details": view.scorer_details,
                "passages": [
                    {"source": p.source, "text": p.text, "rank": p.retrieval_rank} for p in view.passages
                ],
            }
        )
    return list(by_case.values())


def default_pair(report: ReportInput, cells: list[str]) -> tuple[str, str]:
    """Open the comparison on the best cell and its runner-up on the first headline score."""
    metric = first_metric_with_values(report)
    ranked = []
    if metric is not None:
        ranked = [
            str(row.get("cell"))
            for group in ranked_groups(report.rows, metric.column, metric.higher_is_better)
            for _, row in group
        ]
    order = [cell for cell in ranked if cell in cells] + [cell for cell in cells if cell not in ranked]
    return order[0], order[1] if len(order) > 1 else order[0]


def case_section(report: ReportInput) -> str:
    if not report.cases:
        return ""
    labels = {str(row.get("cell")): row_label(row) for row in report.rows}
    answered = dict.fromkeys(view.cell for view in report.cases)
    cells = [cell for cell in labels if cell in answered] + [cell for cell in answered if cell not in labels]
    left, right = default_pair(report, cells)

    def options(selected: str) -> str:
        return "".join(
            f'<option value="{escape(cell)}"{" selected" if cell == selected else ""}>'
            f"{escape(labels.get(cell, cell))}</option>"
            for cell in cells
        )

    return (
        '<h2 id="cases">Answers side by side</h2>'
        '<p class="note">Pick two configurations to compare their answer to every question.</p>'
        '<div class="controls">'
        f'<label>Left <select id="cell-a">{options(left)}</select></label>'
        f'<label>Right <select id="cell-b">{options(right)}</select></label>'
        '<label><input type="checkbox" id="only-differ"> only where they differ</label>'
        '<span id="case-count" class="note"></span></div>'
        '<noscript><p class="note">This view needs JavaScript; the tables and charts above do not.</p>'
        '</noscript><div id="case-list"></div><script type="application/json" id="case-data">'
        f"{json_for_script(case_data(report.cases))}</script>"
    )


def failure_sections(report: ReportInput) -> str:
    if not (report.cases or report.keyword_failures or report.weak_answers):
        return ""
    return '<div id="failures"></div>' + "".join(
        [
            html_section("Keyword test failures", report.keyword_failures),
            html_section("Weak answers: low scores, or the judge could not score", report.weak_answers),
        ]
    )


def pairwise_section(report: ReportInput) -> str:
    """Each blinded pairwise comparison: which answer set the judge preferred, case by case."""
    if not report.pairwise:
        return ""
    return '<h2 id="pairwise">Pairwise: which answers the judge preferred</h2>' + "".join(
        pairwise_html(result) for result in report.pairwise
    )
