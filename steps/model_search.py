"""The model-based search's steps: a trial's values after each batch (what the search is told), and the
record of every trial, re-derived from those values. Both cached like any step: a rerun asks no LLM again
and makes the same record."""

from typing import Annotated

from zenml import log_metadata

from materializers.model_search import ModelSearchTraceMaterializer
from ragbench.analysis.race_cells import trial_values
from ragbench.analysis.strategies import ModelSearch
from ragbench.analysis.trials import (
    ModelSearchTrace,
    TrialValues,
    batches,
    new_search,
    replay_trials,
)
from ragbench.generation.answers import AnswerSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.registry import EvaluationConfig
from steps.caching import cached_step
from steps.identity import CellIdentity

TRIAL_VALUES = "trial_values"
MODEL_SEARCH = "model_search"


@cached_step()
def measure_trial(
    eval_suite: EvalSuite,
    answer_sets: list[AnswerSet],
    judged: list[JudgeResult],
    cell: CellIdentity,
    evaluation: EvaluationConfig,
    metrics_k: int,
    metric: str,
    trial: int,
    batch: int,
) -> Annotated[TrialValues, TRIAL_VALUES]:
    """A trial's per-case values of the search's metric after `batch`, from its answers and verdicts of
    every batch so far (`answer_sets`, `judged`), read as the results table reads them."""
    values = trial_values(
        cell.cell(),
        answer_sets,
        judged,
        eval_suite.cases,
        evaluation.scoring(metrics_k).suites,
        metric,
        trial=trial,
        batch=batch,
    )
    log_metadata({"trial": trial, "batch": batch, "cases": len(values.values), "calls": values.calls})
    return values


@cached_step(output_materializers={MODEL_SEARCH: ModelSearchTraceMaterializer})
def record_trials(
    recorded: list[TrialValues],
    cells: list[CellIdentity],
    search: ModelSearch,
    metric: MetricInfo,
    search_cases: int,
) -> Annotated[ModelSearchTrace, MODEL_SEARCH]:
    """Every trial, replayed from the values the run's steps recorded (the search asks again, and must ask
    the same cells and prune them after the same batches), the finalists and the calls used."""
    specs = [cell.cell() for cell in cells]
    searcher = new_search(specs, search, higher_is_better=metric.higher_is_better, search_cases=search_cases)
    spans = batches(search_cases, search.batch)
    trials = replay_trials(searcher, spans, recorded, budget_calls=search.budget_calls)
    calls = sum(trial.calls for trial in trials)
    answered = sum(stop - first for trial in trials for first, stop in spans[: trial.batches])
    trace = ModelSearchTrace(
        metric=search.metric,
        metric_label=metric.label,
        higher_is_better=metric.higher_is_better,
        max_cells=search.max_cells,
        startup_trials=search.startup_trials,
        seed=search.seed,
        batch=search.batch,
        grid_cells=len(specs),
        search_cases=search_cases,
        trials=trials,
        finalists=searcher.finalists(search.finalists),
        calls_used=calls,
        calls_full=round(calls / answered * len(specs) * search_cases) if answered else 0,
    )
    return trace
