"""One schema for every evaluation: a metric is computed only where its fields are present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator


class EvalCase(BaseModel):
    """A question plus whatever ground truth is known about it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    question: str = Field(min_length=1)
    reference_answer: str | None = None
    expected_sources: list[str] = Field(default_factory=list)
    good_words: list[str] = Field(default_factory=list)
    bad_words: list[str] = Field(default_factory=list)
    bad_first_words: list[str] = Field(default_factory=list)
    # "word": whole words/phrases, case-insensitive ("local" does not match "locally");
    # "substring": plain case-insensitive containment.
    match: Literal["word", "substring"] = "word"
    tags: list[str] = Field(default_factory=list)

    @field_validator("question")
    @classmethod
    def _strip_question(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question is blank")
        return value.strip()


class EvalSuite(BaseModel):
    """All cases of one run, kept together so they travel as a single artifact."""

    cases: list[EvalCase]
    fingerprint: str = ""


class EvalCaseError(ValueError):
    """Raised for an unreadable, empty or inconsistent eval-case file."""


def load_eval_cases(path: str | Path) -> list[EvalCase]:
    """Read cases from .jsonl, .json, .yaml or .yml; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise EvalCaseError(f"eval case file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        raw = []
        for line_number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise EvalCaseError(f"{path}:{line_number}: invalid JSON: {error}") from error
    elif path.suffix in {".yaml", ".yml", ".json"}:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise EvalCaseError(f"{path}: not valid YAML/JSON: {error}") from error
        raw = loaded.get("cases") if isinstance(loaded, dict) else loaded
    else:
        raise EvalCaseError(f"{path}: unsupported eval case format (use .jsonl, .json, .yaml)")
    if not isinstance(raw, list) or not raw:
        raise EvalCaseError(f"{path}: no eval cases found")
    cases = []
    for position, item in enumerate(raw):
        try:
            cases.append(EvalCase.model_validate(item))
        except Exception as error:  # pydantic ValidationError carries the field names
            raise EvalCaseError(f"{path}: case #{position + 1} is invalid: {error}") from error
    ids = [case.id for case in cases]
    duplicates = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
    if duplicates:
        raise EvalCaseError(f"{path}: duplicate case ids: {', '.join(duplicates)}")
    return cases
