"""A person's labels of answers (one verdict per rubric criterion) and of eval-set candidates (keep or
reject), keyed so that a label follows its answer: by case, the answer's hash and the criterion. A re-run
whose answer is unchanged reuses the label; a changed answer has another hash and is asked again.

Labels are appended to a JSONL file as they are given (the newest label of a key wins), so a page that is
closed or crashes loses nothing; `ReviewLabels` is what a run reads, as a versioned artifact.

A label's value is of the scale it names and nothing else: an integer JSON number, 1-5 on the 1-5 scale, 0
or 1 on pass_fail. A float (1.0, 0.5), a string ("3") or a boolean is refused, never coerced: a 0-1 "right"
written as 1.0 would otherwise pass as 1, the worst score. Every refusal is one sentence naming the file,
the line, the case and the field (`LabelFileError`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, ValidationError, model_validator

from ragbench.hashing import sha256_hex, short_hash
from ragbench.inputs.tables import JsonLineError, jsonl_records
from ragbench.scoring.rubrics import JudgeInput, Rubric

Kind = Literal["answer", "candidate"]
Scale = Literal["1-5", "pass_fail"]
_SCALE_VALUES = {"1-5": "an integer from 1 to 5", "pass_fail": "1 pass or 0 fail"}
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
    scale: Scale = "1-5"
    # 1-5, or 1 pass / 0 fail (keep / reject): strict, so 1.0, "3" or true is refused, not read as 1, 3 or 1
    value: StrictInt
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
            raise ValueError(
                f"value {self.value} is not on the {self.scale} scale ({_SCALE_VALUES[self.scale]})"
            )
        if self.answer_sha != text_sha(self.item.answer if self.kind == "answer" else self.item.question):
            text = "answer" if self.kind == "answer" else "question"
            raise ValueError(
                f"answer_sha {self.answer_sha} is not the hash of the labelled {text}: the {text} or its "
                "hash was edited"
            )
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.case_id, self.answer_sha, self.rubric, self.criterion)


class ReviewLabels(BaseModel):
    """Every label given, oldest first; `current` keeps the newest per key."""

    labels: list[Label] = Field(default_factory=list)
    # the line of the file each label was read from (`read_labels`), so a refusal can name it; not stored
    _lines: list[int] = PrivateAttr(default_factory=list)

    def current(self) -> list[Label]:
        return [label for _, label in self.current_lines()]

    def current_lines(self) -> list[tuple[int | None, Label]]:
        """`current` with the file line of each label (None for a label not read from a file)."""
        newest: dict[tuple[str, str, str, str], tuple[int | None, Label]] = {}
        for index, label in enumerate(self.labels):
            newest[label.key] = (self._lines[index] if index < len(self._lines) else None, label)
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
        return sha256_hex([self.jsonl()])


class LabelFileError(ValueError):
    """A labels file (or artifact) a run cannot read; the message is one sentence naming the file, the line,
    the case and the field."""


def _at(where: str, line: int | None, case_id: Any = None) -> str:
    """Where a refusal is: `labels file X, line 7 (case list-pop)`."""
    place = where if line is None else f"{where}, line {line}"
    return f"{place} (case {case_id})" if isinstance(case_id, str) and case_id else place


def _shown(value: Any) -> str:
    """A value as the file spells it (JSON: 1.0, "3", true), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _refusal(error: dict[str, Any], raw: dict[str, Any]) -> str:
    """One of pydantic's errors (`ValidationError.errors()`) as the end of a plain sentence."""
    loc = ".".join(str(part) for part in error["loc"])
    kind, given = error["type"], error.get("input")
    scale = raw.get("scale", "1-5") if raw.get("scale") in _SCALE_VALUES else "1-5"
    if kind == "missing":
        return f"field {loc} is missing"
    if kind == "extra_forbidden":
        return f"field {loc} is not a field of a label"
    if loc == "value":
        return (
            f"value {_shown(given)} is not an integer on the {scale} scale (a label's value is "
            f"{_SCALE_VALUES[scale]}, written as a whole number)"
        )
    if loc == "scale":
        return f'scale {_shown(given)} is not a scale name: give "1-5" or "pass_fail"'
    if loc == "kind":
        return f'kind {_shown(given)} is not "answer" or "candidate"'
    if kind == "value_error" and not loc:  # the label's own checks: the message is already a sentence
        return str(error["ctx"]["error"])
    if kind == "model_type" and not loc:
        return f"the line is not a JSON object but {_shown(given)}"
    message = error["msg"][0].lower() + error["msg"][1:]
    return f"field {loc or 'label'}: {message}, not {_shown(given)}"


def parse_label(raw: Any, where: str, line: int | None = None) -> Label:
    """One label of a file, or `LabelFileError` naming the file, the line, the case and the field."""
    try:
        return Label.model_validate(raw)
    except ValidationError as error:
        data = raw if isinstance(raw, dict) else {}
        first = error.errors(include_url=False)[0]
        raise LabelFileError(f"{_at(where, line, data.get('case_id'))}: {_refusal(first, data)}") from None


def check_labels(
    labels: ReviewLabels, rubrics: Sequence[Rubric], case_ids: Collection[str], where: str
) -> None:
    """Fail before any work on labels a run cannot read: a criterion labelled on another scale than its
    rubric's, or answer labels none of whose cases is in the run's eval set (another eval set's file).
    `where`: the file or artifact, e.g. `labels file review_labels.jsonl`."""
    scales = {(r.name, c.name): c.scale for r in rubrics for c in r.criteria}
    answer_labels = [(line, label) for line, label in labels.current_lines() if label.kind == "answer"]
    for line, label in answer_labels:
        scale = scales.get((label.rubric, label.criterion))
        if scale is not None and scale != label.scale:
            raise LabelFileError(
                f"{_at(where, line, label.case_id)}: scale {label.scale} of {label.rubric}/{label.criterion} "
                f"is not the rubric's, which grades it {scale}: the labels were given for another rubric"
            )
    if answer_labels and not any(label.case_id in case_ids for _, label in answer_labels):
        first_line, first = answer_labels[0]
        raise LabelFileError(
            f"{_at(where, first_line, first.case_id)}: case_id {first.case_id} is not a case of this eval "
            f"set, nor is any case of its {len(answer_labels)} answer label(s): the labels are of another "
            "eval set"
        )


def read_labels(text: str, where: str) -> ReviewLabels:
    """The labels of a JSONL text; `where` names it in a refusal (`labels file PATH`)."""
    labels, lines = [], []
    try:
        for number, raw in jsonl_records(text, where):
            labels.append(parse_label(raw, where, number))
            lines.append(number)
    except JsonLineError as bad:
        raise LabelFileError(
            f"{_at(where, bad.line)}: the line is not JSON ({bad.error.msg} at column {bad.error.colno})"
        ) from None
    read = ReviewLabels(labels=labels)
    read._lines = lines
    return read


def load_labels_file(path: str | Path) -> ReviewLabels:
    path = Path(path)
    if not path.is_file():
        raise LabelFileError(f"labels file {path}: not found")
    return read_labels(path.read_text(encoding="utf-8"), f"labels file {path}")


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
            added = ReviewLabels(labels=[*self.labels.labels, stamped])
            added._lines = self.labels._lines  # the lines read at start; a label added since has none
            self.labels = added
        return stamped
