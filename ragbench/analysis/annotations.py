"""Scores back to the traces they came from: every verdict on a logged answer (a `traces` system's cell) as
one annotation keyed by the trace's root span, so a person sees the scores beside the trace in the tool
that holds it. For a file source they are a JSON Lines file, one annotation a line: trace id, span id,
metric, score, label, explanation, and which cell (system and judge) gave it."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ragbench.analysis.results import CaseRecords
from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.rubrics import Rubric


class Annotation(BaseModel):
    """One score of one span: `score` a number (None for a keyword test, whose `label` says it failed)."""

    trace_id: str
    span_id: str
    name: str
    score: float | None
    label: str | None = None
    explanation: str | None = None
    cell: str
    annotator_kind: str = "LLM"


class TraceAnnotations(BaseModel):
    """Every annotation of a run's logged answers."""

    annotations: list[Annotation]

    def jsonl(self) -> str:
        return "".join(
            json.dumps(a.model_dump(mode="json"), ensure_ascii=False) + "\n" for a in self.annotations
        )

    def phoenix_data(self) -> list[dict]:
        """As Phoenix's `SpanAnnotationData`: the cell is the annotation's identifier, so two judges' scores
        of one metric stand side by side on a span, and a run made again updates its own instead of adding
        copies."""
        return [
            {
                "span_id": a.span_id,
                "name": a.name,
                "annotator_kind": a.annotator_kind,
                "identifier": f"ragbench:{a.cell}",
                "result": {"score": a.score, "label": a.label, "explanation": a.explanation},
                "metadata": {"trace_id": a.trace_id, "cell": a.cell, "source": "ragbench"},
            }
            for a in self.annotations
        ]

    def write(self, path: str | Path) -> None:
        """Written whole or not at all (a temporary file renamed over it), so a crash never leaves half."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".tmp", delete=False) as file:
            file.write(self.jsonl())
        os.replace(file.name, target)


def trace_annotations(
    records: CaseRecords, cases: Sequence[EvalCase], cells: Sequence[str], rubrics: Sequence[Rubric]
) -> TraceAnnotations:
    """The annotations of the records of `cells` (the `traces` systems' cells) on cases read from traces:
    each rubric criterion's score with its rubric's reasoning (a pass/fail criterion labelled so), each
    scorer's metric value, and each failed keyword test (label `fail`)."""
    logged = {case.id: case.logged for case in cases if case.logged is not None}
    rubric_of = {criterion.name: rubric for rubric in rubrics for criterion in rubric.criteria}
    annotations = []
    for record in records.records:
        trace = logged.get(record.case_id)
        if record.cell not in cells or trace is None:
            continue
        keyed = {"trace_id": trace.trace_id, "span_id": trace.span_id, "cell": record.cell}
        judgement = record.judgement
        if judgement is not None:
            for criterion, score in judgement.scores.items():
                rubric = rubric_of.get(criterion)
                binary = rubric is not None and any(
                    c.name == criterion and c.scale == "pass_fail" for c in rubric.criteria
                )
                annotations.append(
                    Annotation(
                        name=criterion,
                        score=float(score),
                        label=("pass" if score else "fail") if binary else None,
                        explanation=judgement.reasoning.get(rubric.name) if rubric is not None else None,
                        **keyed,
                    )
                )
            for column, value in judgement.values.items():
                annotations.append(Annotation(name=column, score=float(value), **keyed))
        for failure in record.keyword_failures:
            annotations.append(
                Annotation(
                    name=f"keyword:{failure.suite}",
                    score=None,
                    label="fail",
                    explanation=f"decided by {failure.word!r}",
                    annotator_kind="CODE",
                    **keyed,
                )
            )
    return TraceAnnotations(annotations=annotations)
