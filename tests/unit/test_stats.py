"""The statistics checked against known truth: coverage, false positives, power, Holm, agreement.

Simulated rates are checked against the rate they should have, give or take 3 binomial standard
errors of a rate over SIMS simulations (sqrt(p(1-p)/SIMS): 0.021 at 0.05 or 0.95, 0.038 at 0.80),
plus, where stated, a named allowance for a method that is only approximately exact. A correct
method then fails about 3 times in 1,000 seeds; a test that rejects 8% of identical pairs, or 90%
intervals passed off as 95% ones (the judge scores' coverage drops to 0.90), fails. Seeds are fixed,
so every run sees the same numbers.
"""

import itertools
import math

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from ragbench.analysis.planning import PlannedTest, cases_needed
from ragbench.stats.inference import (
    compare_to_best,
    confusion,
    holm,
    paired_difference_test,
    percentile_bootstrap,
    tie_set,
    weighted_kappa,
)
from ragbench.stats.intervals import mean_interval
from ragbench.stats.permutation import SignFlipTest

SIMS = 1000
RESAMPLES = 999


def bounds(expected: float, allowance: float = 0.0, sims: int = SIMS) -> tuple[float, float]:
    spread = 3 * math.sqrt(expected * (1 - expected) / sims) + allowance
    return expected - spread, expected + spread


