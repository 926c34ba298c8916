"""A verdict and the interval beside it come from one procedure, the sign-flip permutation test of the mean
paired difference and its inversion, so they never contradict each other: "tied" exactly when the
Holm-adjusted interval contains zero. Checked on the case that exposed the old bootstrap interval beside a
permutation verdict, on random data of every kind, against scipy's p-values, and for coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbench.analysis.racing import RaceConfig, look, start_race
from ragbench.stats.inference import compare_to_best, holm_levels, paired_difference_test
from ragbench.stats.permutation import SignFlipTest

CASES = [f"q{i:02d}" for i in range(50)]


def one_way(discordant: int) -> dict[str, dict[str, float]]:
    """Hit rate@5 of two cells on 50 cases: the same on all but `discordant`, where the best hits and
    the other misses."""
    return {
        "best": dict.fromkeys(CASES, 1.0),
        "other": {case: 0.0 if i < discordant else 1.0 for i, case in enumerate(CASES)},
    }


def test_five_of_fifty_one_way_is_tied_and_its_interval_holds_zero():
    # the exact sign test: 2 of the 2^5 sign patterns of the 5 discordant cases are as extreme, p = 1/16
    # (the 45 zero differences flip to themselves); the bootstrap interval shown before was
    # [-0.24, -0.02] beside a verdict of "tied"
    best, (versus,) = compare_to_best(one_way(5), higher_is_better=True)
    assert best == "best" and versus.family == 1 and versus.adjusted_confidence == pytest.approx(0.95)
    spread = 3 * 2 * math.sqrt((1 / 32) * (31 / 32) / 2000)  # 3 Monte-Carlo SEs of 2 x a tail of 2000
    assert versus.p_value == pytest.approx(1 / 16, abs=spread)
    assert versus.verdict == "tied" and versus.adjusted_low <= 0 <= versus.adjusted_high
    assert versus.adjusted_low < versus.difference == -0.1
    assert versus.adjusted_high == 0.0  # the test rejects every positive shift: its end is zero itself
    _, (precise,) = compare_to_best(one_way(5), higher_is_better=True, resamples=100_000)
    assert precise.p_value == pytest.approx(1 / 16, abs=0.004)


def test_eight_of_fifty_one_way_is_worse_and_its_interval_excludes_zero():
    _, (versus,) = compare_to_best(one_way(8), higher_is_better=True)
    assert versus.p_value == pytest.approx(2 / 2**8, abs=0.004)  # the exact sign test's 0.0078
    assert versus.verdict == "worse" and versus.adjusted_low <= versus.difference < versus.adjusted_high < 0
    assert versus.low <= versus.difference <= versus.high < 0


KINDS = ("binary", "likert", "continuous")


def cells_of(kind: str, cells: int, cases: int, effects: list[float], seed: int, missing: float) -> dict:
    """Cells on shared cases: a case difficulty every cell shares, a per-cell shift and per-answer noise,
    as 0/1 outcomes, 1-5 scores or raw values; `missing` of the values NaN (not scored)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1, cases)
    values = {}
    for cell in range(cells):
        latent = effects[cell] - difficulty + rng.normal(0, 0.7, cases)
        if kind == "binary":
            scores = (latent > 0).astype(float)
        elif kind == "likert":
            scores = np.clip(np.round(3 + latent), 1, 5)
        else:
            scores = latent
        scores[rng.random(cases) < missing] = math.nan
        values[f"c{cell}"] = {f"q{i}": float(v) for i, v in enumerate(scores)}
    return values


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    cells=st.integers(2, 5),
    cases=st.integers(3, 60),
    effects=st.lists(st.sampled_from([0.0, 0.0, 0.2, 0.5, 1.0]), min_size=5, max_size=5),
    seed=st.integers(0, 2**32 - 1),
    missing=st.sampled_from([0.0, 0.0, 0.1]),
    alpha=st.sampled_from([0.05, 0.1]),
    resamples=st.sampled_from([199, 2000]),
    higher_is_better=st.booleans(),
)
def test_tied_exactly_when_the_adjusted_interval_holds_zero(
    kind, cells, cases, effects, seed, missing, alpha, resamples, higher_is_better
):
    values = cells_of(kind, cells, cases, effects, seed, missing)
    compared = compare_to_best(
        values, higher_is_better=higher_is_better, alpha=alpha, seed=seed % 1000, resamples=resamples
    )
    if compared is None:  # every value of all but one cell missing
        return
    _, comparisons = compared
    tested = [c for c in comparisons if not c.identical]
    levels = holm_levels([c.p_value for c in tested], alpha)
    for c in comparisons:
        holds_zero = c.adjusted_low <= 0 <= c.adjusted_high
        assert (c.verdict == "tied") == holds_zero, c
        assert c.adjusted_low <= c.difference <= c.adjusted_high and c.low <= c.difference <= c.high, c
        if c.verdict != "tied":
            assert (c.verdict == "better") == ((c.difference > 0) == higher_is_better), c
        if c.identical:
            continue
        level = levels[tested.index(c)]
        assert c.adjusted_confidence == pytest.approx(1 - level)
        assert (c.p_holm < alpha) == (c.p_value < level), c  # Holm's decision, read off its level
        # the unadjusted interval is the same test's at 1 - confidence
        unadjusted = 1 - 0.95
        assert (c.low <= 0 <= c.high) == (c.difference == 0 or c.p_value >= unadjusted), c
        if level <= unadjusted:  # stricter than the unadjusted level: no narrower
            assert c.adjusted_low <= c.low and c.high <= c.adjusted_high, c


