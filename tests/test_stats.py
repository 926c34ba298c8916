"""The statistics checked against known truth: coverage, false positives, power, Holm, agreement.

Simulation rates are checked against bounds of about 3 binomial standard errors around the nominal
rate (sqrt(p(1-p)/sims)), so a correct method fails about 3 times in 1,000 and a wrong one (an
interval that covers 85%, a test that rejects 15% of identical pairs) fails every time. Seeds are fixed.
"""

import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from ragbench.stats import (
    cases_needed,
    compare_to_best,
    confusion,
    holm,
    mean_interval,
    paired_difference_test,
    tie_set,
    weighted_kappa,
)

SIMS = 300


def within(rate: float, nominal: float, sims: int = SIMS) -> bool:
    return abs(rate - nominal) <= 3 * math.sqrt(nominal * (1 - nominal) / sims) + 0.01


@pytest.mark.parametrize(
    "draw, true_mean",
    [
        (lambda rng, n: rng.binomial(1, 0.7, n).astype(float), 0.7),
        (lambda rng, n: rng.choice([1, 2, 3, 4, 5], n, p=[0.05, 0.1, 0.15, 0.3, 0.4]).astype(float), 3.9),
    ],
    ids=["hits", "judge-scores"],
)
def test_intervals_cover_the_true_mean_at_about_the_nominal_rate(draw, true_mean):
    rng = np.random.default_rng(1)
    covered = 0
    for sim in range(SIMS):
        interval = mean_interval(draw(rng, 40).tolist(), resamples=999, seed=sim)
        covered += interval.low <= true_mean <= interval.high
    assert within(covered / SIMS, 0.95), covered / SIMS


@pytest.mark.parametrize("test", ["paired_permutation", "wilcoxon"])
def test_identical_configurations_differ_at_about_the_nominal_false_positive_rate(test):
    """Two cells of the same quality, paired on cases of varying difficulty."""
    rng = np.random.default_rng(2)
    rejected = 0
    for sim in range(SIMS):
        difficulty = rng.normal(0, 1, 30)
        a = np.clip(np.round(3 + difficulty + rng.normal(0, 1, 30)), 1, 5)
        b = np.clip(np.round(3 + difficulty + rng.normal(0, 1, 30)), 1, 5)
        *_, p_value = paired_difference_test(a.tolist(), b.tolist(), test=test, seed=sim, resamples=999)
        rejected += p_value < 0.05
    assert within(rejected / SIMS, 0.05), rejected / SIMS


def test_a_planted_difference_is_found_at_about_the_power_the_estimate_predicts():
    true_difference, spread = 0.1, 0.3  # per-case paired differences ~ N(0.1, 0.3): d = 1/3
    pilot = np.random.default_rng(3).normal(true_difference, spread, 100_000)
    n = cases_needed(pilot.tolist())
    assert 70 <= n <= 75  # the paired t-test's answer for d = 1/3 at 80% power is 73
    rng = np.random.default_rng(4)
    detected = 0
    for sim in range(SIMS):
        base = rng.normal(0.5, 0.2, n)
        better = base + rng.normal(true_difference, spread, n)
        *_, p_value = paired_difference_test(
            base.tolist(), better.tolist(), test="paired_permutation", seed=sim, resamples=999
        )
        detected += p_value < 0.05
    assert within(detected / SIMS, 0.80), detected / SIMS


def test_holm_matches_statsmodels_and_the_hand_computed_steps():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    p_values = [0.001, 0.2, 0.013, 0.04, 0.5, 0.0101]
    assert holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]))
    assert holm([]) == []


def test_interval_edge_cases():
    assert mean_interval([]) is None
    one = mean_interval([0.4])
    assert (one.low, one.mean, one.high, one.n) == (0.4, 0.4, 0.4, 1)
    same = mean_interval([1.0] * 5)
    assert same.low == same.high == 1.0
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    interval = mean_interval(values, seed=7)
    assert 0.0 <= interval.low <= interval.mean <= interval.high <= 1.0 and interval.low < interval.high
    assert mean_interval(values, seed=7) == interval  # seeded: the same every time
    tiny = mean_interval([0.0, 1.0])  # BCa is undefined here: the percentile fallback still answers
    assert 0.0 <= tiny.low <= tiny.high <= 1.0


def test_paired_test_edge_cases():
    with pytest.raises(ValueError, match="equally many"):
        paired_difference_test([1.0, 2.0], [1.0], test="wilcoxon")
    assert paired_difference_test([3.0, 4.0, 5.0], [3.0, 4.0, 5.0], test="wilcoxon") == (0.0, 0.0, 0.0, 1.0)
    difference, *_, p_value = paired_difference_test(
        [1.0, math.nan, 0.0], [0.0, 1.0, 0.0], test="paired_permutation"
    )
    assert difference == -0.5 and p_value == 1.0  # the NaN pair is dropped; one moved case is no evidence


def test_compare_to_best_in_each_direction_with_the_tie_set():
    cases = [f"q{i}" for i in range(12)]
    strong = dict.fromkeys(cases, 1.0)
    close = {c: 1.0 if i else 0.0 for i, c in enumerate(cases)}  # one case worse: tied
    weak = {c: 0.0 if i < 10 else 1.0 for i, c in enumerate(cases)}  # ten worse: told apart
    best, comparisons = compare_to_best(
        {"strong": strong, "close": close, "weak": weak}, higher_is_better=True, test="paired_permutation"
    )
    verdicts = {c.candidate: c.verdict for c in comparisons}
    assert best == "strong" and verdicts == {"close": "tied", "weak": "worse"}
    assert tie_set(best, comparisons) == ["strong", "close"]
    assert all(c.p_holm >= c.p_value for c in comparisons)
    failures = {"few": {c: 1.0 - v for c, v in strong.items()}, "many": {c: 1.0 - v for c, v in weak.items()}}
    best, (versus,) = compare_to_best(failures, higher_is_better=False, test="paired_permutation")
    assert best == "few" and versus.verdict == "worse" and versus.difference > 0
    assert compare_to_best({"only": strong}, higher_is_better=True, test="wilcoxon") is None


def test_cases_needed_shrinks_with_the_effect_and_is_none_without_one():
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 1, 200)
    small, large = cases_needed((noise + 0.2).tolist()), cases_needed((noise + 1.0).tolist())
    assert small > large >= 2
    assert cases_needed([0.0, 0.0, 0.0]) is None
    assert cases_needed([0.5]) is None
    assert cases_needed([0.25, 0.25, 0.25]) == 2


def test_weighted_kappa_and_confusion():
    rng = np.random.default_rng(6)
    ratings = rng.integers(1, 6, 400).tolist()
    assert weighted_kappa(ratings, ratings) == pytest.approx(1.0)
    independent = weighted_kappa(ratings, rng.integers(1, 6, 400).tolist())
    assert abs(independent) < 0.15
    near = [min(5, r + 1) for r in ratings]
    far = [6 - r for r in ratings]
    assert weighted_kappa(ratings, far) < weighted_kappa(ratings, near) < 1.0
    assert weighted_kappa([3], [3]) is None
    matrix = confusion([1, 2, 2, 5], [1, 3, 2, 4])
    assert len(matrix) == 5 and matrix[1][2] == 1 and matrix[4][3] == 1 and sum(map(sum, matrix)) == 4