def hits(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.binomial(1, 0.7, n).astype(float)  # mean 0.7


def judge_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    # piled at the top like real 1-5 judge scores; mean 0.05 + 0.2 + 0.45 + 1.2 + 2.0 = 3.9
    return rng.choice([1, 2, 3, 4, 5], n, p=[0.05, 0.1, 0.15, 0.3, 0.4]).astype(float)


def coverage_rate(draw, true_mean: float, n: int = 40, seed: int = 1, **scale) -> float:
    rng = np.random.default_rng(seed)
    covered = 0
    for sim in range(SIMS):
        interval = mean_interval(draw(rng, n).tolist(), resamples=RESAMPLES, seed=sim, **scale)
        covered += interval.low <= true_mean <= interval.high
    return covered / SIMS


def null_pair(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Two cells of the same quality on the same cases: a shared per-case difficulty, independent
    noise per cell. `continuous` values have no ties; `judge` values are rounded to 1-5 (many ties)."""
    difficulty = rng.normal(0, 1, n)
    a, b = (difficulty + rng.normal(0, 0.7, n) for _ in range(2))
    if kind == "judge":
        a, b = (np.clip(np.round(3 + x), 1, 5) for x in (a, b))
    return a, b


def rejection_rate(kind: str, n: int = 30, seed: int = 2) -> float:
    rng = np.random.default_rng(seed)
    rejected = 0
    for sim in range(SIMS):
        a, b = null_pair(rng, n, kind)
        *_, p_value = paired_difference_test(a.tolist(), b.tolist(), seed=sim, resamples=RESAMPLES)
        rejected += p_value < 0.05
    return rejected / SIMS


def t_test_power(effect: float, n: float, alpha: float = 0.05) -> float:
    """Two-sided one-sample (= paired) t-test power from the noncentral t, independently of statsmodels."""
    critical = scipy.stats.t.ppf(1 - alpha / 2, n - 1)
    shift = effect * math.sqrt(n)
    return float(scipy.stats.nct.sf(critical, n - 1, shift) + scipy.stats.nct.cdf(-critical, n - 1, shift))


DIFFERENCE, SPREAD = 0.1, 0.3  # planted paired differences ~ N(0.1, 0.3): effect d = 1/3


def exact_differences(n: int = 200) -> list[float]:
    """A sample whose mean and sd (ddof=1) are exactly DIFFERENCE and SPREAD: the true effect."""
    z = np.random.default_rng(3).normal(0, 1, n)
    return (DIFFERENCE + SPREAD * (z - z.mean()) / z.std(ddof=1)).tolist()


def detection_rate(n: int, seed: int = 4) -> float:
    rng = np.random.default_rng(seed)
    detected = 0
    for sim in range(SIMS):
        base = rng.normal(0.5, 0.2, n)
        better = base + rng.normal(DIFFERENCE, SPREAD, n)
        *_, p_value = paired_difference_test(base.tolist(), better.tolist(), seed=sim, resamples=RESAMPLES)
        detected += p_value < 0.05
    return detected / SIMS


@pytest.mark.parametrize(
    "draw, true_mean, scale",
    [(hits, 0.7, {"binary": True}), (judge_scores, 3.9, {"bounds": (1.0, 5.0)})],
    ids=["hits-exact", "judge-scores-betting"],
)
@pytest.mark.parametrize("n", [3, 40])
def test_intervals_cover_the_true_mean_at_least_at_the_nominal_rate(draw, true_mean, scale, n):
    """Exact and betting intervals are guaranteed: at least 95% at any n, up to Monte-Carlo error
    (bench/bench_small_intervals.py measures more settings)."""
    rate = coverage_rate(draw, true_mean, n=n, **scale)
    assert rate >= bounds(0.95)[0], rate


def test_bootstrap_intervals_cover_at_about_the_nominal_rate_at_40_cases():
    # what a metric without bounds gets. Allowance 0.02: a bootstrap interval's coverage at n = 40 is only
    # approximately 95%, and on lattice data (40 hits can only average k/40) it moves with where the ends
    # fall: enumerating every k for Bernoulli(0.7) gives 0.944 to 0.985 over 20 resampling seeds
    low, high = bounds(0.95, allowance=0.02)
    rate = coverage_rate(hits, 0.7)
    assert low <= rate <= high, rate


def test_identical_configurations_differ_at_the_nominal_false_positive_rate():
    low, high = bounds(0.05)
    rate = rejection_rate("continuous")
    assert low <= rate <= high, rate


def test_tied_judge_scores_give_no_more_false_positives_than_nominal():
    """Ties and zero differences make the test conservative (fewer distinct outcomes), never liberal."""
    rate = rejection_rate("judge")
    assert rate <= bounds(0.05)[1], rate


def test_cases_needed_is_the_paired_t_test_sample_size():
    n = cases_needed(exact_differences())
    assert t_test_power(1 / 3, n) >= 0.8 > t_test_power(1 / 3, n - 1)
    assert n == 73  # the textbook answer for d = 1/3, alpha 0.05 two-sided, 80% power


def test_a_planted_difference_is_found_at_the_power_the_estimate_predicts():
    n = cases_needed(exact_differences())
    # the permutation test of the mean matches the t-test at this size
    low, high = bounds(t_test_power(1 / 3, n))
    rate = detection_rate(n)
    assert low <= rate <= high, rate


def test_holm_matches_statsmodels_and_the_hand_computed_steps():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> running maximum 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    p_values = [0.001, 0.2, 0.013, 0.04, 0.5, 0.0101]
    assert holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]))
    assert holm([0.3, 0.9]) == pytest.approx([0.6, 0.9])  # capped at 1 only where needed
    assert holm([]) == []
    rng = np.random.default_rng(3)
    for _ in range(8):  # ties and several sizes (statsmodels runs a full gc per call: few)
        drawn = list(np.round(rng.uniform(0, 0.2, rng.integers(1, 12)), 2))
        assert holm(drawn) == pytest.approx(list(multipletests(drawn, method="holm")[1]))


def test_interval_edge_cases():
    assert mean_interval([]) is None
    assert mean_interval([math.nan]) is None
    for scale in ({}, {"bounds": (0.0, 1.0)}, {"binary": True}):  # under MIN_CASES: no interval, said so
        two = mean_interval([0.0, 1.0], **scale)
        assert (two.low, two.mean, two.high, two.n, two.method, two.too_few) == (
            None,
            0.5,
            None,
            2,
            "too_few",
            True,
        )
    same = mean_interval([1.0] * 5)  # unbounded: nothing to say a spread from, the bootstrap's zero width
    assert same.low == same.high == same.mean == 1.0 and same.method == "bootstrap"
    # on a known scale, values that do not vary never give a zero-width interval
    still = mean_interval([0.25] * 3, bounds=(0.0, 1.0))
    assert still.method == "betting" and still.low < 0.25 < still.high
    assert mean_interval([0.25] * 40, bounds=(0.0, 1.0)).high - 0.25 < still.high - 0.25
    rate = mean_interval([0.0, 0.0, 0.0], binary=True)
    assert rate.method == "exact" and rate.low == 0.0 and rate.high == pytest.approx(1 - 0.025 ** (1 / 3))
    with pytest.raises(ValueError, match="0 or 1"):
        mean_interval([0.0, 0.5, 1.0], binary=True)
    with pytest.raises(ValueError, match="values must lie on"):
        mean_interval([0.0, 2.0, 1.0], bounds=(0.0, 1.0))
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    for scale in ({}, {"bounds": (0.0, 1.0)}, {"binary": True}):
        interval = mean_interval(values, seed=7, **scale)
        assert 0.0 <= interval.low <= interval.mean <= interval.high <= 1.0 and interval.low < interval.high
        assert mean_interval(values, seed=7, **scale) == interval  # seeded: the same every time
        assert mean_interval([*values, math.nan], seed=7, **scale) == interval  # an unscored case is no zero
        narrower = mean_interval(values, seed=7, confidence=0.8, **scale)
        assert interval.low <= narrower.low <= narrower.high <= interval.high


def test_interval_falls_back_to_percentile_when_bca_is_undefined(monkeypatch):
    bootstrap = scipy.stats.bootstrap
    methods = []

    def bca_undefined(*args, method, **kwargs):
        methods.append(method)
        result = bootstrap(*args, method=method, **kwargs)
        if method == "BCa":  # what scipy returns (with a warning) for degenerate resamples
            result.confidence_interval = type(result.confidence_interval)(math.nan, math.nan)
        return result

    monkeypatch.setattr(scipy.stats, "bootstrap", bca_undefined)
    interval = mean_interval([0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    assert methods == ["BCa", "percentile"]
    assert 0.0 <= interval.low < interval.mean < interval.high <= 1.0


def test_paired_test_known_answers_and_edge_cases():
    with pytest.raises(ValueError, match="equally many"):
        paired_difference_test([1.0, 2.0], [1.0])
    assert paired_difference_test([], []) == (0.0, 0.0, 0.0, 1.0)
    # three identical pairs: no evidence (p = 1), and too few pairs for the test to reject any difference
    # at 0.05 (its smallest p on 3 pairs is 2/8): the interval spans all that values from 3 to 5 allow
    assert paired_difference_test([3.0, 4.0, 5.0], [3.0, 4.0, 5.0]) == (0.0, -2.0, 2.0, 1.0)
    # five cases all better: 2 of the 32 sign patterns are as extreme, exactly
    *_, p_value = paired_difference_test([0.0] * 5, [0.1, 0.2, 0.3, 0.4, 0.5])
    assert p_value == pytest.approx(2 / 32)
    difference, *_, p_value = paired_difference_test([1.0, math.nan, 0.0], [0.0, 1.0, 0.0])
    assert difference == -0.5 and p_value == 1.0  # the NaN pair is dropped; one moved case is no evidence
    assert paired_difference_test([0.25], [0.75]) == (0.5, -0.5, 0.5, 1.0)  # one pair: nothing rejected
    reference, candidate = [0.1, 0.5, 0.3, 0.9, 0.4], [0.3, 0.4, 0.6, 0.9, 0.8]
    inverted = SignFlipTest(np.subtract(candidate, reference), seed=3, resamples=2000)  # exact: 32 patterns
    for confidence in (0.6, 0.8, 0.95):
        difference, low, high, p_value = paired_difference_test(
            reference, candidate, seed=3, confidence=confidence
        )
        assert (difference, p_value) == (inverted.mean, inverted.p_value()) == (pytest.approx(0.16), 0.25)
        assert (low, high) == inverted.interval(1 - confidence, 0.9 - 0.1)  # at most the values' range
        assert (low <= 0 <= high) == (p_value >= 1 - confidence)  # excludes zero at 60%, not at 80%
    assert (low, high) == (-0.8, 0.8)  # 5 pairs cannot reach p < 0.05: no difference is rejected


def test_compare_to_best_in_each_direction_with_the_tie_set():
    cases = [f"q{i}" for i in range(12)]
    strong = dict.fromkeys(cases, 1.0)
    close = {c: 1.0 if i else 0.0 for i, c in enumerate(cases)}  # one case worse: tied
    weak = {c: 0.0 if i < 10 else 1.0 for i, c in enumerate(cases)}  # ten worse: told apart
    best, comparisons = compare_to_best(
        {"weak": weak, "strong": strong, "close": close}, higher_is_better=True
    )
    by_cell = {c.candidate: c for c in comparisons}
    assert best == "strong"
    assert {c: v.verdict for c, v in by_cell.items()} == {"close": "tied", "weak": "worse"}
    assert tie_set(best, comparisons) == ["strong", "close"]
    assert all(c.p_holm >= c.p_value and c.reference == "strong" and c.n == 12 for c in comparisons)
    assert by_cell["weak"].difference == pytest.approx(-10 / 12)
    assert by_cell["weak"].low <= by_cell["weak"].difference <= by_cell["weak"].high < 0
    # failure rates: lower is better
    failures = {"few": {c: 1.0 - v for c, v in strong.items()}, "many": {c: 1.0 - v for c, v in weak.items()}}
    best, (versus,) = compare_to_best(failures, higher_is_better=False)
    assert best == "few" and versus.verdict == "worse" and versus.difference > 0
    assert compare_to_best({"only": strong}, higher_is_better=True) is None
    unscored = {"only": strong, "unscored": {"q0": math.nan}}
    assert compare_to_best(unscored, higher_is_better=True) is None


def test_compare_to_best_ties_missing_cases_and_too_few_pairs():
    identical = {f"q{i}": float(i % 5 + 1) for i in range(20)}
    same = {"b": identical, "a": dict(identical)}
    best, (versus,) = compare_to_best(same, higher_is_better=True)
    assert best == "a"  # equal means: the first label, every time
    assert (versus.difference, versus.p_value, versus.verdict) == (0.0, 1.0, "tied")
    sparse = {"q1": 0.0, "q2": math.nan, "q3": 0.0, "elsewhere": 0.0}
    cells = {"full": dict.fromkeys(["q1", "q2", "q3"], 1.0), "sparse": sparse}
    best, (versus,) = compare_to_best(cells, higher_is_better=True)
    assert best == "full" and versus.n == 2  # only q1 and q3 are scored by both
    one_shared = {"x": {"q1": 1.0}, "y": {"q1": 0.0, "q2": 0.0}}
    best, (versus,) = compare_to_best(one_shared, higher_is_better=True)
    assert (versus.n, versus.p_value, versus.verdict) == (1, 1.0, "tied")


def test_cases_needed_shrinks_with_the_effect_and_is_none_without_one():
    z = np.random.default_rng(5).normal(0, 1, 200)
    needed = [cases_needed((z + shift).tolist()) for shift in (0.1, 0.2, 0.5, 1.0, 3.0)]
    assert all(more > fewer for more, fewer in itertools.pairwise(needed))
    # however large the effect, never fewer than the 6 cases on which the sign-flip test can reach p < 0.05
    # (2 / 2^5 = 0.0625 is its smallest p-value on 5), which a t-test's 2 or 3 would pass over
    assert needed[-1] == cases_needed((z + 20.0).tolist()) == 6
    assert cases_needed((-(z + 0.5)).tolist()) == needed[2]  # the direction does not matter, the size does
    assert cases_needed([0.5, 0.5, 0.5, 0.4]) == 6  # huge effects: statsmodels' solver alone fails here
    assert cases_needed([0.0, 0.0, 0.0]) is None
    assert cases_needed([-0.5, 0.5]) is None
    assert cases_needed([0.5]) is None
    assert cases_needed([0.25, 0.25, 0.25]) == 6
    with pytest.raises(ValueError):
        PlannedTest(power=1.0)


def test_weighted_kappa_and_confusion():
    rng = np.random.default_rng(6)
    ratings = rng.integers(1, 6, 1000).tolist()
    assert weighted_kappa(ratings, ratings) == pytest.approx(1.0)
    # quadratic-weighted kappa between independent raters behaves like a correlation: sd 1/sqrt(n)
    assert abs(weighted_kappa(ratings, rng.integers(1, 6, 1000).tolist())) < 3 / math.sqrt(1000)
    near = [min(5, r + 1) for r in ratings]
    far = [6 - r for r in ratings]
    assert weighted_kappa(ratings, far) < 0 < weighted_kappa(ratings, near) < 1.0
    # by hand: observed disagreement 1/4, chance disagreement 1/2 * 3/4 + 1/2 * 1/4 = 1/2 -> 1 - 1/2
    assert weighted_kappa([1, 1, 2, 2], [1, 2, 2, 2]) == pytest.approx(0.5)
    assert weighted_kappa([3], [3]) is None
    assert weighted_kappa([4, 4, 4], [4, 4, 4]) == 1.0  # kappa is 0/0 here; they agree on everything
    with pytest.raises(ValueError):
        weighted_kappa([1, 2], [1])
    matrix = confusion([1, 2, 2, 5], [1, 3, 2, 4])
    assert len(matrix) == 5 and all(len(row) == 5 for row in matrix)
    assert matrix[0][0] == matrix[1][2] == matrix[1][1] == matrix[4][3] == 1 and sum(map(sum, matrix)) == 4


def test_the_percentile_bootstrap_draws_as_scipys_and_leaves_out_undefined_draws():
    """`percentile_bootstrap` (rater agreement's interval) is scipy's percentile bootstrap where every draw
    gives a value, so it is maintained arithmetic; it differs only by leaving out the draws that give none."""
    data = np.random.default_rng(0).normal(size=30)
    ours = percentile_bootstrap(lambda draws: data[draws].mean(axis=1), 30, seed=4, resamples=999)
    scipys = scipy.stats.bootstrap(
        (data,), np.mean, method="percentile", n_resamples=999, rng=np.random.default_rng(4), vectorized=True
    ).confidence_interval
    assert ours == pytest.approx((scipys.low, scipys.high), rel=1e-12)

    def undefined_without_item_0(draws: np.ndarray) -> np.ndarray:
        return np.where((draws == 0).any(axis=1), data[draws].mean(axis=1), np.nan)

    low, high = percentile_bootstrap(undefined_without_item_0, 3, seed=1, resamples=400)
    assert low <= high
    assert percentile_bootstrap(lambda draws: np.full(len(draws), np.nan), 30, resamples=400) is None


def test_bounded_comparisons_use_the_betting_test_and_agree_with_their_intervals():
    """On a metric with known bounds the comparison with the best is the betting test on the scale of a
    difference: never a zero-width interval from differences that do not vary, and "tied" exactly when the
    Holm-level interval holds zero, as for the sign-flip test."""
    rng = np.random.default_rng(5)
    base = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], 40)
    values = {
        "best": {str(i): min(1.0, v + 0.25) for i, v in enumerate(base)},
        "same_step": {str(i): v for i, v in enumerate(base)},
        "close": {str(i): min(1.0, v + 0.25) - (0.25 if i < 3 else 0.0) for i, v in enumerate(base)},
    }
    best, comparisons = compare_to_best(values, higher_is_better=True, bounds=(0.0, 1.0))
    assert best == "best" and {c.test for c in comparisons} == {"betting"}
    for c in comparisons:
        assert c.adjusted_low < c.difference < c.adjusted_high and c.low < c.high
        assert (c.verdict == "tied") == (c.adjusted_low <= 0.0 <= c.adjusted_high), c
    three = {"a": {"1": 0.25, "2": 0.25, "3": 0.25}, "b": {"1": 0.5, "2": 0.5, "3": 0.5}}
    _, (only,) = compare_to_best(three, higher_is_better=True, bounds=(0.0, 1.0))
    assert only.verdict == "tied" and only.low < -0.5 and only.high > 0.5  # three cases: most of [-1, 1]
