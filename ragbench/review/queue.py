"""What the review page asks: one screen per (answer, criterion), in an order the person chooses.

An item is one distinct answer of a case (cells that gave the same answer to a case share it; judges of
those cells each add a verdict), with everything the reader saw. The person never sees which cell gave
it; the judges' verdicts are shown only after the person answered.

Orders: `disagreement` (judges that disagree, a judge whose samples disagree, or a judge against the
keyword tests, first), `uncertain` (verdicts nearest the middle of the scale, then spread samples, first),
`random` (a seeded audit: the same seed gives the same order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, Field

from ragbench.hashing import seeded_rank
from ragbench.inputs.eval_cases import EvalCase
from ragbench.review.labels import CANDIDATE_RUBRIC, Kind, text_sha
from ragbench.scoring.rubrics import Criterion, JudgeInput, Rubric

Order = Literal["disagreement", "uncertain", "random"]
ORDERS: tuple[Order, ...] = ("disagreement", "uncertain", "random")


class ReviewItem(BaseModel):
    """One thing to label on one criterion, with the verdicts to reveal after the person answered."""

    kind: Kind = "answer"
    rubric: str
    criterion: str
    criterion_label: str
    scale: Literal["1-5", "pass_fail"]
    input: JudgeInput
    sources: list[str] = Field(default_factory=list)  # each passage's source, in the order shown
    searched: list[str] = Field(default_factory=list)  # what was searched, when a query rewrite changed it
    verdicts: dict[str, int] = Field(default_factory=dict)  # judge (or filter) -> its score
    reasoning: dict[str, str] = Field(default_factory=dict)  # judge -> why
    samples: dict[str, list[int]] = Field(default_factory=dict)  # judge -> every sampled score
    keyword_failures: list[str] = Field(default_factory=list)

    @property
    def answer_sha(self) -> str:
        return text_sha(self.input.answer if self.kind == "answer" else self.input.question)

    @property
    def key(self) -> str:
        return f"{self.input.case_id}|{self.answer_sha}|{self.rubric}|{self.criterion}"


def answer_items(
    records: Sequence, cases: Sequence[EvalCase], judge_of_cell: Mapping[str, str], rubric: Rubric
) -> list[ReviewItem]:
    """One item per distinct (case, answer) of a run's case records (`CaseRecord`s) and criterion of
    `rubric`, for every answer the rubric applies to; `judge_of_cell`: each cell's judge name."""
    by_id = {case.id: case for case in cases}
    items: dict[tuple[str, str, str], ReviewItem] = {}
    for record in records:
        answer = record.answer
        if answer.answer is None or record.case_id not in by_id:
            continue
        case = by_id[record.case_id]
        shown = JudgeInput(
            case_id=case.id,
            question=answer.question,
            history=answer.history,
            answer=answer.answer,
            reference_answer=case.reference_answer,
            contexts=[chunk.text for chunk in answer.contexts],
            tags=case.tags,
        )
        if not rubric.applies(shown):
            continue
        for criterion in rubric.criteria:
            key = (case.id, text_sha(answer.answer), criterion.name)
            item = items.setdefault(key, _item(rubric, criterion, shown, [c.source for c in answer.contexts]))
            item.searched = item.searched or answer.searched
            item.keyword_failures = sorted(
                {*item.keyword_failures, *(f"{f.suite}: {f.word}" for f in record.keyword_failures)}
            )
            judgement, judge = record.judgement, judge_of_cell.get(record.cell)
            if judgement is None or judge is None or criterion.name not in judgement.scores:
                continue
            item.verdicts[judge] = judgement.scores[criterion.name]
            item.samples[judge] = [
                judgement.scores[criterion.name],
                *judgement.resampled.get(criterion.name, []),
            ]
            if rubric.name in judgement.reasoning:
                item.reasoning[judge] = judgement.reasoning[rubric.name]
    return list(items.values())


def _item(rubric: Rubric, criterion: Criterion, shown: JudgeInput, sources: list[str]) -> ReviewItem:
    return ReviewItem(
        rubric=rubric.name,
        criterion=criterion.name,
        criterion_label=criterion.label,
        scale=criterion.scale,
        input=shown,
        sources=sources,
    )


def candidate_item(
    case: EvalCase, passage: str, source: str, decisions: Mapping[str, bool], reasons: Mapping[str, str]
) -> ReviewItem:
    """A generated eval-set candidate to keep or reject: its question, reference answer and the passage
    it was made from; each filter's decision is revealed like a judge's verdict."""
    return ReviewItem(
        kind="candidate",
        rubric=CANDIDATE_RUBRIC,
        criterion=CANDIDATE_RUBRIC,
        criterion_label="keep this case in the eval set?",
        scale="pass_fail",
        input=JudgeInput(
            case_id=case.id,
            question=case.question,
            history=case.history,
            answer=case.reference_answer or "",
            reference_answer=case.reference_answer,
            contexts=[passage],
            tags=case.tags,
        ),
        sources=[source],
        verdicts={name: int(kept) for name, kept in decisions.items()},
        reasoning=dict(reasons),
    )


def spread(item: ReviewItem) -> float:
    """0-1: how far the item's verdicts disagree among judges, within a judge's samples, or with the
    keyword tests (a high score beside a failed test, a low one with none failed)."""
    top = 4 if item.scale == "1-5" else 1
    scores = list(item.verdicts.values())
    between = (max(scores) - min(scores)) / top if len(scores) > 1 else 0.0
    within = max(((max(s) - min(s)) / top for s in item.samples.values() if s), default=0.0)
    keyword = 0.0
    if item.kind == "answer" and scores and item.scale == "1-5":
        mean = fmean(scores)
        keyword = float(
            (mean >= 4 and bool(item.keyword_failures)) or (mean <= 2 and not item.keyword_failures)
        )
        keyword *= 0.5  # a keyword test is a blunt check: weaker evidence than two judges apart
    return max(between, within, keyword)


def closeness_to_middle(item: ReviewItem) -> float:
    if not item.verdicts:
        return 1.0
    middle, half = (3.0, 2.0) if item.scale == "1-5" else (0.5, 0.5)
    return 1.0 - abs(fmean(item.verdicts.values()) - middle) / half


def ordered(items: Sequence[ReviewItem], order: Order, seed: int = 0) -> list[ReviewItem]:
    """The queue: every item once, in `order`; ties (and `random`) by the seeded rank of its key."""

    def audit(item: ReviewItem) -> bytes:
        return seeded_rank(seed, item.key)

    if order == "random":
        return sorted(items, key=audit)
    if order == "disagreement":
        return sorted(items, key=lambda item: (-spread(item), audit(item)))
    if order == "uncertain":
        return sorted(items, key=lambda item: (-closeness_to_middle(item), -spread(item), audit(item)))
    raise ValueError(f"unknown order {order!r}; choose from {', '.join(ORDERS)}")