def scipy_p(differences: np.ndarray, seed: int, resamples: int) -> float:
    """What the paired tests used before: scipy's sign-flip permutation test of the mean."""
    return float(
        scipy.stats.permutation_test(
            (differences,),
            np.mean,
            permutation_type="samples",
            n_resamples=resamples,
            vectorized=True,
            rng=np.random.default_rng(seed),
        ).pvalue
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cases", [6, 10, 11, 30, 200])  # exact up to 2^10 <= 2000 patterns, then drawn
def test_p_values_are_scipy_s_permutation_test(kind, cases):
    rng = np.random.default_rng(cases)
    if kind == "binary":
        differences = rng.binomial(1, 0.6, cases) - rng.binomial(1, 0.45, cases)
    elif kind == "likert":
        differences = rng.integers(1, 6, cases) - rng.integers(1, 6, cases)
    else:
        differences = rng.normal(0.2, 1, cases)
    differences = differences.astype(float)
    for seed in (0, 7):
        test = SignFlipTest(differences, seed=seed, resamples=2000)
        assert test.exact == (cases <= 10)
        assert test.p_value() == scipy_p(differences, seed, 2000)
        # p(delta) is the test of the shifted differences (at a shift no mean of them can equal: where
        # one does, a null value ties the observed one, and two float sums can round it either way)
        assert test.p_value(0.31) == scipy_p(differences - 0.31, seed, 2000)


def test_tests_made_together_are_the_tests_made_alone():
    """A look's or a metric's comparisons share their sign patterns per number of cases, to draw them once."""
    rng = np.random.default_rng(4)
    lists = [rng.integers(-4, 5, n).astype(float) for n in (30, 30, 8, 30, 8, 1)] + [rng.normal(0, 1, 30)]
    together = SignFlipTest.several(lists, seed=2, resamples=999)
    for differences, test in zip(lists, together, strict=True):
        alone = SignFlipTest(differences, seed=2, resamples=999)
        assert (test.n, test.mean, test.exact) == (alone.n, alone.mean, alone.exact)
        for shift in (0.0, 0.31, -0.7):
            assert test.p_value(shift) == alone.p_value(shift)
        assert test.interval(0.05, 8.0) == pytest.approx(alone.interval(0.05, 8.0), abs=1e-12)


def test_the_interval_is_the_test_inverted_at_its_level():
    rng = np.random.default_rng(11)
    for differences, bound in [
        (rng.normal(0.3, 1, 40), 8.0),
        ((rng.integers(1, 6, 25) - rng.integers(1, 6, 25)).astype(float), 4.0),
        (np.array([0.0] * 40 + [-1.0] * 7 + [1.0]), 1.0),
    ]:
        test = SignFlipTest(differences, seed=3, resamples=999)
        for level in (0.05, 0.01):
            low, high = test.interval(level, bound)
            assert low <= test.mean <= high
            assert test.p_value(low) >= level and test.p_value(high) >= level
            step = 1e-6 * bound
            assert low == -bound or test.p_value(low - step) < level
            assert high == bound or test.p_value(high + step) < level
            assert (low <= 0 <= high) == (test.p_value(0) >= level)


def test_a_zero_mean_difference_is_never_significant():
    """Tied by the verdict's rule whatever p says, and by the test itself: every sign pattern has its
    opposite, so at a zero mean each tail holds at least half of them (exactly, when enumerated)."""
    rng = np.random.default_rng(9)
    for cases in (6, 10, 40, 300):
        half = rng.integers(-4, 5, cases // 2).astype(float)  # 1-5 score differences: the mean exactly 0
        differences = rng.permutation(np.concatenate([half, -half]))
        for seed in range(5):
            test = SignFlipTest(differences, seed=seed, resamples=2000)
            assert test.mean == 0 and (test.p_value() == 1.0 if test.exact else test.p_value() > 0.5)
            low, high = test.interval(0.05, 4.0)
            assert low < 0 < high


def test_too_few_cases_to_reject_anything_give_the_widest_interval():
    # 3 pairs: the smallest two-sided p is 2/8, so no shift is rejected at 0.05
    difference, low, high, p_value = paired_difference_test([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert (difference, low, high, p_value) == (1.0, -1.0, 1.0, 0.25)


def test_intervals_cover_a_symmetric_difference_at_about_the_nominal_rate():
    # the sign-flip test is exact for differences symmetric about their mean, so its inversion covers at
    # 95% (give or take 3 binomial SEs over 300 simulations, 0.038)
    rng = np.random.default_rng(5)
    sims, covered = 300, 0
    for sim in range(sims):
        differences = rng.normal(0.3, 1, 25)
        low, high = SignFlipTest(differences, seed=sim, resamples=999).interval(0.05, 10.0)
        covered += low <= 0.3 <= high
    assert abs(covered / sims - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / sims), covered / sims


def test_a_race_s_eliminations_and_kept_cells_read_their_intervals_the_same_way():
    order = [f"q{i:02d}" for i in range(40)]
    leader = dict.fromkeys(order, 1.0)
    values = {
        "leader": leader,
        "far": {case: 0.0 if i % 2 else 1.0 for i, case in enumerate(order)},
        "near": {case: 0.0 if i % 10 == 3 else 1.0 for i, case in enumerate(order)},
    }
    config = RaceConfig(strategy="race", metric="hit", batch=20)
    trace = start_race(
        list(values), order, config, metric_label="hit", higher_is_better=True, test="paired_permutation"
    )
    while not trace.finished:
        answered = set(trace.order[: trace.next_cases()[1]])
        trace = look(
            trace,
            {cell: {c: v for c, v in values[cell].items() if c in answered} for cell in trace.survivors},
            dict.fromkeys(trace.survivors, 0),
        )
    assert trace.cells["far"].status == "eliminated" and trace.cells["near"].status != "eliminated"
    shown = [c for look_ in trace.looks for c in look_.comparisons if c.low is not None]
    assert {c.cell for c in shown} >= {"far", "near"}
    for c in shown:
        assert c.eliminated == (not c.low <= 0 <= c.high), c
