"""The race's bookkeeping and decisions on hand-made values whose outcome is known: who is stopped, on
what evidence, why a race ends, and what it cost. The error rates over many replays are the benchmark's
(bench/bench_racing.py); here every number is asserted exactly."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from ragbench.analysis.racing import RaceConfig, RaceTrace, look, start_race
from ragbench.stats.inference import Test

GOOD = [5.0, 4.0] * 15  # a leader's 1-5 scores, 30 cases
CASES = [f"q{i:02d}" for i in range(len(GOOD))]


def settings(**fields: object) -> RaceConfig:
    return RaceConfig.model_validate({"strategy": "race", "metric": "score", **fields})


def new_race(
    cells: list[str],
    order: list[str] = CASES,
    *,
    higher_is_better: bool = True,
    test: Test = "paired_permutation",
    **fields: object,
) -> RaceTrace:
    return start_race(
        cells, order, settings(**fields), metric_label="score", higher_is_better=higher_is_better, test=test
    )


def by_case(values: list[float]) -> dict[str, float]:
    return dict(zip(CASES, values, strict=False))


def round_of(
    trace: RaceTrace, values: Mapping[str, Mapping[str, float]], calls_per_case: Mapping[str, int]
) -> RaceTrace:
    """One look, fed as the pipeline feeds it: the survivors' values on the cases answered so far and
    their calls (every survivor answered every one of them)."""
    span = trace.next_cases()
    assert span is not None
    answered = set(trace.order[: span[1]])
    return look(
        trace,
        {cell: {c: v for c, v in values[cell].items() if c in answered} for cell in trace.survivors},
        {cell: calls_per_case[cell] * span[1] for cell in trace.survivors},
    )


def race_to_end(
    trace: RaceTrace, values: Mapping[str, Mapping[str, float]], calls_per_case: int = 2
) -> RaceTrace:
    while not trace.finished:
        trace = round_of(trace, values, dict.fromkeys(trace.cells, calls_per_case))
    return trace


def test_start_race_cuts_the_order_to_max_cases_and_plans_a_look_per_batch() -> None:
    trace = new_race(["a", "b"], max_cases=20, batch=8)
    assert trace.order == CASES[:20]
    assert trace.planned_looks == 3  # ceil(20 / 8)
    assert new_race(["a", "b"], batch=8).planned_looks == 4  # ceil(30 / 8)
    assert trace.survivors == ["a", "b"] and not trace.finished and trace.looks == []
    assert trace.next_cases() == (0, 8)
    with pytest.raises(ValueError, match="planned_looks"):
        RaceTrace.model_validate(trace.model_dump() | {"planned_looks": 2})


def test_start_race_refuses_fewer_than_two_cells_or_cases() -> None:
    with pytest.raises(ValueError, match="two cells"):
        new_race(["a"])
    with pytest.raises(ValueError, match="two cases"):
        new_race(["a", "b"], order=["q00"])


def test_rounds_are_consecutive_batches_until_the_cases_are_exhausted() -> None:
    values = {"a": by_case(GOOD), "b": by_case(GOOD)}
    trace, spans = new_race(["a", "b"], max_cases=20, batch=8), []
    while not trace.finished:
        spans.append(trace.next_cases())
        trace = round_of(trace, values, {"a": 2, "b": 2})
    assert spans == [(0, 8), (8, 16), (16, 20)]
    assert [look_.cases for look_ in trace.looks] == [8, 16, 20]
    assert trace.stop == "cases_exhausted" and trace.next_cases() is None
    assert [look_.alpha for look_ in trace.looks] == [pytest.approx(0.05 / 3)] * 3


def test_a_clearly_worse_cell_is_eliminated_with_its_evidence() -> None:
    """b scores 1 where the leader a scores 4 or 5: every difference negative (exact p = 2 / 2^10); c is
    a's twin and is kept."""
    values = {"a": by_case(GOOD), "b": by_case([1.0] * 30), "c": by_case(GOOD)}
    trace = round_of(new_race(["a", "b", "c"], batch=10), values, {"a": 2, "b": 2, "c": 2})
    (first,) = trace.looks
    assert first.leader == "a"  # a and c tie on the mean: the first by name leads
    assert first.eliminated == ["b"]
    assert first.means == {"a": 4.5, "b": 1.0, "c": 4.5}
    comparison = {c.cell: c for c in first.comparisons}
    assert comparison["b"].p_value == pytest.approx(2 / 2**10)
    assert comparison["b"].threshold == pytest.approx(0.05 / 3 / 2)  # Holm's first step at this look
    assert comparison["c"].p_value == 1.0 and not comparison["c"].eliminated
    assert comparison["b"].low is not None and comparison["b"].high is not None  # shown beside it
    outcome = trace.cells["b"]
    assert outcome.status == "eliminated"
    assert (outcome.stopped_round, outcome.leader, outcome.cases, outcome.calls) == (1, "a", 10, 20)
    assert outcome.difference == pytest.approx(1.0 - 4.5)
    assert outcome.p_value == comparison["b"].p_value <= outcome.threshold
    assert trace.survivors == ["a", "c"] and not trace.finished


