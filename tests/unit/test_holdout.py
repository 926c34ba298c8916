"""The held-out split is the tail of the seeded order, refused with a clear message when it leaves a paired
test nothing to work with; the confirmation keeps the search's winner and measures it on held-out cases
only."""

from __future__ import annotations

import pytest

from ragbench.analysis.holdout import (
    MIN_PAIRED_CASES,
    confirm,
    holdout_error,
    split_order,
)
from ragbench.stats.inference import smallest_attainable_p

ORDER = [f"q{i:02d}" for i in range(20)]


def test_min_paired_cases_is_the_fewest_pairs_that_can_reach_five_percent() -> None:
    assert MIN_PAIRED_CASES == 6
    assert smallest_attainable_p(MIN_PAIRED_CASES) <= 0.05 < smallest_attainable_p(MIN_PAIRED_CASES - 1)


def test_the_held_out_cases_are_the_tail_of_the_order() -> None:
    split = split_order(ORDER, 0.3)
    assert split.held_out == ORDER[14:] and split.search == ORDER[:14] and split.share == 0.3
    assert split_order(ORDER, 0.3) == split  # deterministic: the order alone decides
    reversed_split = split_order(ORDER[::-1], 0.3)
    assert reversed_split.held_out == ORDER[::-1][14:]


def test_share_zero_holds_nothing_out() -> None:
    split = split_order(ORDER, 0.0)
    assert split.held_out == [] and split.search == ORDER


def test_too_few_held_out_cases_is_a_clear_error() -> None:
    with pytest.raises(ValueError) as raised:
        split_order(ORDER[:10], 0.3)
    text = str(raised.value)
    assert "0.3 of 10 case(s) holds out 3" in text
    assert f"at least {MIN_PAIRED_CASES}" in text
    assert "use at least 20 cases at this share" in text  # 0.3 of 20 is the first to hold out 6
    assert holdout_error(10, 0.3) == text
    assert holdout_error(20, 0.3) is None and holdout_error(19, 0.3) is not None


def test_a_share_leaving_the_search_too_few_cases_is_refused() -> None:
    assert "leaves 1 for the search" in (holdout_error(10, 0.95) or "")
    assert "leaves 1 for the search" in (holdout_error(1, 0.0) or "")
    assert "must lie in [0, 1)" in (holdout_error(20, 1.0) or "")


HELD = {
    "winner": {f"h{i}": 0.6 for i in range(8)},
    "runner": {f"h{i}": 0.7 if i < 7 else 0.6 for i in range(8)},
    "loser": {f"h{i}": 0.1 for i in range(8)},
}


def test_confirmation_keeps_the_search_winner_and_measures_flattery() -> None:
    confirmation = confirm(
        HELD,
        {"winner": 0.9, "runner": 0.8, "loser": 0.2},
        "winner",
        metric="score",
        higher_is_better=True,
        confidence=0.95,
        seed=0,
        resamples=2000,
    )
    # the runner is better on the held-out cases, yet the winner stays the search's choice
    assert confirmation.winner == "winner"
    assert confirmation.confirmed["winner"].mean == pytest.approx(0.6)
    assert confirmation.confirmed["winner"].n == 8
    assert confirmation.flattery == pytest.approx(0.3)
    by_cell = {c.cell: c for c in confirmation.comparisons}
    assert set(by_cell) == {"runner", "loser"}
    assert by_cell["loser"].difference == pytest.approx(0.5)
    assert by_cell["loser"].low > 0 and by_cell["loser"].p_value < 0.05
    assert by_cell["runner"].difference == pytest.approx(-0.7 / 8)
    assert by_cell["loser"].p_holm >= by_cell["loser"].p_value
    summary = confirmation.summary()
    assert summary.startswith("confirmed on 8 held-out case(s): winner score 0.6")
    assert "flattered by +0.3" in summary


def test_flattery_is_signed_toward_better_when_lower_is_better() -> None:
    confirmation = confirm(
        {"a": {f"h{i}": 2.0 for i in range(6)}, "b": {f"h{i}": 3.0 for i in range(6)}},
        {"a": 1.5, "b": 2.5},
        "a",
        metric="latency",
        higher_is_better=False,
        confidence=0.95,
        seed=0,
        resamples=500,
    )
    assert confirmation.flattery == pytest.approx(0.5)  # the search saw it 0.5 lower (better) than it is


def test_a_winner_not_among_the_finalists_is_refused() -> None:
    with pytest.raises(ValueError, match="not among the finalists"):
        confirm(
            HELD,
            {"winner": 0.9, "runner": 0.8, "loser": 0.2},
            "other",
            metric="score",
            higher_is_better=True,
            confidence=0.95,
            seed=0,
            resamples=500,
        )
