"""A stage keeps its best key's tie set on the paired test with Holm, and the staged search replayed on known
values keeps the near-tied key that answers better, drops the clear loser and confirms on held-out cases."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.analysis.staged import (
    StagedOracle,
    cells_within,
    keep_tie_set,
    replay_staged,
    tie_break_column,
)
from ragbench.analysis.strategies import StagedSearch

CASES = [f"q{i}" for i in range(6)]


def decide(
    values: dict[str, dict[str, float]],
    *,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    metric: str = "mrr",
    tie_break: tuple[str, dict[str, dict[str, float]]] | None = None,
):
    return keep_tie_set(
        values,
        stage="retrieve",
        metric=metric,
        higher_is_better=higher_is_better,
        alpha=alpha,
        seed=0,
        resamples=2000,
        tie_break=tie_break,
    )


def constant(value: float, cases: list[str] = CASES) -> dict[str, float]:
    return dict.fromkeys(cases, value)


def test_a_near_tie_is_kept_and_a_clear_loser_dropped() -> None:
    rng = np.random.default_rng(0)
    cases = [f"q{i}" for i in range(40)]
    best = rng.uniform(0.5, 1.0, 40)
    values = {
        "best": dict(zip(cases, best, strict=True)),
        # a hair behind on average, ahead on half the cases
        "near": dict(zip(cases, best + np.where(np.arange(40) % 2 == 0, 0.05, -0.06), strict=True)),
        "loser": dict(zip(cases, best - 0.3 + rng.normal(0, 0.05, 40), strict=True)),
    }
    decision = decide(values)
    assert decision.best == "best" and decision.kept == ["best", "near"]
    assert [d.key for d in decision.dropped] == ["loser"]
    dropped = decision.dropped[0]
    assert dropped.difference == pytest.approx(float(np.mean(list(values["loser"].values())) - np.mean(best)))
    assert dropped.p_value < dropped.threshold <= 0.05
    assert decision.n_cases == 40
    assert decision.summary().startswith("retrieve stage on mrr over 40 case(s): kept 2 of 3 (best best, ")


def test_holm_keeps_two_losers_a_single_test_would_drop() -> None:
    """Six cases all behind: the exact sign-flip p is 2/2^6 = 0.031, under alpha alone, above Holm's first
    level alpha/2 for two comparisons."""
    alone = decide({"best": constant(1.0), "loser": constant(0.0)})
    assert alone.kept == ["best"] and alone.dropped[0].p_value == pytest.approx(2 / 64)
    two = decide({"best": constant(1.0), "loser": constant(0.0), "other": constant(0.5)})
    assert two.kept == ["best", "other", "loser"] and two.dropped == []


def test_keys_with_the_same_values_are_one_comparison() -> None:
    """Twins of a loser (a flat and an HNSW index returning the same lists) do not make Holm stricter."""
    decision = decide({"best": constant(1.0), "flat": constant(0.0), "hnsw": constant(0.0)})
    assert decision.kept == ["best"]
    assert [d.key for d in decision.dropped] == ["flat", "hnsw"]
    twin = decide({"best": constant(1.0), "best-hnsw": constant(1.0), "loser": constant(0.0)})
    assert twin.kept == ["best", "best-hnsw"]


def test_lower_is_better_and_a_single_key() -> None:
    decision = decide({"fast": constant(1.0), "slow": constant(3.0)}, higher_is_better=False)
    assert decision.best == "fast" and [d.key for d in decision.dropped] == ["slow"]
    assert decision.dropped[0].difference == pytest.approx(2.0)
    alone = decide({"only": constant(0.4)})
    assert alone.kept == ["only"] and alone.dropped == [] and alone.best == "only"


def test_the_cell_budget_cuts_tied_keys_worst_first_but_never_the_best() -> None:
    decision = decide({"a": constant(0.9), "b": constant(0.85), "c": constant(0.8)}, alpha=0.01)
    assert decision.kept == ["a", "b", "c"]
    cells = {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1", "c2"]}
    chosen, cut = cells_within(cells, decision, 4)
    assert chosen == ["a1", "a2", "b1", "b2"] and cut.cut == ["c"]
    assert cells_within(cells, decision, 1)[0] == ["a1", "a2"]
    assert cells_within(cells, decision, None)[0] == ["a1", "a2", "b1", "b2", "c1", "c2"]


def test_equal_means_are_ordered_by_the_tie_break_metric_before_the_budget_cuts() -> None:
    """Four keys hit on the same cases (equal hit rates, no test can part them); the budget keeps the two
    that put the source higher (MRR), whatever their names, and says what ordered them."""
    hits = {key: constant(1.0) for key in ("a", "b", "c", "d")}
    ranks = {"a": 0.25, "b": 1.0, "c": 0.5, "d": 0.9}
    ranked = {key: constant(rank) for key, rank in ranks.items()}
    decision = decide(hits, metric="hit_rate@5", tie_break=(tie_break_column("hit_rate@5"), ranked))
    assert decision.best == "b" and decision.kept == ["b", "d", "c", "a"] and decision.dropped == []
    chosen, cut = cells_within({key: [f"{key}1"] for key in hits}, decision, 2)
    assert chosen == ["b1", "d1"] and cut.cut == ["c", "a"]
    assert cut.summary().endswith("2 tied key(s) cut to fit the cell budget, equal means ordered by mrr.")
    assert tie_break_column("mrr") == "ndcg@10"
    assert decide(hits).kept == ["a", "b", "c", "d"]  # without one: key order, as the summary then says
    assert "ordered by" not in cells_within({key: [key] for key in hits}, decide(hits), 2)[1].summary()


def staged(**changes: object) -> StagedSearch:
    """The config's own section, as the pipeline passes it (a 5% stage level, 2 finalists)."""
    fields = {"strategy": "staged", "metric": "score", "retrieval_metric": "mrr", "stage_alpha": 0.05}
    return StagedSearch.model_validate({**fields, "finalists": 2, **changes})


