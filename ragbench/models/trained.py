"""A reranker checkpoint trained by `run.py train-reranker`: what it was trained on, how, and where its
files are once loaded. Named in the grid as `trained:<name>` (the newest version) or `trained:<name>@<v>`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

TRAINED_PREFIX = "trained:"
_TRAINED = re.compile(r"^trained:(?P<name>[A-Za-z0-9_.-]+)(?:@(?P<version>[A-Za-z0-9_.-]+))?$")


class TrainedReranker(BaseModel):
    """The checkpoint artifact ('reranker-<name>'): its identity and record beside the weights' folder."""

    name: str
    knowledge_base: str
    training_pairs: int
    generator_questions: int
    cloze_questions: int
    training_data_fingerprint: str
    chunk_set_fingerprint: str
    held_out_cases: list[str]
    validation_sources: list[str]
    recipe: dict[str, Any]
    log: dict[str, Any]
    location: str = Field(default="", description="the loaded checkpoint's local folder (set on load)")

    @property
    def label(self) -> str:
        unchecked = "" if self.log.get("validation_questions") else ", never validated"
        return (
            f"trained locally on {self.training_pairs} synthetic pairs from {self.knowledge_base}{unchecked}"
        )

    def summary(self) -> dict[str, Any]:
        """What the artifact's metadata shows (and what naming it in a grid reads without its weights)."""
        return {
            "label": self.label,
            "knowledge_base": self.knowledge_base,
            "training_pairs": self.training_pairs,
            "generator_questions": self.generator_questions,
            "cloze_questions": self.cloze_questions,
            "training_data_fingerprint": self.training_data_fingerprint,
            "held_out_case_ids": self.held_out_cases,
            "steps": self.log.get("steps"),
            "best_step": self.log.get("best_step"),
            "training_seconds": self.log.get("seconds"),
            "stopped_because": self.log.get("stopped_because"),
            "validation_mrr_first_stage": self.log.get("validation_mrr_first_stage"),
            "validation_mrr_before": self.log.get("validation_mrr_before"),
            "validation_mrr_best": max((v for _, v in self.log.get("validation_curve", [])), default=None),
        }


def artifact_name(name: str) -> str:
    return f"reranker-{name}"


def parse_trained(reranker: str) -> tuple[str, str | None] | None:
    """(name, version or None) of a `trained:<name>[@<version>]` reranker value; None for any other value."""
    if not reranker.strip().startswith(TRAINED_PREFIX):
        return None
    match = _TRAINED.match(reranker.strip())
    if match is None:
        raise ValueError(
            f"reranker {reranker!r}: write trained:<name> or trained:<name>@<version> "
            "(letters, digits, '.', '_', '-')"
        )
    return match["name"], match["version"]
