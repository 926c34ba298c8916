"""A judge aligned by a person's labels: their graded answers shown as few-shot examples, and the
agreement before and after measured on labels the aligned judge did not see.

Examples are chosen per rubric: the labelled answers where the judge disagreed with the person most come
first (by the verdict recorded when the person labelled), then the others, in a seeded order. A call never
shows an example of the case it grades, so the aligned judge's verdict on a labelled answer is a held-out
(leave-one-case-out) prediction: that is what "after" is measured on. An aligned judge is a different
judge: the examples are part of its rubric, hence of its prompts and cache keys, and it is named aligned.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragbench.hashing import seeded_rank
from ragbench.llm.client import LLMClient
from ragbench.review.agreement import Agreement, KappaChange, agreement, kappa_change
from ragbench.review.labels import Label, ReviewLabels
from ragbench.scoring.judge import judge_answers
from ragbench.scoring.rubrics import Rubric, RubricExample


def aligned_name(judge: str, examples: int) -> str:
    return f"{judge} aligned ({examples} examples)" if examples else judge


def aligned_judge(judge: str | None, alignments: Sequence[JudgeAlignment]) -> dict[str, str]:
    """A results row's judge column renamed when that judge was aligned (nothing to change otherwise)."""
    found = next((a for a in alignments if a.judge == judge and a.examples), None)
    return {} if found is None else {"judge": aligned_name(found.judge, found.examples)}


def _answers(labels: ReviewLabels, rubric: Rubric) -> dict[tuple[str, str], dict[str, Label]]:
    """The labelled answers of `rubric`: (case, answer hash) -> criterion -> label."""
    found: dict[tuple[str, str], dict[str, Label]] = {}
    for criterion in rubric.criteria:
        for label in labels.of(rubric.name, criterion.name):
            found.setdefault((label.case_id, label.answer_sha), {})[criterion.name] = label
    return found


def _miss(judge: str, labelled: dict[str, Label]) -> int:
    """How far `judge` (by its recorded verdicts) was from the person on one answer's criteria."""
    return sum(
        abs(label.value - label.judge_verdicts[judge])
        for label in labelled.values()
        if judge in label.judge_verdicts
    )


def aligned_rubric(rubric: Rubric, labels: ReviewLabels, judge: str, examples: int) -> Rubric:
    """`rubric` with the person's graded answers as examples, disagreements with `judge` first."""
    answers = _answers(labels, rubric)
    if not examples or not answers:
        return rubric
    ranked = sorted(answers.items(), key=lambda kv: (-_miss(judge, kv[1]), seeded_rank(0, "|".join(kv[0]))))
    return rubric.model_copy(
        update={
            "examples": tuple(
                RubricExample(
                    case_id=case_id,
                    question=(item := next(iter(labelled.values())).item).question,
                    reference_answer=item.reference_answer,
                    answer=item.answer,
                    scores={name: label.value for name, label in labelled.items()},
                    note="; ".join(label.note for label in labelled.values() if label.note),
                )
                for (case_id, _), labelled in ranked
            ),
            "examples_shown": examples,
        }
    )


class LabelledVerdict(BaseModel):
    """One labelled answer's scores: the person's, the judge's before alignment and after (held out)."""

    case_id: str
    answer_sha: str
    criterion: str
    person: int
    before: int | None
    after: int | None


class CriterionAlignment(BaseModel):
    rubric: str
    criterion: str
    before: Agreement
    after: Agreement | None  # None when the judge was only measured (examples: 0)
    change: KappaChange | None = None  # after - before, paired over the same labels


class JudgeAlignment(BaseModel):
    """One judge against a person's labels, before and after alignment, with every labelled verdict."""

    judge: str
    examples: int
    labels: int
    criteria: list[CriterionAlignment]
    verdicts: list[LabelledVerdict]
    failures: int  # judge calls that gave no verdict (left out of both sides)

    def lines(self) -> list[str]:
        lines = []
        for c in self.criteria:
            lines.append(f"before alignment: {c.before.sentence()}")
            if c.after is not None:
                lines.append(f"after alignment, held out: {c.after.sentence()}")
            if c.change is not None:
                lines.append(f"alignment on {c.criterion}: {c.change.text()}")
        return lines


def measure_alignment(
    client: LLMClient,
    labels: ReviewLabels,
    rubrics: Sequence[Rubric],
    *,
    judge: str,
    examples: int,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> JudgeAlignment:
    """Judge every labelled answer with each rubric as it is and aligned; compare both with the labels
    on the answers where both gave a verdict."""
    criteria, verdicts, failures = [], [], 0
    for rubric in rubrics:
        answers = _answers(labels, rubric)
        if not answers:
            continue
        items = [next(iter(labelled.values())).item for labelled in answers.values()]
        base = judge_answers(client, items, rubrics=[rubric], desc=f"alignment: {rubric.name} before")
        after = None
        if examples:
            tuned = aligned_rubric(rubric, labels, judge, examples)
            after = judge_answers(client, items, rubrics=[tuned], desc=f"alignment: {rubric.name} after")
        failures += sum(rubric.name in j.errors for j in base) + sum(
            rubric.name in j.errors for j in after or []
        )
        for criterion in rubric.criteria:
            rows = []
            for position, ((case_id, sha), labelled) in enumerate(answers.items()):
                if criterion.name not in labelled:
                    continue
                rows.append(
                    LabelledVerdict(
                        case_id=case_id,
                        answer_sha=sha,
                        criterion=criterion.name,
                        person=labelled[criterion.name].value,
                        before=base[position].scores.get(criterion.name),
                        after=after[position].scores.get(criterion.name) if after else None,
                    )
                )
            both = [r for r in rows if r.before is not None and (after is None or r.after is not None)]
            common = {"rubric": rubric.name, "criterion": criterion.name, "scale": criterion.scale}
            stats = {"confidence": confidence, "resamples": resamples, "seed": seed}
            criteria.append(
                CriterionAlignment(
                    rubric=rubric.name,
                    criterion=criterion.name,
                    before=agreement([(r.person, r.before) for r in both], judge=judge, **common, **stats),
                    after=agreement(
                        [(r.person, r.after) for r in both],
                        judge=aligned_name(judge, examples),
                        **common,
                        **stats,
                    )
                    if after
                    else None,
                    change=kappa_change(
                        [r.person for r in both],
                        [r.before for r in both],
                        [r.after for r in both],
                        scale=criterion.scale,
                        **stats,
                    )
                    if after
                    else None,
                )
            )
            verdicts += rows
    return JudgeAlignment(
        judge=judge,
        examples=examples,
        labels=len(verdicts),
        criteria=criteria,
        verdicts=verdicts,
        failures=failures,
    )
