"""The judge card of one judge: it grades planted errors made from a seeded sample of the eval cases'
reference answers (`ragbench.scoring.planted`) next to the unchanged references, with the rubric whose
verdicts it is checked on, through the run's LLM client (cached: a later run pays nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ragbench.analysis.judge_card import JudgeCard, PlantedVerdict, build_card, planted_inputs, sample_cases
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.budget import is_budget_refusal
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.scoring.judge import judge_answers
from ragbench.scoring.planted import PLANTED_KINDS, UNCHANGED, knowledge_vocabulary
from ragbench.scoring.registry import JudgeCheckConfig
from ragbench.scoring.rubrics import BUILTIN_RUBRICS, Rubric, checked_rubric


def card_rubric(rubrics: Iterable[Rubric]) -> Rubric:
    """The rubric a judge is checked with: the run's rubric whose criterion checks the judge
    (`Criterion.checks_judge`), or the built-in correctness rubric when the run grades without it."""
    return checked_rubric(rubrics) or BUILTIN_RUBRICS["correctness"]


def check_judge(
    judge: LLMSettings,
    judge_name: str,
    cases: Sequence[EvalCase],
    documents: Iterable[str],
    rubric: Rubric,
    check: JudgeCheckConfig,
    *,
    confidence: float,
    llm_cache: str | None = None,
) -> JudgeCard:
    """`judge`'s card on `check.cases` sampled cases; `documents`: the knowledge base's texts, whose own
    vocabulary the swapped entities come from. Only the error kinds the rubric must catch are planted
    (`Rubric.judge_check_kinds`): a verdict that could not count against the judge is not paid for."""
    criterion = next((c for c in rubric.criteria if c.checks_judge), rubric.criteria[0])
    kinds = rubric.judge_check_kinds or PLANTED_KINDS
    planted = [
        entry
        for entry in planted_inputs(
            sample_cases(cases, check.cases, check.seed), knowledge_vocabulary(documents), check.seed
        )
        if entry.kind == UNCHANGED or entry.kind in kinds
    ]
    with LLMClient(judge, cache_location=llm_cache) as client:
        judgements = judge_answers(
            client, [item for item, _, _ in planted], rubrics=[rubric], desc=f"judge card {judge_name}"
        )
    verdicts = [
        PlantedVerdict(
            case_id=item.case_id,
            kind=kind,
            change=change,
            score=judgement.scores.get(criterion.name),  # None: the judge gave no valid verdict
            seconds=judgement.latency_s,
            refused=any(is_budget_refusal(error) for error in judgement.errors.values()),
        )
        for (item, kind, change), judgement in zip(planted, judgements, strict=True)
    ]
    return build_card(
        verdicts,
        judge=judge_name,
        rubric=rubric.name,
        criterion=criterion.name,
        min_detection=check.min_detection,
        confidence=confidence,
        scale=criterion.scale,
        counted_kinds=kinds,
    )
