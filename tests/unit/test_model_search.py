"""TrialSearch on Optuna's TPE: deterministic for a seed, a cell budget it honours, repeated suggestions
that spend nothing, and the race's pruning rule stopping a clearly worse trial (and not a tied one)."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.analysis.model_search import TrialSearch, replay_model_search
from ragbench.analysis.strategies import ModelSearch

AXES = {"chunk": ["128", "256", "512"], "reader": ["a", "b"], "prompt": ["p", "q"]}
CELLS = {
    f"{c}/{r}/{p}": {"chunk": c, "reader": r, "prompt": p}
    for c in AXES["chunk"]
    for r in AXES["reader"]
    for p in AXES["prompt"]
}
CASES = [f"q{i:02d}" for i in range(24)]


def quality(cell: str) -> float:
    labels = CELLS[cell]
    return {"128": 0.0, "256": 1.0, "512": 0.5}[labels["chunk"]] + (labels["reader"] == "b") * 0.5


def answers(seed: int = 0) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {cell: dict(zip(CASES, quality(cell) + rng.normal(0, 0.2, 24), strict=True)) for cell in CELLS}


def run(search: TrialSearch, values: dict[str, dict[str, float]]) -> list[str]:
    """Every asked cell answers all cases at once (no pruning look until the end)."""
    asked = []
    while (cell := search.ask()) is not None:
        asked.append(cell)
        search.report(cell, values[cell])
        search.tell(cell)
    return asked


def new(seed: int = 0, max_cells: int = 6, **extra) -> TrialSearch:
    return TrialSearch(
        CELLS, higher_is_better=True, max_cells=max_cells, startup_trials=3, seed=seed, **extra
    )


def test_the_same_seed_and_values_ask_the_same_cells() -> None:
    values = answers()
    first, second = new(), new()
    assert run(first, values) == run(second, values)
    assert [r.model_dump() for r in first.trials()] == [r.model_dump() for r in second.trials()]
    assert run(new(seed=1, max_cells=12), values) != run(new(seed=2, max_cells=12), values)


def test_max_cells_is_honoured_and_no_cell_is_asked_twice() -> None:
    search = new(max_cells=5)
    asked = run(search, answers())
    assert len(asked) == 5 == len(set(asked))
    assert search.stop == "max_cells" and search.ask() is None
    assert [r.order for r in search.trials()] == list(range(5))


def test_a_repeated_suggestion_spends_no_budget() -> None:
    """With a budget of the whole space, TPE proposes cells it knows; each is told its value, and every
    cell is asked once (or the search stops on repeats)."""
    search = new(max_cells=len(CELLS))
    asked = run(search, answers())
    assert len(asked) == len(set(asked))
    assert search.repeats > 0
    assert len(asked) == len(CELLS) or search.stop == "converged"
    assert len(search.trials()) == len(asked)


def test_tpe_finds_the_best_region() -> None:
    search = new(max_cells=8)
    run(search, answers())
    assert search.best is not None and CELLS[search.best]["chunk"] == "256"
    assert search.finalists(2)[0] == search.best


def test_a_clearly_worse_trial_is_pruned_and_a_tied_one_is_not() -> None:
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 0.1, 24)
    search = new(max_cells=3, planned_looks=3)
    first = search.ask()
    assert first is not None
    good = dict(zip(CASES, 3.0 + noise, strict=True))
    assert search.report(first, good) is False  # no incumbent yet: nothing to prune against
    search.tell(first)
    second = search.ask()
    assert second is not None
    worse = {case: value - 1.0 for case, value in good.items()}
    eight = dict(list(worse.items())[:8])
    assert search.report(second, eight) is True  # 8 cases all 1 behind: p = 2/256 < 0.05 / 3
    search.tell(second)
    third = search.ask()
    assert third is not None
    tied = {case: value + rng.normal(0, 0.1) for case, value in list(good.items())[:8]}
    assert search.report(third, tied) is False
    search.tell(third)
    records = {r.cell: r for r in search.trials()}
    assert records[second].pruned and records[second].cases == 8
    assert not records[third].pruned
    assert search.best in {first, third} and search.finalists(3) == [
        r.cell for r in sorted(records.values(), key=lambda r: -r.mean) if not r.pruned
    ]


def test_a_trial_must_be_told_before_the_next_is_asked() -> None:
    search = new()
    cell = search.ask()
    with pytest.raises(RuntimeError, match="still open"):
        search.ask()
    with pytest.raises(RuntimeError, match="not the open trial"):
        search.report("nonexistent", {})
    assert cell is not None


def test_a_grid_that_is_not_a_full_product_is_searched_over_its_own_cells() -> None:
    cells = {
        "bm25": {"retriever": "bm25", "embedding": "-"},
        "dense-a": {"retriever": "dense", "embedding": "a"},
        "dense-b": {"retriever": "dense", "embedding": "b"},
    }
    search = TrialSearch(cells, higher_is_better=False, max_cells=3, startup_trials=2, seed=0)
    asked = run(search, {cell: dict.fromkeys(CASES, float(i)) for i, cell in enumerate(cells)})
    assert sorted(asked) == sorted(cells)
    assert search.best == "bm25"  # lower is better


def tpe(**changes: object) -> ModelSearch:
    """The config's own section, as the pipeline passes it."""
    fields = {"strategy": "tpe", "metric": "score", "batch": 4, "max_cells": 6, "startup_trials": 3}
    return ModelSearch.model_validate({**fields, "holdout": 0.25, "finalists": 2, **changes})


def test_the_replay_confirms_the_best_complete_trials_on_held_out_cases() -> None:
    values = answers()
    plan = replay_model_search(CELLS, values, CASES, tpe(), higher_is_better=True, resamples=500)
    assert plan.split.held_out == CASES[18:]
    assert len(plan.trials) == 6 and plan.winner == plan.finalists[0]
    assert plan.confirmation is not None and plan.confirmation.confirmed[plan.winner].n == 6
    assert plan.calls == 2 * (sum(r.cases for r in plan.trials) + 6 * len(plan.finalists))
    assert replay_model_search(CELLS, values, CASES, tpe(), higher_is_better=True, resamples=500) == plan
