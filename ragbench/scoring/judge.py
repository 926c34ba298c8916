"""LLM-as-judge: grades generated answers with rubrics (`ragbench.scoring.rubrics`), keeping the judge's
reasoning beside its scores.

Any rubric, built-in or a user's, runs the same way: as a `RubricScorer` through `apply_scorers`, the path
every scorer takes, so a hosted judge runs concurrently and all calls are cached, retried and counted.
Replies are validated against the rubric's schema with bounded scores; the client re-asks after an
invalid reply, and a reply that is still invalid (or a call that failed) is recorded as a judge failure:
its scores stay unset, it is left out of every mean and counted, never turned into a score.

The answer, the reference answer and the passages are tagged data sections
(`ragbench.llm.prompts.data_section`)
that the system message declares to be data, so an answer cannot grade itself ("give 5").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from pydantic import BaseModel

from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMRequest
from ragbench.scoring.apply import Judgement, apply_scorers
from ragbench.scoring.rubric_scorer import rubric_scorers
from ragbench.scoring.rubrics import DEFAULT_CONTEXT_CHAR_BUDGET, JudgeInput, Rubric


@dataclass(frozen=True)
class JudgeCall:
    """One planned judge call: which input (by position), which rubric, and the request to send."""

    index: int
    rubric: Rubric
    request: LLMRequest
    sample: int = 0


def build_judge_calls(
    inputs: Sequence[JudgeInput],
    rubrics: Sequence[Rubric],
    *,
    context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET,
    samples: int = 1,
) -> list[JudgeCall]:
    """Every call `judge_answers` would make, in the order it plans them, without making any (for a dry
    run's token estimate: ``estimate_cost(settings, [c.request for c in build_judge_calls(...)])``);
    `samples` verdicts of each (answer, rubric)."""
    scorers = rubric_scorers(rubrics, context_char_budget)
    return [
        JudgeCall(index, scorer.rubric, scorer.request(item, sample), sample)
        for sample in range(samples)
        for index, item in enumerate(inputs)
        for scorer in scorers
        if scorer.missing(item) is None and scorer.numeric(item) is None
    ]


def judge_answers(
    client: LLMClient,
    inputs: Sequence[JudgeInput],
    *,
    rubrics: Sequence[Rubric],
    context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET,
    desc: str = "judge",
    samples: int = 1,
) -> list[Judgement]:
    """One `Judgement` per input, in input order, the rubrics' calls at the client's concurrency.
    With `samples` > 1 each verdict is asked for that many times (cached apart); the first gives the
    scores, the others only `resampled`.

    Raises only what the client raises for a setup problem (`LLMConfigError`).
    """
    judgements = [Judgement(case_id=item.case_id) for item in inputs]
    scorers = rubric_scorers(rubrics, context_char_budget)
    apply_scorers(client, None, inputs, scorers, judgements, desc=desc, samples=samples)
    return judgements


def judge_case_values(
    judgements: Iterable[Judgement], rubrics: Sequence[Rubric], scorers: Mapping[str, Sequence[str]] = {}
) -> dict[str, dict[str, float]]:
    """Per criterion column and scorer column (`scorers`: scorer name -> its columns), the value of every
    case scored (case id -> value): what every mean, interval and paired test of a judge column is computed
    from. Failed and skipped verdicts are absent, not zeroed."""
    judgements = list(judgements)
    values = {
        criterion.column: {
            j.case_id: criterion.case_value(j.scores[criterion.name])
            for j in judgements
            if criterion.name in j.scores
        }
        for rubric in rubrics
        for criterion in rubric.criteria
    }
    for columns in scorers.values():
        for column in columns:
            values[column] = {j.case_id: j.values[column] for j in judgements if column in j.values}
    return values


class JudgeSummary(BaseModel):
    """One judge over one answer set: each criterion column's mean and how many cases it rests on, and how
    many verdicts each rubric failed to give."""

    means: dict[str, float | None]
    scored: dict[str, int]
    failures: dict[str, int]


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 4) if present else None


def summarise_judgements(
    judgements: Sequence[Judgement], rubrics: Sequence[Rubric], scorers: Mapping[str, Sequence[str]] = {}
) -> JudgeSummary:
    """Means over the cases each criterion or scorer scored; failed and skipped verdicts are excluded, not
    zeroed."""
    values = judge_case_values(judgements, rubrics, scorers)
    names = [rubric.name for rubric in rubrics] + list(scorers)
    return JudgeSummary(
        means={column: _mean(by_case.values()) for column, by_case in values.items()},
        scored={column: len(by_case) for column, by_case in values.items()},
        failures={name: sum(name in j.errors for j in judgements) for name in names},
    )


# A judge that gives a rubric's independent criteria one shared score is grading the answer as a whole;
# measured on the local 1.5B judge (context rubric): 24 of 25 verdicts, with toxicity flipping with them.
SAME_SCORE_WARNING_SHARE = 0.8
SAME_SCORE_WARNING_MIN_VERDICTS = 8


def same_score_count(judgements: Iterable[Judgement], rubric: Rubric) -> tuple[int, int]:
    """(verdicts whose `rubric.independent_criteria` all got one score, verdicts that scored them all)."""
    criteria = rubric.independent_criteria
    if len(criteria) < 2:
        return 0, 0
    scored = [
        [j.scores[name] for name in criteria] for j in judgements if all(n in j.scores for n in criteria)
    ]
    return sum(len(set(scores)) == 1 for scores in scored), len(scored)


def judge_warnings(judgements: Iterable[Judgement], rubrics: Iterable[Rubric]) -> list[str]:
    """Warnings about the judge itself, for the report: when a rubric's independent criteria move as one."""
    judgements = list(judgements)
    warnings = []
    for rubric in rubrics:
        same, scored = same_score_count(judgements, rubric)
        if scored < SAME_SCORE_WARNING_MIN_VERDICTS or same < SAME_SCORE_WARNING_SHARE * scored:
            continue
        warnings.append(
            f"The judge gave {', '.join(rubric.independent_criteria)} the same score in {same} of {scored} "
            f"{rubric.name} verdicts: it may be grading each answer as a whole rather than each criterion. "
            "Check its reasoning in cases.jsonl before reading those columns separately, or use a "
            "stronger judge model."
        )
    return warnings
