"""A model-based search in grid terms: the space TPE searches (each varying axis a categorical parameter),
each trial's per-case values (`TrialValues`, read from its answer sets and verdicts by
`ragbench.analysis.race_cells.trial_values`, as the results table reads them), and the loop that asks a
cell, spends the search cases on it batch by batch and stops it when the pruner says so, until the cell
budget is spent.

The loop (`run_trials`) is written once and run twice: by the pipeline, whose `evaluate` makes the answer,
judge and values steps of a batch, and by the step that records the trials (`replay_trials`), whose
`evaluate` reads the values those steps made. The record is therefore the search's decisions re-derived
from artifacts, and a recorded trial that the replay would not have asked is an error, not a silent
difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.model_search import TrialSearch
from ragbench.analysis.racing import planned_looks
from ragbench.analysis.strategies import ModelSearch
from ragbench.grid.cell import CellSpec, varying_axes

# Calls a case costs before any trial has said: one reader call and one verdict.
FIRST_GUESS_CALLS_PER_CASE = 2


class TrialValues(BaseModel):
    """One trial after one batch: its cell's values of the search's metric on every search case answered
    so far (case id -> value; a case not scored is absent) and the reader and judge calls behind them."""

    trial: int  # 1-based, in the order the search asked
    batch: int  # 1-based
    cell: str
    values: dict[str, float]
    calls: int


def new_search(
    cells: Sequence[CellSpec], search: ModelSearch, *, higher_is_better: bool, search_cases: int
) -> TrialSearch:
    """The search a run starts with, the same in the pipeline and in the replay: TPE over the cells, the
    race's rule as the pruner at alpha split over a full trial's batches."""
    return TrialSearch(
        search_space(cells),
        higher_is_better=higher_is_better,
        max_cells=search.max_cells,
        startup_trials=search.startup_trials,
        seed=search.seed,
        alpha=search.alpha,
        planned_looks=planned_looks(search_cases, search.batch),
    )


def search_space(cells: Sequence[CellSpec]) -> dict[str, dict[str, str]]:
    """cell id -> {axis: value} over the axes that vary in the grid (an axis of one value tells no cell
    from another), each value by what tells it apart (`CellSpec.value_key`): TrialSearch's parameters."""
    axes = varying_axes(list(cells))
    return {cell.id: {axis: cell.value_key(axis) for axis in axes} for cell in cells}


def batches(cases: int, batch: int) -> list[tuple[int, int]]:
    """The (first, stop) spans of the search cases, `batch` at a time: the last may be shorter."""
    return [(first, min(first + batch, cases)) for first in range(0, cases, batch)]


class Trial(BaseModel):
    """One trial as the search ran it: its cell, the search cases it answered, their mean, whether the
    pruner stopped it (and after how many batches), and the calls it cost."""

    number: int
    cell: str
    cases: int
    mean: float | None
    pruned: bool
    batches: int
    calls: int


# A batch's evaluation: (trial, batch, cell id, first, stop) -> the trial's values after it.
Evaluate = Callable[[int, int, str, int, int], TrialValues]


def run_trials(
    search: TrialSearch,
    spans: Sequence[tuple[int, int]],
    evaluate: Evaluate,
    *,
    budget_calls: int | None = None,
) -> list[Trial]:
    """Ask a cell, answer the search cases on it span by span, report each span's values to the search
    (which may prune it), tell it when done; until the search asks nothing more (its cell budget is spent
    or every cell was tried) or the next batch would pass `budget_calls` (estimated from the calls per case
    seen so far). Deterministic given the search's seed and what `evaluate` returns."""
    trials: list[Trial] = []
    calls = 0
    cases = 0
    while (cell := search.ask()) is not None:
        number = len(trials) + 1
        done: TrialValues | None = None
        pruned = False
        spent = 0
        for batch, (first, stop) in enumerate(spans, start=1):
            per_case = calls / cases if cases else FIRST_GUESS_CALLS_PER_CASE
            if budget_calls is not None and calls + per_case * (stop - first) > budget_calls:
                break
            values = evaluate(number, batch, cell, first, stop)
            calls += values.calls - (done.calls if done is not None else 0)
            cases += stop - first
            done, spent = values, batch
            if search.report(cell, values.values):
                pruned = True
                break
        if done is None:  # the budget allowed not one batch of this trial
            break
        search.tell(cell)
        trials.append(
            Trial(
                number=number,
                cell=cell,
                cases=len(done.values),
                mean=sum(done.values.values()) / len(done.values) if done.values else None,
                pruned=pruned,
                batches=spent,
                calls=done.calls,
            )
        )
        if spent < len(spans) and not pruned:  # the budget stopped it mid-way
            break
    return trials


