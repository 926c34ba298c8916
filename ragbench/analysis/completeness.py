"""Whether a cell did all its work: what the run's spend cap kept it from doing (`ragbench.llm.budget`).
A cell it stopped is incomplete (`CellResults.incomplete`), so the run fails its gate and never becomes a
baseline, and the rerun with a higher cap pays only for what is missing."""

from __future__ import annotations

from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.llm.budget import is_budget_refusal
from ragbench.retrieval.rewrite import RewriteStats
from ragbench.scoring.cells import JudgeResult


def stopped_by_budget(
    cell: CellSpec, rewrite: RewriteStats | None, answers: AnswerSet | None, judged: JudgeResult | None
) -> str:
    """The calls the cap refused in this cell, as a phrase ("2 judge verdict(s)"); "" when none. A refused
    query rewrite counts too: its case was searched as asked, so the cell's retrieval is not the rewrite's."""
    answer_errors = [a.error or "" for a in answers.answers] if answers is not None else []
    verdict_errors = [e for j in judged.judgements for e in j.errors.values()] if judged else []
    errors = {
        "call(s) to the system" if cell.external else "reader call(s)": answer_errors,
        "judge verdict(s)": verdict_errors,
    }
    refused = {what: sum(is_budget_refusal(error) for error in found) for what, found in errors.items()}
    refused = {"query rewrite(s)": rewrite.refused if rewrite is not None else 0} | refused
    return " and ".join(f"{count} {what}" for what, count in refused.items() if count)