def behind(positive_rank: int | None) -> dict[str, float]:
    """10 cases 1..10 points behind a leader at 20, the difference of rank `positive_rank` ahead instead:
    exact p 2/1024 with none ahead, 0.0371 with rank 7, 0.0488 with rank 8 (differences that are their own
    ranks: the permutation test of their mean is the signed-rank test)."""
    return by_case([20.0 + (d if d == positive_rank else -d) for d in range(1, 11)])


@pytest.mark.parametrize(
    ("b", "c", "eliminated", "thresholds"),
    [
        # 0.0371 x 2 > 0.05: Holm stops at its first step, and c, though 0.0488 < 0.05, is held to the
        # level it stopped at, so that c's interval, like b's, holds zero
        (7, 8, [], {"b": 0.025, "c": 0.025}),
        (None, 7, ["b", "c"], {"b": 0.025, "c": 0.05}),  # step down: 0.0371 < 0.05 once b is out
    ],
)
def test_holm_steps_down_over_the_survivors_of_a_look(
    b: int | None, c: int, eliminated: list[str], thresholds: dict[str, float]
) -> None:
    values = {"a": by_case([20.0] * 10), "b": behind(b), "c": behind(c)}
    trace = round_of(new_race(["a", "b", "c"], batch=10, max_cases=10), values, dict.fromkeys("abc", 2))
    (only,) = trace.looks
    assert only.alpha == 0.05 and only.leader == "a"
    assert only.eliminated == eliminated
    assert {c.cell: c.threshold for c in only.comparisons} == pytest.approx(thresholds)
    for comparison in only.comparisons:  # the last look: every interval shown, the verdict's own test
        assert comparison.low is not None and comparison.high is not None
        assert comparison.eliminated == (not comparison.low <= 0 <= comparison.high)


def test_identical_cells_are_never_eliminated() -> None:
    values = {cell: by_case(GOOD) for cell in ("a", "b", "c")}
    trace = race_to_end(new_race(["a", "b", "c"], batch=8), values)
    assert len(trace.looks) == 4
    assert all(c.p_value == 1.0 and not c.eliminated for look_ in trace.looks for c in look_.comparisons)
    assert {cell: outcome.status for cell, outcome in trace.cells.items()} == dict.fromkeys("abc", "survivor")
    assert trace.stop == "cases_exhausted"


def test_the_race_is_decided_when_one_survivor_is_left_and_it_wins() -> None:
    values = {"a": by_case(GOOD), "b": by_case([1.0] * 30)}
    trace = race_to_end(new_race(["a", "b"], batch=10), values)
    assert len(trace.looks) == 1 and trace.stop == "decided"
    assert trace.cells["a"].status == "winner" and trace.survivors == ["a"]
    assert trace.next_cases() is None
    with pytest.raises(ValueError, match="race is over"):
        look(trace, {"a": values["a"]}, {"a": 20})


def test_a_round_that_would_pass_the_call_budget_is_not_run() -> None:
    """2 cells x 2 calls x 8 cases a round (the last 6 cases: 24 calls): 32, 64, 96, then 120."""
    values = {"a": by_case(GOOD), "b": by_case(GOOD)}
    trace = race_to_end(new_race(["a", "b"], batch=8, budget_calls=70), values)
    assert trace.stop == "budget_exhausted"
    assert len(trace.looks) == 2 and trace.calls_used == 64
    exactly = race_to_end(new_race(["a", "b"], batch=8, budget_calls=96), values)  # a round may reach it
    assert (exactly.stop, len(exactly.looks), exactly.calls_used) == ("budget_exhausted", 3, 96)
    assert race_to_end(new_race(["a", "b"], batch=8, budget_calls=120), values).stop == "cases_exhausted"


