"""The judge steps: a module of their own, so a rubric's code is in no answering step's cache key."""

from typing import Annotated

from pydantic import BaseModel
from zenml import log_metadata

from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.judge_check import check_judge
from ragbench.generation.answers import AnswerSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.inputs.knowledge_base import Corpus
from ragbench.llm.client import LLMClient
from ragbench.retrieval.index import load_embedder
from ragbench.review.alignment import JudgeAlignment, aligned_rubric, measure_alignment
from ragbench.review.labels import ReviewLabels
from ragbench.scoring.cells import JudgeResult, judge_cell, pairwise_cell
from ragbench.scoring.pairwise import PairwiseResult
from ragbench.scoring.registry import JudgeCheckConfig, scorers_from_identities
from ragbench.scoring.repeats import JudgeRepeatsConfig
from ragbench.scoring.rubrics import Rubric
from ragbench.stats.inference import StatisticsConfig
from steps.caching import OPERATIONS, Operations, cached_step, never_reuse_this_step_run
from steps.identity import CellIdentity, LLMIdentity, PluginIdentity
from steps.spend import step_spending


class RubricSet(BaseModel):
    """Rubrics whole (their prompts are data, so a rubric's text is in the cache key of a step given it)."""

    rubrics: list[Rubric]


class AlignmentSetup(BaseModel):
    """A judge aligned by a person's labels: its name as the labels record it, and how many of them to
    show it as examples (`ragbench.review.alignment`)."""

    judge: str
    examples: int


@cached_step(ignored_inputs=(OPERATIONS,))
def judge_answers_cell(
    answers: AnswerSet,
    eval_suite: EvalSuite,
    operations: Operations,
    spec: CellIdentity,
    rubrics: RubricSet,
    scorers: list[PluginIdentity],
    embedding_model: str | None = None,
    samples: int = 1,
    review_labels: ReviewLabels | None = None,
    alignment: AlignmentSetup | None = None,
    repeats: JudgeRepeatsConfig | None = None,
    seed: int = 0,
) -> Annotated[JudgeResult, "judgements"]:
    """One judge over one answer set: a second judge re-judges the same answers, never re-answers. The
    rubrics arrive whole (their prompts are data), so a rubric's text is part of the step's cache key; the
    scorers by their identity (name, version, source digest: `Scorer.identity`), so changing a scorer's
    code or package version asks again. `embedding_model`: what scorers compare texts with.
    `review_labels` and `alignment`: the judge aligned by a person's labels
    (`ragbench.review.alignment`). `repeats`: a `seed`ed sample of verdicts asked again
    (`evaluation.judge_repeats`)."""
    chosen_rubrics = rubrics.rubrics
    if review_labels is not None and alignment is not None:
        chosen_rubrics = [
            aligned_rubric(rubric, review_labels, alignment.judge, alignment.examples)
            for rubric in chosen_rubrics
        ]
    chosen = scorers_from_identities([scorer.root for scorer in scorers])
    embedder = None
    if any(scorer.uses_embeddings for scorer in chosen):
        if embedding_model is None:
            raise ValueError("a scorer compares texts by embedding but the step got no embedding_model")
        embedder = load_embedder(embedding_model, operations.device)
    with step_spending(operations):
        judged = judge_cell(
            spec.cell().with_operations(operations.llm),
            answers,
            eval_suite.cases,
            rubrics=chosen_rubrics,
            scorers=chosen,
            embed=embedder.encode_queries if embedder is not None else None,
            llm_cache=operations.llm_cache,
            samples=samples,
            repeats=repeats,
            seed=seed,
        )
    log_metadata({"judge": judged.summary.model_dump()})
    if judged.failures:
        never_reuse_this_step_run()
    return judged


@cached_step(ignored_inputs=(OPERATIONS,))
def judge_pairwise_cell(
    candidate: AnswerSet,
    baseline: AnswerSet,
    eval_suite: EvalSuite,
    operations: Operations,
    spec: CellIdentity,
    criterion: str,
    seed: int,
) -> Annotated[PairwiseResult, "pairwise"]:
    """One judge asks, case by case and in both orders, which of two answer sets answered better. The two
    sets' names in the report and the confidence of the win-rate interval come with the `operations`,
    outside the cache key: they are for people, the verdicts do not depend on them."""
    judge_key = spec.cell()
    with step_spending(operations):
        result = pairwise_cell(
            judge_key.with_operations(operations.llm),
            candidate,
            baseline,
            eval_suite.cases,
            labels=operations.pairwise_labels[judge_key.id],
            criterion=criterion,
            seed=seed,
            confidence=operations.confidence,
            llm_cache=operations.llm_cache,
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


@cached_step(ignored_inputs=(OPERATIONS,))
def check_judge_on_planted_errors(
    corpus: Corpus,
    eval_suite: EvalSuite,
    operations: Operations,
    judge: LLMIdentity,
    rubric: Rubric,
    check: JudgeCheckConfig,
) -> Annotated[JudgeCard, "judge_card"]:
    """One judge's card, once per judge however many cells it grades: its verdicts on planted errors
    made from the eval cases' references and the knowledge base's vocabulary (`judge`: the LLM's result
    fields). Its operations, its name in the report and the intervals' level come with the `operations`,
    outside the cache key: the verdicts do not depend on them (a card served from the cache keeps the
    level it was made with, as a pairwise comparison does)."""
    llm = judge.llm()
    with step_spending(operations):
        card = check_judge(
            llm.model_copy(update=operations.llm.get(llm.result_key, {})),
            operations.judge_names.get(llm.result_key, llm.model),
            eval_suite.cases,
            [document.text for document in corpus.documents],
            rubric,
            check,
            confidence=operations.confidence,
            llm_cache=operations.llm_cache,
        )
    log_metadata({"judge_card": card.model_dump(mode="json", exclude={"verdicts"})})
    if card.parse_failures or card.refused_by_budget:
        never_reuse_this_step_run()
    return card


@cached_step(ignored_inputs=(OPERATIONS,))
def measure_judge_alignment(
    review_labels: ReviewLabels,
    operations: Operations,
    judge: LLMIdentity,
    rubrics: RubricSet,
    examples: int,
    statistics: StatisticsConfig,
) -> Annotated[JudgeAlignment, "judge_alignment"]:
    """One judge against a person's labels, as it is and aligned by them (held out: no call shows the
    case it grades), once per judge however many cells it grades."""
    llm = judge.llm()
    name = operations.judge_names.get(llm.result_key, llm.model)
    with (
        step_spending(operations),
        LLMClient(
            llm.model_copy(update=operations.llm.get(llm.result_key, {})), cache_location=operations.llm_cache
        ) as client,
    ):
        measured = measure_alignment(
            client,
            review_labels,
            rubrics.rubrics,
            judge=name,
            examples=examples,
            confidence=statistics.confidence,
            resamples=statistics.resamples,
            seed=statistics.seed,
        )
    log_metadata({"judge_alignment": [c.model_dump(mode="json") for c in measured.criteria]})
    if measured.failures:
        never_reuse_this_step_run()
    return measured
