"""`run.py review`: what the review page shows, taken from a run in the ZenML store, and the labels it
writes, published back as a versioned artifact (`review_labels`) a later run can be given.

A benchmark run gives its answers (case records), the eval cases (reference answers) and each cell's
judge; a testset run gives the generated set's kept and rejected candidates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbench.review.labels import CANDIDATE_RUBRIC, ReviewLabels
from ragbench.review.queue import ReviewItem, answer_items, candidate_item
from ragbench.runs.compare import config_tag
from ragbench.runs.names import (
    BENCHMARK_PIPELINE,
    EVAL_CASES_STEP,
    EVAL_SET_STEP,
    RESOLVED_CASES_STEP,
    RESULTS_STEP,
    REVIEW_LABELS_ARTIFACT,
    TESTSET_PIPELINE,
)
from ragbench.scoring.rubrics import Rubric, checked_rubric
from ragbench.store import given_store


class ReviewSourceError(ValueError):
    """The run to review is missing, unfinished, of another kind, or has nothing to review."""


def _run(run_name: str | None, pipeline: str, config_name: str | None = None) -> Any:
    """`run_name`, or the newest completed run of `pipeline` (of the config `config_name`, if given)."""
    store = given_store()
    if run_name is None:
        tags = [f"equals:{config_tag(config_name)}"] if config_name else []
        finished = [run for run in store.runs(pipeline, tags, size=20) if run.status.value == "completed"]
        if not finished:
            of = f" of config {config_name!r}" if config_name else ""
            raise ReviewSourceError(
                f"no completed {pipeline} run{of} to review: run one first, or name --run"
            )
        return finished[0]
    try:
        found = store.run(run_name)
    except KeyError:
        raise ReviewSourceError(f"no run named {run_name!r}") from None
    if found.pipeline is None or found.pipeline.name != pipeline or found.status.value != "completed":
        raise ReviewSourceError(f"{run_name} is not a completed {pipeline} run")
    return found


def answer_items_of_run(
    run_name: str | None, rubric_name: str | None, config_name: str | None = None
) -> tuple[str, list[ReviewItem]]:
    """`run_name`'s answers (default: the newest completed benchmark run of `config_name`) as review
    items on `rubric_name`'s criteria (default: the rubric the judge is checked on, e.g. correctness)."""
    run = _run(run_name, BENCHMARK_PIPELINE, config_name)
    results = run.steps[RESULTS_STEP]
    table = results.outputs["results"][0].load()
    records = results.outputs["case_records"][0].load().records
    resolved = run.steps.get(RESOLVED_CASES_STEP)  # runs before references were fetched have none
    step, output = (
        (resolved, "eval_cases_resolved") if resolved else (run.steps[EVAL_CASES_STEP], "eval_cases")
    )
    cases = step.outputs[output][0].load().cases
    rubrics: dict[str, Rubric] = {}
    for step in run.steps.values():
        if "judgements" in step.outputs:
            rubrics |= {r.name: r for r in step.outputs["judgements"][0].load().rubrics}
    rubric = rubrics.get(rubric_name) if rubric_name else checked_rubric(rubrics.values())
    if rubric is None:
        named = f"rubric {rubric_name!r}" if rubric_name else "a rubric the judge is checked on"
        raise ReviewSourceError(
            f"{run.name} has no {named} (its rubrics: {', '.join(rubrics) or 'none'}): review a run that "
            "judged with it, or name one with --rubric"
        )
    judge_of_cell = {row["cell"]: str(row["judge"]) for row in table.rows if row.get("judge")}
    items = answer_items(records, cases, judge_of_cell, rubric)
    if not items:
        raise ReviewSourceError(f"{run.name} has no answer that rubric {rubric.name} grades")
    return run.name, items


def candidate_items_of_run(run_name: str | None) -> tuple[str, list[ReviewItem]]:
    """A testset run's kept and rejected candidates, to keep or reject."""
    run = _run(run_name, TESTSET_PIPELINE)
    eval_set = next(iter(run.steps[EVAL_SET_STEP].outputs.values()))[0].load()
    items = []
    for case, kept in [(c, True) for c in eval_set.cases] + [(c, False) for c in eval_set.rejected]:
        provenance = case.provenance
        chunk = provenance.source_chunks[0] if provenance and provenance.source_chunks else None
        because = "; ".join(provenance.rejected_because) if provenance else ""
        items.append(
            candidate_item(
                case,
                chunk.text if chunk else "",
                chunk.source if chunk else "(no source passage)",
                {"filters": kept},
                {"filters": "kept" if kept else f"rejected: {because or 'no reason recorded'}"},
            )
        )
    if not items:
        raise ReviewSourceError(f"{run.name} generated no candidate")
    return run.name, items


def testset_labels_jsonl(labels: ReviewLabels, items: Sequence[ReviewItem]) -> str:
    """The labels of the reviewed run's candidates (`items`) in the `testset.labels` format the filters are
    measured against. Labels of other runs' candidates are left out: a regenerated set may give an id
    another question, and the format holds one label per id."""
    reviewed = {item.key for item in items}
    lines = [
        json.dumps(
            {
                "id": label.case_id,
                "question": label.item.question,
                "human_keep": bool(label.value),
                "reason": label.note or ("kept on review" if label.value else "rejected on review"),
            },
            ensure_ascii=False,
        )
        for label in labels.of(CANDIDATE_RUBRIC, CANDIDATE_RUBRIC, "candidate")
        if "|".join(label.key) in reviewed
    ]
    return "".join(line + "\n" for line in lines)


def publish_labels(labels: ReviewLabels) -> str | None:
    """Store the current labels as a new version of the `review_labels` artifact, unless the newest
    version already holds them; returns "name:version", or None when there is no label."""
    if not labels.labels:
        return None
    current = ReviewLabels(labels=labels.current())
    version = given_store().keep(
        REVIEW_LABELS_ARTIFACT, current, "labels_sha256", current.digest, {"labels": len(current.labels)}
    )
    return f"{REVIEW_LABELS_ARTIFACT}:{version.version}"


def write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path
