"""A cell's answers scored: the judge's verdicts on one answer set, the pairwise judge on two, the keyword
suites on every answer, and the judge's verdicts on a person's labelled answers."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.inputs.conversation import question_in_context
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.scoring.apply import Embed, apply_scorers
from ragbench.scoring.judge import (
    Judgement,
    JudgeSummary,
    judge_answers,
    judge_case_values,
    summarise_judgements,
)
from ragbench.scoring.keyword_tests import KeywordReport, Suite, run_keyword_tests
from ragbench.scoring.pairwise import PairwiseInput, PairwiseResult, judge_pairs
from ragbench.scoring.repeats import JudgeRepeatsConfig, RepeatedVerdict, judge_repeats
from ragbench.scoring.rubric_scorer import rubric_scorers
from ragbench.scoring.rubrics import JudgeInput, Rubric, checked_rubric
from ragbench.scoring.scorer import Scorer


class JudgeResult(BaseModel):
    """One judge's verdicts on one answer set with the rubrics it graded by; failed verdicts are kept with
    their error, never scored."""

    spec: CellSpec
    rubrics: list[Rubric]
    judgements: list[Judgement]
    scorers: dict[str, list[str]] = {}  # scorer name -> its metric columns
    # The judge's correctness verdicts on the human-labelled answers of the eval cases (`human_answer`).
    calibration: list[Judgement] = []
    # `evaluation.judge_repeats`: a seeded sample of the verdicts asked again (`ragbench.scoring.repeats`)
    repeats: list[RepeatedVerdict] = []

    @property
    def summary(self) -> JudgeSummary:
        return summarise_judgements(self.judgements, self.rubrics, self.scorers)

    def case_values(self) -> dict[str, dict[str, float]]:
        return judge_case_values(self.judgements, self.rubrics, self.scorers)

    @classmethod
    def joined(cls, parts: Sequence[JudgeResult]) -> JudgeResult:
        """One judge key's verdicts made in rounds, in round order; the labelled answers' verdicts are the
        same in every round (the same cases), kept once."""
        if len({part.spec.id for part in parts}) != 1:
            raise ValueError("only verdicts of one judge key join")
        judgements = {j.case_id: j for part in reversed(parts) for j in part.judgements}
        ordered = dict.fromkeys(j.case_id for part in parts for j in part.judgements)
        repeats = [r for part in parts for r in part.repeats]
        return parts[0].model_copy(
            update={"judgements": [judgements[case] for case in ordered], "repeats": repeats}
        )

    @property
    def failures(self) -> int:
        """Verdicts the judge could not give (call failed or reply never valid), first samples, repeats
        and calibration alike: counted, never scored, and the step is not reused from the cache."""
        verdicts = [*self.judgements, *self.calibration]
        return sum(len(j.errors) + j.resample_failures for j in verdicts) + sum(
            r.error is not None for r in self.repeats
        )


def judge_cell(
    spec: CellSpec,
    answer_set: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    rubrics: Sequence[Rubric],
    scorers: Sequence[Scorer] = (),
    embed: Embed | None = None,
    llm_cache: str | None = None,
    samples: int = 1,
    repeats: JudgeRepeatsConfig | None = None,
    seed: int = 0,
) -> JudgeResult:
    """Judge the answers that exist; failed reader calls are counted by the table, not judged. `embed`:
    the scoring embedding model, for scorers that compare texts. `repeats`: a `seed`ed sample of the
    rubrics' verdicts asked again."""
    if spec.judge is None:
        raise ValueError(f"cell {spec.id} has no judge")
    if answer_set.external is not None and not answer_set.external.returned_contexts:
        rubrics = [rubric for rubric in rubrics if "passages" not in rubric.inputs]  # answer-only
        scorers = [scorer for scorer in scorers if "passages" not in scorer.needs]
    by_id = {case.id: case for case in cases}
    inputs = [
        JudgeInput(
            case_id=answer.case_id,
            question=answer.question,
            history=answer.history,
            answer=answer.answer,
            reference_answer=by_id[answer.case_id].reference_answer,
            contexts=[chunk.text for chunk in answer.contexts],
            tags=by_id[answer.case_id].tags,
            tolerance=by_id[answer.case_id].tolerance,
        )
        for answer in answer_set.answers
        if answer.answer is not None
    ]
    # a person's labels (`human_correctness`) grade the criterion the judge is checked on
    checked = checked_rubric(rubrics)
    labelled = calibration_inputs(cases) if checked is not None else []
    judgements = [Judgement(case_id=item.case_id) for item in inputs]
    calibration: list[Judgement] = []
    repeated: list[RepeatedVerdict] = []
    if inputs or labelled:
        with LLMClient(spec.judge, cache_location=llm_cache) as client:
            # the rubrics' verdicts first, then the other scorers: the metrics' order as declared
            every_scorer = [*rubric_scorers(rubrics), *scorers]
            apply_scorers(
                client, embed, inputs, every_scorer, judgements, desc=f"judge {spec.id}", samples=samples
            )
            if labelled:
                calibration = judge_answers(client, labelled, rubrics=[checked], desc="judge labelled")
            if repeats is not None and inputs:
                repeated = judge_repeats(client, inputs, rubrics, repeats, seed)
    return JudgeResult(
        spec=spec,
        rubrics=list(rubrics),
        judgements=judgements,
        calibration=calibration,
        repeats=repeated,
        scorers={scorer.name: [metric.column for metric in scorer.metrics()] for scorer in scorers},
    )


def pairwise_cell(
    judge_key: CellSpec,
    candidate: AnswerSet,
    baseline: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    labels: tuple[str, str],
    criterion: str,
    seed: int,
    confidence: float,
    llm_cache: str | None = None,
) -> PairwiseResult:
    """`judge_key`'s judge compares two answer sets of the same cases, both orders of each pair."""
    if judge_key.judge is None:
        raise ValueError(f"cell {judge_key.id} has no judge")
    baseline_answers = {answer.case_id: answer.answer for answer in baseline.answers}
    by_id = {case.id: case for case in cases}
    inputs = [
        PairwiseInput(
            case_id=answer.case_id,
            question=question_in_context(answer.question, answer.history),
            candidate_answer=answer.answer,
            baseline_answer=baseline_answers.get(answer.case_id),
            reference_answer=by_id[answer.case_id].reference_answer,
        )
        for answer in candidate.answers
    ]
    with LLMClient(judge_key.judge, cache_location=llm_cache) as client:
        return judge_pairs(
            client,
            inputs,
            candidate=labels[0],
            baseline=labels[1],
            judge=judge_key.judge.model,
            criterion=criterion,
            seed=seed,
            confidence=confidence,
            desc=f"pairwise {judge_key.id}",
        )


def calibration_inputs(cases: Sequence[EvalCase]) -> list[JudgeInput]:
    """The answers a person scored (`human_answer`), for the judge to grade as well."""
    return [
        JudgeInput(
            case_id=case.id,
            question=case.question,
            history=case.history,
            answer=case.human_answer,
            reference_answer=case.reference_answer,
            contexts=[],
            tags=case.tags,
            tolerance=case.tolerance,
        )
        for case in cases
        if case.human_answer is not None
    ]


def keyword_report(
    answer_set: AnswerSet, cases: Sequence[EvalCase], suites: Sequence[Suite]
) -> KeywordReport:
    """The suites run on the answers that exist (once per answer set, however many judges grade it)."""
    answered = {answer.case_id: answer.answer for answer in answer_set.answers if answer.answer is not None}
    return run_keyword_tests(cases, answered, suites)