def replay_trials(
    search: TrialSearch,
    spans: Sequence[tuple[int, int]],
    recorded: Sequence[TrialValues],
    *,
    budget_calls: int | None = None,
) -> list[Trial]:
    """The trials again, from the values the pipeline's steps recorded: the search must ask the same cells
    in the same order and stop them after the same batches, or the record does not describe the run."""
    by_batch = {(values.trial, values.batch): values for values in recorded}

    def evaluate(trial: int, batch: int, cell: str, first: int, stop: int) -> TrialValues:
        values = by_batch.get((trial, batch))
        if values is None or values.cell != cell:
            raise ValueError(
                f"the search's replay asks cell {cell} for trial {trial}, batch {batch}; the run recorded "
                f"{values.cell if values else 'nothing'}: the trials do not follow from their values"
            )
        return values

    trials = run_trials(search, spans, evaluate, budget_calls=budget_calls)
    if (used := sum(trial.batches for trial in trials)) != len(by_batch):
        raise ValueError(f"the run recorded {len(by_batch)} batches, the search's replay used {used}")
    return trials


class ModelSearchTrace(BaseModel):
    """What the model-based search did: its settings, every trial in the order it was asked (cell, cases,
    mean, pruned or not), the finalists carried to confirmation and the calls it used against the full
    grid's. A finding of the run: the report's "Search: model-based" section."""

    metric: str
    metric_label: str
    higher_is_better: bool
    max_cells: int
    startup_trials: int
    seed: int
    batch: int
    grid_cells: int
    search_cases: int
    trials: list[Trial]
    finalists: list[str]
    calls_used: int
    calls_full: int  # every cell answering every search case, at the calls per case the trials used

    @property
    def winner(self) -> str | None:
        return self.finalists[0] if self.finalists else None

    def summary(self, names: Mapping[str, str]) -> str:
        """One line: what the search tried, what it pruned, what won, at what share of the calls."""
        pruned = sum(trial.pruned for trial in self.trials)
        winner = names.get(self.winner, self.winner) if self.winner else "none (no trial completed)"
        share = f"{self.calls_used / self.calls_full:.0%}" if self.calls_full else "n/a"
        return (
            f"Model-based search (TPE): {len(self.trials)} of {self.grid_cells} cells tried, {pruned} "
            "pruned; "
            f"winner {winner}; {self.calls_used} calls, {share} of every cell answering the "
            f"{self.search_cases} search cases."
        )

    def status(self, cell: str, *, roles: bool = True) -> str:
        """A cell's part in the search, for its row: its trial and how it ended, or not tried; `roles`:
        name the winner and the finalists (False: the confirmation names them)."""
        trial = next((trial for trial in self.trials if trial.cell == cell), None)
        if trial is None:
            return "not tried"
        return f"trial {trial.number}: {self.outcome(trial, roles=roles)} (n={trial.cases})"

    def outcome(self, trial: Trial, *, roles: bool = True) -> str:
        if trial.pruned:
            return f"pruned after batch {trial.batches}"
        if not roles:
            return "complete"
        if trial.cell == self.winner:
            return "winner"
        return "finalist" if trial.cell in self.finalists else "complete"

    def rows(self, names: Mapping[str, str]) -> list[dict[str, object]]:
        """One row per trial, in the order asked."""
        return [
            {
                "trial": trial.number,
                "cell": names.get(trial.cell, trial.cell),
                "cases": trial.cases,
                self.metric_label: "" if trial.mean is None else f"{trial.mean:.3f}",
                "outcome": self.outcome(trial),
                "calls": trial.calls,
            }
            for trial in self.trials
        ]
