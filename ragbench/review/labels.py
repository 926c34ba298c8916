"""A person's labels of answers (one verdict per rubric criterion) and of eval-set candidates (keep or
reject), keyed so that a label follows its answer: by case, the answer's hash and the criterion. A re-run
whose answer is unchanged reuses the label; a changed answer has another hash and is asked again.

Labels are appended to a JSONL file as they are given (the newest label of a key wins), so a page that is
closed or crashes loses nothing; `ReviewLabels` is what a run reads, as a versioned artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragbench.hashing import short_hash
from ragbench.scoring.rubrics import JudgeInput, Rubric

Kind = Literal["answer", "candidate"]
# a candidate's verdict is kept under this rubric and criterion: 1 keep, 0 reject
CANDIDATE_RUBRIC = "keep"


def text_sha(text: str) -> str:
    """What keys a label to its answer: the answer's exact text, hashed."""
    return short_hash(text)


class SampleDraw(BaseModel):
    """What a label given in a sample order keeps of its draw (`ragbench.review.sampling`): without it a
    label is never counted as part of a random sample."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan: str  # `ragbench.review.sampling.SamplePlan.name`
    weight: float = Field(gt=0, le=1)
    draw: float = Field(gt=0, lt=1)


class Label(BaseModel):
    """One verdict of a person on one criterion of one answer (or one candidate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind = "answer"
    case_id: str = Field(min_length=1)
    answer_sha: str = Field(min_length=1)  # text_sha of the answer (of the question, for a candidate)
    rubric: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    scale: Literal["1-5", "pass_fail"] = "1-5"
    value: int  # 1-5, or 1 pass / 0 fail (keep / reject)
    note: str = ""
    # what the person saw: the examples an aligned judge is shown are taken from here
    item: JudgeInput
    # each judge's score of this criterion on this answer, shown only after the person answered
    judge_verdicts: dict[str, int] = Field(default_factory=dict)
    labelled_at: str = ""
    sample: SampleDraw | None = None  # set when labelled in a sample order of the queue

    @model_validator(mode="after")
    def _check(self) -> Label:
        allowed = range(1, 6) if self.scale == "1-5" else (0, 1)
        if self.value not in allowed:
            raise ValueError(f"label value {self.value} is not on the {self.scale} scale")
        if self.answer_sha != text_sha(self.item.answer if self.kind == "answer" else self.item.question):
            raise ValueError(f"case {self.case_id}: answer_sha does not match the labelled text")
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.case_id, self.answer_sha, self.rubric, self.criterion)


class ReviewLabels(BaseModel):
    """Every label given, oldest first; `current` keeps the newest per key."""

    labels: list[Label] = Field(default_factory=list)

    def current(self) -> list[Label]:
        newest: dict[tuple[str, str, str, str], Label] = {}
        for label in self.labels:
            newest[label.key] = label
        return list(newest.values())

    def of(self, rubric: str, criterion: str, kind: Kind = "answer") -> list[Label]:
        return [
            label
            for label in self.current()
            if label.kind == kind and label.rubric == rubric and label.criterion == criterion
        ]

    def jsonl(self) -> str:
        return "".join(label.model_dump_json() + "\n" for label in self.current())

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.jsonl().encode()).hexdigest()


class LabelFileError(ValueError):
    """An unreadable labels file; the message names the file and the line."""


def check_labels(
    labels: ReviewLabels, rubrics: Sequence[Rubric], case_ids: Collection[str], where: str
) -> None:
    """Fail before any work on labels a run cannot read: a criterion labelled on another scale than its
    rubric's, or answer labels none of whose cases is in the run's eval set (another eval set's file)."""
    scales = {(r.name, c.name): c.scale for r in rubrics for c in r.criteria}
    answer_labels = [label for label in labels.current() if label.kind == "answer"]
    for label in answer_labels:
        scale = scales.get((label.rubric, label.criterion))
        if scale is not None and scale != label.scale:
            raise LabelFileError(
                f"{where}: labels of {label.rubric}/{label.criterion} are on the {label.scale} scale, but "
                "the "
                f"rubric grades it {scale}: they were given for another rubric"
            )
    if answer_labels and not any(label.case_id in case_ids for label in answer_labels):
        raise LabelFileError(
            f"{where}: none of its {len(answer_labels)} answer label(s) is of a case in this eval set: the "
            "labels are of another eval set"
        )


def read_labels(text: str, where: str) -> ReviewLabels:
    labels = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            labels.append(Label.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as error:
            raise LabelFileError(f"{where}: line {number} is not a label: {error}") from None
    return ReviewLabels(labels=labels)


def load_labels_file(path: str | Path) -> ReviewLabels:
    path = Path(path)
    if not path.is_file():
        raise LabelFileError(f"{path}: labels file not found")
    return read_labels(path.read_text(encoding="utf-8"), str(path))


class LabelStore:
    """The labels file a review page appends to: one line per label, flushed and synced before the page
    is told it is saved, so a label survives a restart."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.labels = load_labels_file(self.path) if self.path.exists() else ReviewLabels()

    def add(self, label: Label) -> Label:
        stamped = label.model_copy(update={"labelled_at": datetime.now(UTC).isoformat(timespec="seconds")})
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(stamped.model_dump_json() + "\n")
                out.flush()
                os.fsync(out.fileno())
            self.labels = ReviewLabels(labels=[*self.labels.labels, stamped])
        return stamped