def planted_oracle() -> tuple[StagedOracle, list[str]]:
    """Retrieve keys A (retrieves a hair better), B (near-tied) and C (clearly worse), one rerank key each,
    two answer cells per key; A's cells answer clearly worse than B's, the best cell is B's second."""
    rng = np.random.default_rng(1)
    cases = [f"q{i:02d}" for i in range(60)]
    base = rng.uniform(0.3, 1.0, 60)
    retrieval = {
        "A": base,
        "B": base - rng.normal(0.01, 0.05, 60),
        "C": base - 0.4 + rng.normal(0.0, 0.05, 60),
    }
    quality = {"A1": 2.0, "A2": 2.2, "B1": 3.0, "B2": 3.6, "C1": 2.0, "C2": 2.0}
    difficulty = rng.normal(0, 0.5, 60)
    answers = {cell: q - difficulty + rng.normal(0, 0.3, 60) for cell, q in quality.items()}
    oracle = StagedOracle(
        cells={cell: (cell[0], f"{cell[0]}-rr") for cell in quality},
        retrieval={key: dict(zip(cases, v, strict=True)) for key, v in retrieval.items()},
        reranked={f"{key}-rr": dict(zip(cases, v, strict=True)) for key, v in retrieval.items()},
        answers={cell: dict(zip(cases, v, strict=True)) for cell, v in answers.items()},
    )
    return oracle, cases


def replay(settings: StagedSearch | None = None):
    oracle, cases = planted_oracle()
    return replay_staged(
        oracle,
        cases,
        settings or staged(),
        higher_is_better=True,
        retrieval_higher_is_better=True,
        seed=0,
        resamples=500,
    )


def test_the_staged_search_keeps_the_interaction_and_confirms_on_held_out_cases() -> None:
    plan = replay()
    retrieve, rerank, answer = plan.decisions
    assert retrieve.best == "A" and set(retrieve.kept) == {"A", "B"}
    assert [d.key for d in retrieve.dropped] == ["C"]
    assert set(rerank.kept) == {"A-rr", "B-rr"} and answer.stage == "answer"
    assert plan.winner == "B2" and plan.finalists[0] == "B2"
    assert plan.split.held_out == [f"q{i:02d}" for i in range(42, 60)]
    assert plan.race is not None and set(plan.race.cells) == {"A1", "A2", "B1", "B2"}
    confirmation = plan.confirmation
    assert confirmation is not None and confirmation.winner == "B2"
    assert confirmation.confirmed["B2"].n == 18
    assert set(confirmation.finalists) == set(plan.finalists) and len(plan.finalists) <= 2
    # calls: every case a cell answered, reader and judge, on the search and held-out cases
    race_cases = sum(outcome.cases for outcome in plan.race.cells.values())
    assert plan.calls == 2 * (race_cases + 18 * len(plan.finalists))
    assert replay() == plan  # deterministic


def test_without_holdout_nothing_is_confirmed_and_every_case_searches() -> None:
    plan = replay(staged(holdout=0.0, max_cells=2))
    assert plan.confirmation is None and plan.split.held_out == []
    assert plan.decisions[1].cut == ["B-rr"] or plan.decisions[1].cut == ["A-rr"]
    assert plan.race is not None and len(plan.race.cells) == 2


def test_a_grid_without_a_reranker_has_no_rerank_stage() -> None:
    """No reranker (`reranked` None): the retrieve stage's tie set goes straight to the race, and the cell
    budget cuts retrieve keys, as the pipeline does."""
    oracle, cases = planted_oracle()
    plain = StagedOracle(
        cells=oracle.cells, retrieval=oracle.retrieval, reranked=None, answers=oracle.answers
    )

    def run(settings: StagedSearch):
        return replay_staged(
            plain, cases, settings, higher_is_better=True, retrieval_higher_is_better=True, resamples=500
        )

    plan = run(staged())
    assert [decision.stage for decision in plan.decisions] == ["retrieve", "answer"]
    assert set(plan.decisions[0].kept) == {"A", "B"} and plan.decisions[0].cut == []
    assert plan.race is not None and set(plan.race.cells) == {"A1", "A2", "B1", "B2"}
    assert plan.winner == replay().winner  # the same search as with the one-to-one rerank keys
    budget = run(staged(max_cells=2))
    assert budget.decisions[0].cut == ["B"] and set(budget.race.cells) == {"A1", "A2"}
