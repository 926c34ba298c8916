"""The judge steps: a module of their own, so a rubric's code is in no answering step's cache key."""

from typing import Annotated

from zenml import log_metadata, step

from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.scoring.cells import JudgeResult, judge_cell, pairwise_cell
from ragbench.scoring.pairwise import PairwiseResult
from ragbench.scoring.rubrics import Rubric
from steps.caching import OPERATIONS, Operations, never_reuse_this_step_run, step_cache_policy


@step(cache_policy=step_cache_policy(__name__, ignored_inputs=(OPERATIONS,)))
def judge_answers_cell(
    answers: AnswerSet,
    eval_suite: EvalSuite,
    operations: dict,
    spec: dict,
    rubrics: list[dict],
    samples: int = 1,
) -> Annotated[JudgeResult, "judgements"]:
    """One judge over one answer set: a second judge re-judges the same answers, never re-answers. The
    rubrics arrive whole (their prompts are data), so a rubric's text is part of the step's cache key."""
    settings = Operations.model_validate(operations)
    judged = judge_cell(
        CellSpec.model_validate(spec).with_operations(settings.llm),
        answers,
        eval_suite.cases,
        rubrics=[Rubric.model_validate(rubric) for rubric in rubrics],
        llm_cache=settings.llm_cache,
        samples=samples,
    )
    log_metadata({"judge": judged.summary.model_dump()})
    if judged.failures:
        never_reuse_this_step_run()
    return judged


@step(cache_policy=step_cache_policy(__name__, ignored_inputs=(OPERATIONS,)))
def judge_pairwise_cell(
    candidate: AnswerSet,
    baseline: AnswerSet,
    eval_suite: EvalSuite,
    operations: dict,
    spec: dict,
    criterion: str,
    seed: int,
) -> Annotated[PairwiseResult, "pairwise"]:
    """One judge asks, case by case and in both orders, which of two answer sets answered better. The two
    sets' names in the report and the confidence of the win-rate interval come with the `operations`,
    outside the cache key: they are for people, the verdicts do not depend on them."""
    settings = Operations.model_validate(operations)
    judge_key = CellSpec.model_validate(spec)
    result = pairwise_cell(
        judge_key.with_operations(settings.llm),
        candidate,
        baseline,
        eval_suite.cases,
        labels=settings.pairwise_labels[judge_key.id],
        criterion=criterion,
        seed=seed,
        confidence=settings.confidence,
        llm_cache=settings.llm_cache,
    )
    log_metadata(
        {
            "wins": result.wins,
            "ties": result.ties,
            "losses": result.losses,
            "failures": result.failures,
            "flip_share": result.flip_share,
            "sign_test_p": result.sign_test_p,
        }
    )
    if result.failures:
        never_reuse_this_step_run()
    return result
