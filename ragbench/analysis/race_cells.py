"""A race's round, and a model-based search's trial, in grid terms: the per-case values of the search's
metric and the calls of a cell, read from the answer sets and verdicts made so far exactly as the results
table reads them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragbench.analysis.racing import RaceTrace, look
from ragbench.analysis.results import CellResults
from ragbench.analysis.trials import TrialValues
from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.keyword_tests import Suite
from ragbench.stats.inference import StatisticsConfig


def cell_calls(results: CellResults, cell: CellSpec) -> int:
    """The reader's and the judge's calls behind a cell's answers so far (a cached call counts: the
    question is what a full evaluation would ask)."""
    answers = results.answers_of(cell)
    judged = results.judged_of(cell)
    reader = len(answers.answers) if answers is not None else 0
    return reader + (sum(j.calls for j in judged.judgements) if judged is not None else 0)


def look_at_round(
    trace: RaceTrace,
    cells: Sequence[CellSpec],
    answer_sets: Sequence[AnswerSet],
    judged: Sequence[JudgeResult],
    cases: Sequence[EvalCase],
    suites: Sequence[Suite],
    statistics: StatisticsConfig,
) -> RaceTrace:
    """The race after its latest round: every answer set and verdict made so far (all rounds) gives each
    survivor's values of the race's metric on the cases answered."""
    results = CellResults.collect(cells, [], answer_sets, judged, cases, suites)
    racing = [cell for cell in cells if cell.id in trace.cells]
    values = {cell.id: results.case_values(cell).get(trace.settings.metric, {}) for cell in racing}
    calls = {cell.id: cell_calls(results, cell) for cell in racing}
    survivors = set(trace.survivors)
    return look(
        trace,
        {cell: by_case for cell, by_case in values.items() if cell in survivors},
        calls,
        seed=statistics.seed,
        resamples=statistics.resamples,
    )


def trial_values(
    cell: CellSpec,
    answer_sets: Sequence[AnswerSet],
    judged: Sequence[JudgeResult],
    cases: Sequence[EvalCase],
    suites: Sequence[Suite],
    metric: str,
    *,
    trial: int,
    batch: int,
) -> TrialValues:
    """A trial's values after `batch`, from every batch's answers and verdicts of its cell so far."""
    results = CellResults.collect([cell], [], answer_sets, judged, cases, suites)
    by_case = results.case_values(cell).get(metric, {})
    return TrialValues(
        trial=trial,
        batch=batch,
        cell=cell.id,
        values={case: value for case, value in by_case.items() if math.isfinite(value)},
        calls=cell_calls(results, cell),
    )
