"""ragbench's side of a scripted scenario: a `ScoreContext` whose judge answers from a script and whose
embedding model returns fixed vectors, as tests/conformance/ragas_side.py gives ragas.

A script is a list of entries ``{"step", "when" (optional), "replies"}``: the step is the reply schema's
(the names ragas_side.py gives ragas's output models), `replies` holds one reply per sample, and `when`
picks the entry, among several of a step, whose text the call's messages hold. ``"fail": true`` makes the
call fail as the client does after its retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragbench.scoring import ragas_prompts as prompts
from ragbench.scoring.ragas_family import RAGAS_FAMILY
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import CaseScore, ScoreContext, ScorerCallFailed

STEPS: dict[type[BaseModel], str] = {
    prompts.Statements: "statements",
    prompts.StatementVerdicts: "verdicts",
    prompts.GeneratedQuestion: "question",
    prompts.Usefulness: "usefulness",
    prompts.Attributions: "attribution",
    prompts.Classification: "classification",
}


class ScriptedContext(ScoreContext):
    """Replies and vectors from a script; records every call (`asked`: step and sample, `messages`,
    `embedded`)."""

    def __init__(
        self,
        script: Sequence[dict[str, Any]],
        vectors: dict[str, Sequence[float]] | None = None,
        *,
        samples_differ: bool = True,
    ):
        self.script, self.vectors, self._samples_differ = list(script), dict(vectors or {}), samples_differ
        self.asked: list[tuple[str, int]] = []
        self.messages: list[list[dict[str, str]]] = []
        self.embedded: list[list[str]] = []

    def ask(
        self, messages: list[dict[str, str]], schema: type[BaseModel], *, sample: int = 0
    ) -> dict[str, Any]:
        step = STEPS[schema]
        haystack = "\n".join(message["content"] for message in messages)
        entries = [entry for entry in self.script if entry["step"] == step]
        if len(entries) > 1:
            entries = [entry for entry in entries if entry["when"] in haystack]
        if len(entries) != 1:
            raise LookupError(f"{len(entries)} scripted replies fit step {step}")
        self.asked.append((step, sample))
        self.messages.append(messages)
        if entries[0].get("fail"):
            raise ScorerCallFailed("no valid reply after 3 attempts")
        # validated and dumped as the client does, so a script that does not fit the schema fails here
        return schema.model_validate(entries[0]["replies"][sample]).model_dump(mode="json")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.append(list(texts))
        return np.array([self.vectors[text] for text in texts], dtype=float)

    @property
    def samples_differ(self) -> bool:
        return self._samples_differ


def case_of(scenario: dict[str, Any]) -> JudgeInput:
    """A scenario's case as ragbench's scorers get it."""
    return JudgeInput(
        case_id=scenario["id"],
        question=scenario["question"],
        answer=scenario["answer"],
        reference_answer=scenario.get("reference"),
        contexts=scenario.get("contexts") or [],
    )


def score(scenario: dict[str, Any]) -> tuple[CaseScore, ScriptedContext]:
    """ragbench's score of a scenario, and the context that recorded its calls."""
    context = ScriptedContext(
        scenario.get("replies", []),
        scenario.get("vectors"),
        samples_differ=scenario.get("samples_differ", True),
    )
    scorer = RAGAS_FAMILY[scenario["metric"]]()
    case = case_of(scenario)
    assert scorer.missing(case) is None, scorer.missing(case)
    return scorer.score(case, context), context
