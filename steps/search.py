"""The steps every search that confirms its winner shares (staged and model-based): the split of the seeded
case order into the search's cases and the held-out ones, and the confirmation of the finalists on the
held-out cases. Both cached like any step: a rerun asks no LLM again and makes the same verdict."""

from typing import Annotated

from zenml import log_metadata

from materializers.search import ConfirmationMaterializer
from ragbench.analysis.holdout import CaseSplit, Confirmation, confirm, split_order
from ragbench.analysis.results import CellResults
from ragbench.generation.answers import AnswerSet, case_order
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.registry import EvaluationConfig
from ragbench.stats.inference import StatisticsConfig
from steps.caching import cached_step
from steps.identity import CellIdentity

CASE_SPLIT = "case_split"
CONFIRMATION = "confirmation"


@cached_step()
def split_cases(
    eval_suite: EvalSuite, holdout: float, cases: int | None, seed: int
) -> Annotated[CaseSplit, CASE_SPLIT]:
    """The first `cases` of the seeded order (None: every case) cut in two: the search's cases, its head,
    and the held-out `holdout` share, its tail, which the answer steps reach by first/stop indices."""
    order = [case.id for case in case_order(eval_suite.cases, seed)]
    split = split_order(order[:cases] if cases else order, holdout)
    log_metadata({"search_cases": len(split.search), "held_out_cases": len(split.held_out)})
    return split


@cached_step(output_materializers={CONFIRMATION: ConfirmationMaterializer})
def confirm_finalists(
    split: CaseSplit,
    eval_suite: EvalSuite,
    answer_sets: list[AnswerSet],
    judged: list[JudgeResult],
    finalists: list[CellIdentity],
    metric: MetricInfo,
    evaluation: EvaluationConfig,
    metrics_k: int,
    statistics: StatisticsConfig,
) -> Annotated[Confirmation, CONFIRMATION]:
    """The finalists (best by the search's estimate first: the first is the search's winner) on the
    held-out cases only, beside their means on the search cases they answered: `answer_sets` and
    `judged` hold every step of theirs, the search's and the held-out ones."""
    cells = [finalist.cell() for finalist in finalists]
    results = CellResults.collect(
        cells, [], answer_sets, judged, eval_suite.cases, evaluation.scoring(metrics_k).suites
    )
    search, held_out = set(split.search), set(split.held_out)
    values = {cell.id: results.case_values(cell).get(metric.column, {}) for cell in cells}
    search_means = {}
    for cell, by_case in values.items():
        present = [v for case, v in by_case.items() if case in search and v == v]  # NaN: not scored
        search_means[cell] = sum(present) / len(present) if present else float("nan")
    return confirm(  # its metadata: ConfirmationMaterializer
        {
            cell: {case: v for case, v in by_case.items() if case in held_out}
            for cell, by_case in values.items()
        },
        search_means,
        cells[0].id,
        metric=metric.column,
        higher_is_better=metric.higher_is_better,
        confidence=statistics.confidence,
        seed=statistics.seed,
        resamples=statistics.resamples,
        bounds=metric.bounds,
        binary=metric.binary,
    )
