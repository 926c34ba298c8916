"""The scorer protocol: one class scores one answered case, with as many LLM and embedding calls as its
definition needs, and declares the metrics that summarise it.

A scorer names the case fields it reads (`needs`); a case without one of them is skipped with the reason,
never scored. Its LLM calls go through the run's client (`ScoreContext.ask`: cached, retried, counted,
replies validated against the schema the scorer gives), its embeddings through the run's scoring embedding
model (`ScoreContext.embed`). What it found on the way (statements, verdicts, reasons) it keeps in
`CaseScore.details`, which the per-case records and the report show. A judge's integer verdicts
(`CaseScore.verdicts`, e.g. a rubric's 1-5 scores) are kept by criterion beside the values, and a scorer
that gives them (`gives_verdicts`) is asked again for the judge's self-consistency (``judge_samples``).

Scorers from another installed package register through the entry point group ``ragbench.scorers``
(``name = "package.module:ScorerClass"``) and are named in `evaluation.metrics` like the built-in ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from ragbench.plugins import Plugin
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import Input, JudgeInput


class ScorerCallFailed(RuntimeError):
    """An LLM call a scorer needed gave no valid reply after the client's retries: the case is counted as a
    failure of that scorer, never scored."""


class ScoreContext(ABC):
    """What a scorer may call: the judge LLM and the scoring embedding model."""

    @abstractmethod
    def ask(
        self, messages: list[dict[str, str]], schema: type[BaseModel], *, sample: int | None = None
    ) -> dict[str, Any]:
        """The judge's reply to `messages`, validated against `schema`; raises `ScorerCallFailed`.
        `sample` numbers a repeat of the same request (cached apart); None: the sample the case is being
        scored for (0, or a further sample of self-consistency)."""

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text (rows, not normalised)."""

    @property
    def samples_differ(self) -> bool:
        """Whether asking the same request again may give another reply (judge temperature above 0)."""
        return True


@dataclass
class CaseScore:
    """One case's values by metric column (a metric the case does not define is left out, never NaN)
    and what the scorer found on the way."""

    values: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    # A judge's integer verdicts by criterion name (pass/fail as 1/0) and its reasoning, for scorers that
    # ask for them (rubrics): kept as `Judgement.scores` and `Judgement.reasoning[scorer]`, and compared
    # across samples for self-consistency.
    verdicts: dict[str, int] = field(default_factory=dict)
    reasoning: str | None = None


class Scorer(Plugin):
    """One way of scoring an answered case. Subclasses set the class attributes and `score`; its identity
    (`Plugin.identity`: name, version, source, `settings`) is part of the judge step's cache key, so a
    changed prompt or parameter asks again."""

    # The case fields `score` reads: a case where one is empty is skipped with the reason, never scored.
    needs: ClassVar[tuple[Input, ...]] = ("question", "answer")
    # Whether `score` asks the judge (`context.ask`): the default `planned_calls` counts one call a case.
    uses_llm: ClassVar[bool] = True
    # Whether `score` embeds texts (`context.embed`): the run then loads the scoring embedding model.
    uses_embeddings: ClassVar[bool] = False
    # Whether `score` returns `CaseScore.verdicts`: only such a scorer is scored again when the judge's
    # self-consistency is measured (`apply_scorers(samples=...)`); a further sample of any other records
    # nothing and is not paid for.
    gives_verdicts: ClassVar[bool] = False
    # One sentence users read in the report and the docs: what the number is.
    definition: ClassVar[str] = ""

    @abstractmethod
    def metrics(self) -> tuple[MetricInfo, ...]:
        """The metrics this scorer's values summarise into, in display order."""

    @abstractmethod
    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Score one case that has every field in `needs`; raises `ScorerCallFailed` when a call failed."""

    def missing(self, case: JudgeInput) -> str | None:
        """Why `case` cannot be scored (a field it needs is empty), or None."""
        present = {
            "question": bool(case.question.strip()),
            "answer": bool(case.answer.strip()),
            "passages": bool(case.contexts),
            "reference_answer": case.has_reference,
        }
        absent = [need for need in self.needs if not present[need]]
        return f"no {', '.join(absent).replace('_', ' ')}" if absent else None

    def planned_calls(self, case: JudgeInput) -> int:
        """How many LLM calls scoring `case` takes, for the dry run's estimate (one by default)."""
        return 1 if self.uses_llm else 0


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors."""
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