def test_survivors_within_the_margin_end_the_race_as_equivalent() -> None:
    """b is a except one case in eight a point lower: its difference's interval lies inside [-1, 0] (past
    the observed differences only the observed sign pattern is as extreme, p = 2/2^8, under the look's
    0.05/4), within a margin of 1, and is not significant."""
    worse = [v - 1.0 if i % 8 == 3 else v for i, v in enumerate(GOOD)]
    values = {"a": by_case(GOOD), "b": by_case(worse)}
    trace = race_to_end(new_race(["a", "b"], batch=8, margin=1.0), values)
    assert trace.stop == "equivalent" and len(trace.looks) == 1
    (comparison,) = trace.looks[0].comparisons
    assert not comparison.eliminated and comparison.difference == pytest.approx(-1 / 8)
    assert comparison.low is not None and comparison.high is not None
    assert -1.0 <= comparison.low <= comparison.difference <= comparison.high <= 0.0
    assert trace.survivors == ["a", "b"]
    narrow = race_to_end(new_race(["a", "b"], batch=8, margin=0.1), values)
    assert narrow.stop == "cases_exhausted"  # the interval reaches below -0.1
    unbounded = race_to_end(new_race(["a", "b"], batch=8), values)
    assert unbounded.stop == "cases_exhausted" and len(unbounded.looks) == 4


def test_a_lower_is_better_metric_eliminates_the_cell_with_the_larger_values() -> None:
    failures = {"a": by_case([0.0, 0.1] * 15), "b": by_case([1.0] * 30)}
    trace = race_to_end(new_race(["b", "a"], batch=10, higher_is_better=False), failures)
    assert trace.looks[0].leader == "a"
    assert trace.cells["b"].status == "eliminated" and trace.cells["a"].status == "winner"
    assert trace.cells["b"].difference == pytest.approx(1.0 - 0.05)
    flipped = race_to_end(new_race(["b", "a"], batch=10), failures)
    assert flipped.cells["a"].status == "eliminated" and flipped.cells["b"].status == "winner"


def test_not_scored_values_are_dropped_pairwise() -> None:
    """a has no value on q00 (NaN) and b none on q01 (absent): 8 pairs of the first 10 cases remain."""
    a = by_case(GOOD) | {"q00": math.nan}
    b = {case: value for case, value in by_case([4.0] * 30).items() if case != "q01"}
    trace = round_of(new_race(["a", "b"], batch=10), {"a": a, "b": b}, {"a": 2, "b": 2})
    (comparison,) = trace.looks[0].comparisons
    assert trace.looks[0].leader == "a"
    assert trace.looks[0].means == {"a": pytest.approx(40 / 9), "b": 4.0}  # a: 4 x 5 and 5 x 4 of 9
    assert comparison.n == 8
    shared = [GOOD[i] for i in range(2, 10)]
    assert comparison.difference == pytest.approx(4.0 - sum(shared) / 8)


def test_the_trace_round_trips_through_json() -> None:
    values = {"a": by_case(GOOD), "b": by_case([1.0] * 30), "c": by_case(GOOD)}
    trace = race_to_end(new_race(["a", "b", "c"], batch=10, margin=0.5, budget_calls=500), values)
    again = RaceTrace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert (again.stop, again.survivors, again.share_of_full) == (trace.stop, ["a", "c"], trace.share_of_full)


def test_calls_used_and_a_full_evaluation_s_calls() -> None:
    """b stops after round 1 with its 20 calls; a runs to the end at 2 calls a case and c at 3: used
    60 + 20 + 90 = 170 of a full evaluation's (2 + 2 + 3) x 30 = 210."""
    values = {"a": by_case(GOOD), "b": by_case([1.0] * 30), "c": by_case(GOOD)}
    trace = new_race(["a", "b", "c"], batch=10)
    while not trace.finished:
        trace = round_of(trace, values, {"a": 2, "b": 2, "c": 3})
    assert trace.stop == "cases_exhausted" and len(trace.looks) == 3
    assert {cell: outcome.calls for cell, outcome in trace.cells.items()} == {"a": 60, "b": 20, "c": 90}
    assert trace.calls_per_case == {"a": 2.0, "b": 2.0, "c": 3.0}
    assert (trace.calls_used, trace.calls_full) == (170, 210)
    assert trace.share_of_full == pytest.approx(170 / 210)
    assert new_race(["a", "b"]).share_of_full is None  # nothing measured yet


def test_a_look_needs_every_survivor_s_values() -> None:
    with pytest.raises(ValueError, match=r"no values for surviving cell\(s\) \['b'\]"):
        look(new_race(["a", "b"]), {"a": by_case(GOOD)}, {"a": 16})


def test_a_round_with_nothing_scored_is_no_evidence_and_the_race_goes_on() -> None:
    values = {"a": dict.fromkeys(CASES, math.nan), "b": dict.fromkeys(CASES, math.nan)}
    trace = round_of(new_race(["a", "b"], batch=10), values, {"a": 2, "b": 2})
    assert trace.looks[0].comparisons == [] and trace.survivors == ["a", "b"] and not trace.finished
