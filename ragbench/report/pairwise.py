"""The pairwise verdicts in the report: win rate with its interval, sign test, flip share, and each case's
verdicts in both orders."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ragbench.scoring.pairwise import PairwiseCase, PairwiseResult, Side, p_text, rate_text, share


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table from cells that are already HTML (every caller escapes what it puts in)."""
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict_cell(side: Side | None, result: PairwiseResult) -> str:
    if side is None:
        return "-"
    return escape({"candidate": result.candidate, "baseline": result.baseline, "tie": "tie"}[side])


def _details(case: PairwiseCase, result: PairwiseResult) -> str:
    """The question, both answers and both reasonings, folded away."""
    parts = [
        f"<p><b>Question</b>: {escape(case.question)}</p>",
        f"<p><b>{escape(result.candidate)}</b>: {escape(case.candidate_answer)}</p>",
        f"<p><b>{escape(result.baseline)}</b>: {escape(case.baseline_answer)}</p>",
    ]
    for label, reasoning in (
        ("first order", case.reasoning_first_order),
        ("swapped order", case.reasoning_swapped_order),
    ):
        if reasoning is not None:
            parts.append(f"<p><b>Judge, {label}</b>: {escape(reasoning)}</p>")
    return f"<details><summary>show</summary>{''.join(parts)}</details>"


def pairwise_html(result: PairwiseResult) -> str:
    """An HTML fragment for the report: heading, how to read it, the summary and the per-case table.
    Every name and text in it (system names, criterion, judge, answers, reasoning, errors) is escaped."""
    candidate, baseline = escape(result.candidate), escape(result.baseline)
    note = (
        f'<p class="note">Judge {escape(result.judge)} saw each case\'s two answers as Answer 1 and '
        f"Answer 2, without system names, twice: once in a seeded random order and once swapped. A case "
        f"is a <b>win</b> for {candidate} only if the judge preferred it in both orders, a <b>loss</b> "
        f"only if it preferred {baseline} in both; anything else is a <b>tie</b>, including verdicts that "
        f"followed the position (<b>flipped</b>). Win rate = wins / (wins + losses), ties left out, with "
        f"its {result.confidence:.0%} Wilson interval; p is the two-sided exact sign test of wins against "
        f"losses: a small p means the preference is unlikely to be chance. A high flip share means the "
        f"judge reads positions rather than answers: trust its verdicts less. Failed judge calls are not "
        f"scored. Criterion: <i>{escape(result.criterion)}</i></p>"
    )
    summary = _table(
        [
            "wins",
            "ties",
            "losses",
            "win rate [interval]",
            "sign test p",
            "tie share",
            "flip share",
            "&quot;Answer 1&quot; chosen",
            "failures",
            "skipped",
        ],
        [
            [
                str(result.wins),
                str(result.ties),
                str(result.losses),
                escape(rate_text(result)),
                p_text(result.sign_test_p),
                share(result.tie_share),
                share(result.flip_share),
                share(result.first_position_share),
                str(result.failures),
                str(result.skipped),
            ]
        ],
    )
    rows = [
        [
            escape(case.case_id),
            escape(case.outcome or "failed"),
            candidate if case.candidate_first else baseline,
            _verdict_cell(case.verdict_first_order, result),
            _verdict_cell(case.verdict_swapped_order, result),
            "-" if case.flipped is None else ("yes" if case.flipped else "no"),
            escape(case.error or ""),
            _details(case, result),
        ]
        for case in result.cases
    ]
    cases = _table(
        [
            "case",
            "outcome",
            "Answer 1 (first order)",
            "preferred, first order",
            "preferred, swapped",
            "flipped",
            "error",
            "details",
        ],
        rows,
    )
    return (
        f'<section class="pairwise"><h3>Pairwise: {candidate} vs {baseline}</h3>{note}'
        f'<div class="scroll">{summary}</div><div class="scroll">{cases}</div></section>'
    )
