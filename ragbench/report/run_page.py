"""A run's report page and its terminal summary, drawn from its results table and per-case records
(presentation only: every number comes from `ragbench.analysis`)."""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.analysis.results import CaseRecord, CaseRecords, ResultsTable
from ragbench.grid.cell import CellSpec
from ragbench.report.page import render_report
from ragbench.report.view import CasePassage, CaseView, ReportInput
from ragbench.scoring.rubrics import Rubric, score_text
from ragbench.stats.formatting import interval_text
from ragbench.stats.intervals import MIN_CASES, too_few_text


def run_report(table: ResultsTable, records: CaseRecords, rubrics: Sequence[Rubric]) -> str:
    """The self-contained HTML report of a run."""
    labels = {row["cell"]: row["label"] for row in table.rows}
    answered = any("latency_p95_s" in row for row in table.rows)
    return render_report(
        ReportInput(
            title=table.title,
            notes=[*table.notes, *([table.code.line()] if table.code is not None else [])],
            warnings=table.warnings,
            axes=CellSpec.axes(),
            varying_axes=table.varying_axes,
            rows=table.rows,
            headline=table.headline,
            latency_column="latency_p95_s" if answered else None,
            cost_column="cost_usd" if answered else None,
            cases=[case_view(record, rubrics) for record in records.records],
            keyword_failures=[row | {"cell": labels[row["cell"]]} for row in keyword_failure_rows(records)],
            weak_answers=[row | {"cell": labels[row["cell"]]} for row in weak_answer_rows(records, rubrics)],
            verdicts=table.verdicts,
            rerank_gains=table.rerank_gains,
            rewrite_gains=table.rewrite_gains,
            confidence=table.confidence,
            judge_reliability=table.judge_reliability,
            judge_cards=table.judge_cards,
            judge_alignments=table.judge_alignments,
            case_type_rows=table.case_type_rows,
            turn_mode_rows=table.turn_mode_rows,
            pairwise=table.pairwise,
            race=table.race,
            search=table.search,
            references=table.references.rows() if table.references is not None else [],
            label_correction=table.label_correction,
            judge_only_verdicts=table.judge_only_verdicts,
        )
    )


def summary_rows(table: ResultsTable) -> list[dict]:
    """The terminal's view of a run: each cell's label, headline scores, latency, cost, reader and judge
    failures, reuse.

    A headline score shows its interval and, where the row has it, the number of cases behind it,
    ``0.33 [0.00, 1.00] n=3``: with a small sample a rate of 1.00 may rest on a single case.
    """
    failures = ["reader_failures", "judge_parse_failures"]  # always shown: a failure is never silent
    headline = [m.column for m in table.headline]
    columns = [*headline, "latency_p95_s", "cost_usd", *failures, "judge_check", "search", "race"]
    rows = []
    for row in table.rows:
        kept = {"cell": row["label"]}
        for column in (c for c in columns if c in row):
            value, tested = row[column], row.get(f"{column}_cases")
            if column not in headline or value is None:
                kept[column] = value
                continue
            low, high = row.get(f"{column}_low"), row.get(f"{column}_high")
            if low is None and tested is not None and tested < MIN_CASES:
                kept[column] = f"{value:.2f} {too_few_text(tested)}"
                continue
            text = f"{value:.2f}" + (f" {interval_text(low, high, digits=2)}" if low is not None else "")
            kept[column] = text + (f" n={tested}" if tested is not None else "")
            if (corrected := row.get(f"{column}_corrected")) is not None:  # the number decided on
                low, high = row[f"{column}_corrected_low"], row[f"{column}_corrected_high"]
                interval = interval_text(low, high, digits=2)
                kept[column] = (
                    f"{corrected:.2f} {interval} label-corrected ({row[f'{column}_labels']} "
                    f"labels; judge alone {value:.2f})"
                )
        rows.append(kept | {"reused": "yes" if row["reused"] else ""})
    return rows


def keyword_failure_rows(records: CaseRecords) -> list[dict]:
    """Every failed keyword check with the word that decided it and the answer, for the report."""
    return [
        {"cell": r.cell, "case": f.case_id, "suite": f.suite, "word": f.word, "answer": f.answer}
        for r in records.records
        for f in r.keyword_failures
    ]


def weak_answer_rows(records: CaseRecords, rubrics: Sequence[Rubric]) -> list[dict]:
    """Answers scored at or below a criterion's `weak_at_most`, with the judge's reasoning, or that the judge
    could not score on some rubric, with the error."""
    weak_at = [(rubric, c) for rubric in rubrics for c in rubric.criteria if c.weak_at_most is not None]
    rows = []
    for record in records.records:
        j = record.judgement
        if j is None:
            continue
        weak = [
            (rubric, c)
            for rubric, c in weak_at
            if c.name in j.scores and j.scores[c.name] <= (c.weak_at_most or 0)
        ]
        for rubric, criterion in weak:
            rows.append(
                {
                    "cell": record.cell,
                    "case": j.case_id,
                    "score": f"{criterion.name} {j.scores[criterion.name]}",
                    "judge_reasoning": j.reasoning.get(rubric.name),
                    "answer": record.answer.answer,
                }
            )
        if j.errors:
            rows.append(
                {
                    "cell": record.cell,
                    "case": j.case_id,
                    "score": None,
                    "judge_reasoning": "; ".join(f"{name}: {error}" for name, error in j.errors.items()),
                    "answer": record.answer.answer,
                }
            )
    return rows


def case_view(record: CaseRecord, rubrics: Sequence[Rubric]) -> CaseView:
    judgement = record.judgement
    scores, reasoning = {}, []
    if judgement is not None:
        for rubric in rubrics:
            for criterion in rubric.criteria:
                if (score := judgement.scores.get(criterion.name)) is not None:
                    scores[criterion.name] = score_text(criterion, score)
            if text := judgement.reasoning.get(rubric.name) or judgement.errors.get(rubric.name):
                reasoning.append(f"{rubric.name}: {text}")
        judged = {rubric.name for rubric in rubrics}
        rubric_columns = {criterion.column for rubric in rubrics for criterion in rubric.criteria}
        scores |= {
            column: f"{value:.2f}"
            for column, value in judgement.values.items()
            if column not in rubric_columns
        }
        reasoning += [f"{name}: {error}" for name, error in judgement.errors.items() if name not in judged]
        reasoning += [f"{name}: skipped, {why}" for name, why in judgement.skipped.items()]
    return CaseView(
        cell=record.cell,
        case_id=record.case_id,
        question=record.question,
        history=[turn.model_dump(mode="json") for turn in record.answer.history],
        searched=record.answer.searched,
        answer=record.answer.answer,
        error=record.answer.error,
        passages=[
            CasePassage(source=c.source, text=c.text, retrieval_rank=c.retrieval_rank)
            for c in record.answer.contexts
        ],
        keyword_failures=[f"{f.suite}: {f.word}" for f in record.keyword_failures],
        scores=scores,
        judge_reasoning="\n".join(reasoning) or None,
        scorer_details={
            name: scorer_detail_lines(details)
            for name, details in (judgement.details if judgement else {}).items()
        },
    )


def scorer_detail_lines(details: dict) -> list[str]:
    """A scorer's per-case details as lines people read, whatever the scorer (a list of records becomes one
    line per record: its statement, verdict and reason)."""
    lines = []
    for key, value in details.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            lines += [f"{key}: " + "; ".join(f"{k} {v}" for k, v in item.items()) for item in value]
        else:
            lines.append(f"{key}: {value}")
    return lines
