"""A judge rubric (`ragbench.scoring.rubrics`) as a scorer, so rubrics run through the same path as every
other scorer (`ragbench.scoring.apply.apply_scorers`): one LLM call per case, one JSON verdict, its
criteria's scores as integer verdicts and as the values of their columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragbench.llm.types import LLMRequest
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import DEFAULT_CONTEXT_CHAR_BUDGET, JudgeInput, Rubric
from ragbench.scoring.scorer import CaseScore, ScoreContext, Scorer
from ragbench.scoring.tolerance import NumericVerdict, numeric_verdict


class RubricScorer(Scorer):
    """One rubric's verdict on a case. Unlike a scorer class, one instance per rubric: a rubric is data
    (built in or written in a config), so its name and inputs are set per instance."""

    gives_verdicts = True

    def __init__(self, rubric: Rubric, context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET):
        self.rubric = rubric
        self.context_char_budget = context_char_budget
        # the ABC declares these per class; a rubric scorer takes them from its rubric
        self.name = rubric.name  # type: ignore[misc]
        self.needs = rubric.inputs  # type: ignore[misc]
        self.definition = getattr(rubric, "description", None) or ""  # type: ignore[misc]

    def metrics(self) -> tuple[MetricInfo, ...]:
        return tuple(criterion.metric for criterion in self.rubric.criteria)

    def missing(self, case: JudgeInput) -> str | None:
        """Why the rubric does not grade `case` (`Rubric.applies`: a reference answer it reads is missing,
        or none of its tags is on the case), or None."""
        if self.rubric.applies(case):
            return None
        if "reference_answer" in self.rubric.inputs and not case.has_reference:
            return "no reference answer"
        return f"none of the tags {', '.join(self.rubric.tags)}"

    def messages(self, case: JudgeInput) -> list[dict[str, str]]:
        """The judge call's messages: what `score` asks and the dry run prices."""
        return self.rubric.messages(case, context_char_budget=self.context_char_budget)

    def request(self, case: JudgeInput, sample: int = 0) -> LLMRequest:
        """The call `score` makes for `case` (its `sample`-th repeat), without making it."""
        return LLMRequest(self.messages(case), response_schema=self.rubric.reply_schema, sample=sample)

    def numeric(self, case: JudgeInput) -> NumericVerdict | None:
        """The verdict a case's `tolerance` decides without the judge: for a rubric with one criterion,
        the correctness score the judge is checked on, when both answers carry a number to compare."""
        criteria = self.rubric.criteria
        if case.tolerance is None or len(criteria) != 1 or not criteria[0].checks_judge:
            return None
        return numeric_verdict(case.reference_answer or "", case.answer, case.tolerance)

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        if (decided := self.numeric(case)) is not None:
            criterion = self.rubric.criteria[0]
            verdict = (5 if decided.within else 1) if criterion.scale == "1-5" else int(decided.within)
            return CaseScore(
                values={criterion.column: criterion.case_value(verdict)},
                verdicts={criterion.name: verdict},
                reasoning=decided.reason,
            )
        reply = context.ask(self.messages(case), self.rubric.reply_schema)
        verdicts = self.rubric.scores(reply)
        return CaseScore(
            values={c.column: c.case_value(verdicts[c.name]) for c in self.rubric.criteria},
            verdicts=verdicts,
            reasoning=reply["reasoning"],
        )

    def settings(self) -> dict[str, Any]:
        """The rubric's whole definition (prompts included) and the passages' budget: a changed prompt
        changes the cache key."""
        return {
            "rubric": self.rubric.model_dump(mode="json"),
            "context_char_budget": self.context_char_budget,
        }


def rubric_scorers(
    rubrics: Sequence[Rubric], context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET
) -> list[RubricScorer]:
    """One scorer per rubric, in order."""
    return [RubricScorer(rubric, context_char_budget) for rubric in rubrics]
