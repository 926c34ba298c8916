"""The statistics behind every number people decide on: paired tests and their intervals,
multiple-comparison correction and rater agreement (a mean's interval is ragbench.stats.intervals'; what a
sample can detect, and how many cases a difference needs, are planned in ragbench.analysis.planning). Thin,
seeded wrappers over scipy, statsmodels and scikit-learn, so the estimators are maintained code, not ours;
the exceptions are checked against scipy: the paired test and its interval (ragbench.stats.permutation)
reproduce its p-values, and `percentile_bootstrap` (rater agreement's one bootstrap) draws as its
percentile bootstrap does, leaving out draws kappa is undefined on.
Values that are NaN are cases a cell did not score: every function here drops them (pairs where either
side is NaN).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ragbench.section import Section
from ragbench.stats.betting import BettingTest
from ragbench.stats.intervals import CONFIDENCE
from ragbench.stats.permutation import SignFlipTest

# `paired_permutation`: the sign-flip permutation test of the mean paired difference, every raw metric's
# test (ragbench.stats.permutation). `wilcoxon`: the signed-rank test 1-5 scores had before; nothing
# makes it any more, it stays so that results tables and race traces stored with it still load.
# `prediction_powered`: a t-test of a label-corrected difference (ragbench.stats.ppi)
# `betting`: the betting test of the mean paired difference on its known scale (ragbench.stats.betting),
# every bounded metric's test since intervals had to hold at a handful of cases
Test = Literal["paired_permutation", "wilcoxon", "prediction_powered", "labels_alone", "betting"]


def percentile_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a statistic of `n` items that is not a mean of one sample (rater
    agreement: kappa, a paired kappa difference), where `mean_interval` does not apply. `statistic`
    takes a resamples x n matrix of item indices (the items of every rating drawn together) and gives one
    value per row; NaN rows (kappa undefined on a draw) are left out, and None is returned when fewer than
    half the draws give a value."""
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    boot = statistic(draws)
    boot = boot[np.isfinite(boot)]
    if len(boot) < resamples // 2:
        return None
    tail = (1 - confidence) / 2 * 100
    low, high = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    return low, high


def paired_difference_test(
    reference: Sequence[float],
    candidate: Sequence[float],
    *,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float, float]:
    """(mean difference candidate - reference, its interval low and high at `confidence`, two-sided
    p-value), on per-case values paired by position; pairs where either value is NaN are dropped here.
    Both from one sign-flip permutation test of the mean difference (`SignFlipTest`): the interval is
    every difference that test does not reject, so it excludes zero exactly when p < 1 - confidence.
    Without pairs: (0, 0, 0, 1)."""
    ((test, bound),) = sign_flip_tests([(reference, candidate)], seed=seed, resamples=resamples)
    if test is None:
        return 0.0, 0.0, 0.0, 1.0
    low, high = test.interval(1 - confidence, bound)
    return test.mean, low, high, test.p_value()


def paired_p_value(differences: np.ndarray, *, seed: int = 0, resamples: int = 2000) -> float:
    """The two-sided p-value of `paired_difference_test` alone, on differences without NaN: what a
    race's every look needs, without the interval. 1 with fewer than two differences or none that is not
    zero, the test's own answer there, given without building its sign patterns."""
    if differences.size < 2 or not differences.any():
        return 1.0
    return SignFlipTest(differences, seed=seed, resamples=resamples).p_value()


def two_sample_p_value(
    before: Sequence[float], now: Sequence[float], *, seed: int = 0, resamples: int = 2000
) -> float:
    """The two-sided p-value of the difference in means of two independent samples (two nights' traces,
    where no case is in both): scipy's permutation test, the values shuffled between the samples. NaN
    values are left out; 1 when either sample has fewer than two values or every value is the same."""
    first = np.asarray([v for v in before if not math.isnan(v)], dtype=float)
    second = np.asarray([v for v in now if not math.isnan(v)], dtype=float)
    if first.size < 2 or second.size < 2 or np.ptp(np.concatenate([first, second])) == 0:
        return 1.0
    from scipy.stats import permutation_test  # imported here: scipy's import is slow, few runs compare

    result = permutation_test(
        (second, first),
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def paired_differences(reference: Sequence[float], candidate: Sequence[float]) -> np.ndarray:
    """candidate - reference case by case, paired by position, without the pairs where either is NaN."""
    kept_reference, kept_candidate = _pairs(reference, candidate)
    return kept_candidate - kept_reference


def _pairs(reference: Sequence[float], candidate: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The values paired by position, without the pairs where either is NaN."""
    if len(reference) != len(candidate):
        raise ValueError(f"paired values must be equally many, got {len(reference)} and {len(candidate)}")
    kept = [(r, c) for r, c in zip(reference, candidate, strict=True) if not (math.isnan(r) or math.isnan(c))]
    pairs = np.asarray(kept, dtype=float).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def sign_flip_tests(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *, seed: int, resamples: int
) -> list[tuple[SignFlipTest | None, float]]:
    """For each (reference, candidate): the sign-flip test of candidate - reference on the pairs without
    NaN (None without pairs), with the same sign patterns for its p-value and every interval, and the
    widest such an interval can be: the range of the values compared, which a difference of two means of
    them cannot exceed (the end an interval takes where too few cases let the test reject nothing). The
    patterns are drawn once for all comparisons on as many pairs (`SignFlipTest.several`)."""
    kept = [_pairs(reference, candidate) for reference, candidate in pairs]
    present = [i for i, (reference, _) in enumerate(kept) if reference.size]
    tests = SignFlipTest.several([kept[i][1] - kept[i][0] for i in present], seed=seed, resamples=resamples)
    found: list[tuple[SignFlipTest | None, float]] = [(None, 0.0)] * len(kept)
    for i, test in zip(present, tests, strict=True):
        both = np.concatenate(kept[i])
        found[i] = (test, float(both.max() - both.min()))
    return found


def betting_test(
    reference: Sequence[float],
    candidate: Sequence[float],
    bounds: tuple[float, float],
    confidence: float,
    seed: int,
) -> BettingTest | None:
    """The betting test of candidate - reference on the pairs without NaN (None without pairs), on the
    scale a difference of values on `bounds` can take."""
    kept_reference, kept_candidate = _pairs(reference, candidate)
    if not kept_reference.size:
        return None
    width = bounds[1] - bounds[0]
    return BettingTest(kept_candidate - kept_reference, -width, width, confidence=confidence, seed=seed)


def smallest_attainable_p(pairs: int, resamples: int | None = None) -> float:
    """The smallest two-sided p-value the sign-flip test can give on `pairs` pairs: the most extreme of
    2^n equally likely sign patterns, counted at both ends; with `resamples`, also never under
    2 / (resamples + 1), where the patterns are drawn rather than enumerated (the observed one is counted
    with them). When it exceeds alpha, "not significant" is no evidence of noise: the test could not have
    said anything else."""
    if pairs <= 0:
        return 1.0
    exact = 2.0 / 2.0**pairs
    return min(1.0, exact if resamples is None else max(exact, 2.0 / (resamples + 1)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: controls the chance of any false "better" over the family. The k-th
    smallest of m p-values is multiplied by m - k + 1, made non-decreasing and capped at 1. Written out
    rather than statsmodels' `multipletests` (which gives the same numbers, tests check): that runs a full
    garbage collection on every call, 40 ms each, and a race calls it at every look."""
    if not p_values:
        return []
    ordered = np.argsort(np.asarray(p_values, dtype=float), kind="stable")
    m = len(ordered)
    scaled = np.asarray(p_values, dtype=float)[ordered] * (m - np.arange(m))
    adjusted = np.empty(m)
    adjusted[ordered] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return [float(p) for p in adjusted]


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """The significance level each comparison's interval is read at, so that its interval excludes zero
    exactly when Holm rejects it (for an interval made by inverting the comparison's own test, which
    excludes zero exactly when p < level). Holm tests the k-th smallest of m p-values at alpha/(m-k+1) and
    stops at the first that fails: a comparison reached before the stop is read at its own step's level, and
    every comparison from the stop on at the stopping step's level, which its p-value cannot be under."""
    ordered = np.argsort(np.asarray(p_values, dtype=float), kind="stable")
    m = len(ordered)
    levels = [0.0] * m
    stopped: float | None = None
    for step, index in enumerate(ordered):
        level = alpha / (m - step)
        if stopped is None and not p_values[index] < level:
            stopped = level
        levels[index] = stopped if stopped is not None else level
    return levels


Verdict = Literal["better", "tied", "worse"]


def verdict_of(difference: float, p_holm: float, *, alpha: float, higher_is_better: bool) -> Verdict:
    """A candidate's verdict against the best: tied unless its Holm-adjusted p-value is under alpha (and it
    differs at all), else better or worse in the metric's good direction."""
    if p_holm >= alpha or difference == 0:
        return "tied"
    return "better" if (difference > 0) == higher_is_better else "worse"


class PairedComparison(BaseModel):
    """One comparison with the best cell, made once for every cell with exactly the candidate's values.
    Fields added after the first release have defaults, so results tables stored before them still load."""

    candidate: str  # label of the other cell: the first (by label) of the cells with its values
    reference: str  # label of the best cell
    n: int  # paired cases
    difference: float  # mean(candidate - reference)
    # unadjusted interval of the mean paired difference, at the run's confidence: the inverted `test`
    # (stored before Holm-level intervals: a paired bootstrap)
    low: float
    high: float
    p_value: float  # raw
    p_holm: float  # Holm-adjusted over the family of comparisons with the best
    test: Test
    verdict: Verdict  # of the candidate, in the metric's good direction
    same: list[str] = []  # other cells with exactly the candidate's values: this comparison is theirs too
    identical: bool = False  # the candidate has exactly the best's values: no test, not in the family
    family: int | None = None  # distinct comparisons Holm corrected for (None: stored before groups)
    # 1 - the level Holm reads this comparison at (`holm_levels`); stored before: 1 - alpha / family
    adjusted_confidence: float | None = None
    adjusted_low: float | None = None  # the interval at adjusted_confidence, to read the verdict against
    adjusted_high: float | None = None
    # "holm": the adjusted interval is the inverted test at Holm's level, tied exactly when it holds zero;
    # None: stored before, a bootstrap at Bonferroni's 1 - alpha / family beside the test's verdict
    adjustment: Literal["holm"] | None = None

    @property
    def cells(self) -> list[str]:
        """Every cell this comparison speaks for."""
        return [self.candidate, *self.same]


def compare_to_best(
    values: Mapping[str, Mapping[str, float]],
    *,
    higher_is_better: bool,
    alpha: float = 0.05,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = CONFIDENCE,
    best: str | None = None,
    bounds: tuple[float, float] | None = None,
) -> tuple[str, list[PairedComparison]] | None:
    """The best cell by mean (ties by label; `best`: this cell instead, chosen elsewhere, e.g. a search's
    winner measured on cases its choice never saw) against every other cell on the cases both scored, by a
    test of the mean paired difference, Holm-corrected over the comparisons: on a metric with known
    `bounds` [a, b] the betting test on the scale of a difference, [a - b, b - a] (ragbench.stats.betting,
    which holds at any number of cases), else the sign-flip permutation test. `values`: cell -> case id ->
    value. None with < 2 cells.

    Cells with exactly the same values on the same cases (say a flat and an HNSW index that return the
    same lists) are one comparison, not one each, which would only make Holm stricter for nothing: the
    first by label is the candidate, the others its `same`. The best's own twins are one `identical`
    entry, tied without a test and outside the family.

    Every interval is the test inverted (the differences it does not reject), so a verdict and its
    interval are one decision: the unadjusted one (`low`, `high`) at `confidence`, and the one to read
    the verdict against at the level Holm holds that comparison to (`holm_levels`), which excludes zero
    exactly when Holm rejects: "tied" exactly when the adjusted interval contains zero. A zero mean
    difference is tied and its interval holds zero (it always holds the mean).

    The best is picked from the same data, so among many cells of equal quality a "worse" comes up
    more often than alpha (about 8% at alpha 5% with five; as nominal with two or three)."""
    means = {
        cell: float(np.mean(present))
        for cell, by_case in values.items()
        if (present := [v for v in by_case.values() if not math.isnan(v)])
    }
    if len(means) < 2:
        return None
    sign = -1.0 if higher_is_better else 1.0
    best = best if best in means else min(sorted(means), key=lambda cell: sign * means[cell])
    groups: dict[tuple[tuple[str, float], ...], list[str]] = {}
    for cell in sorted(means):
        key = tuple(sorted((case, v) for case, v in values[cell].items() if not math.isnan(v)))
        groups.setdefault(key, []).append(cell)
    twins = next(cells for cells in groups.values() if best in cells)  # best comes first: equal mean
    family = len(groups) - 1
    test_name = "paired_permutation" if bounds is None else "betting"
    common = {"reference": best, "test": test_name, "family": family, "adjustment": "holm"}
    candidates = [cells for cells in groups.values() if cells is not twins]
    shared = [[case for case in values[best] if case in values[cells[0]]] for cells in candidates]
    pairs = [
        ([values[best][case] for case in cases], [values[cells[0]][case] for case in cases])
        for cells, cases in zip(candidates, shared, strict=True)
    ]
    if bounds is None:
        tests: list[tuple[SignFlipTest | BettingTest | None, float]] = list(
            sign_flip_tests(pairs, seed=seed, resamples=resamples)
        )
    else:
        tests = [
            (betting_test(reference, candidate, bounds, confidence, seed), 0.0)
            for reference, candidate in pairs
        ]
    p_values = [test.p_value() if test is not None else 1.0 for test, _ in tests]
    comparisons = []
    for cells, (test, bound), p_value, p_holm, level in zip(
        candidates, tests, p_values, holm(p_values), holm_levels(p_values, alpha), strict=True
    ):
        if test is None:  # no case scored by both: no evidence
            difference, n, low, high, adjusted_low, adjusted_high = 0.0, 0, 0.0, 0.0, 0.0, 0.0
        else:
            difference, n = test.mean, test.n
            if isinstance(test, BettingTest):
                (low, high), (adjusted_low, adjusted_high) = (
                    test.interval(1 - confidence),
                    test.interval(level),
                )
            else:
                low, high = test.interval(1 - confidence, bound)
                adjusted_low, adjusted_high = test.interval(level, bound)
        verdict = verdict_of(difference, p_holm, alpha=alpha, higher_is_better=higher_is_better)
        comparisons.append(
            PairedComparison(
                **common,
                candidate=cells[0],
                same=cells[1:],
                n=n,
                difference=difference,
                low=low,
                high=high,
                adjusted_confidence=1 - level,
                adjusted_low=adjusted_low,
                adjusted_high=adjusted_high,
                p_value=p_value,
                p_holm=p_holm,
                verdict=verdict,
            )
        )
    if len(twins) > 1:
        n = sum(not math.isnan(v) for v in values[best].values())
        comparisons.append(
            PairedComparison(
                **common,
                candidate=twins[1],
                same=twins[2:],
                identical=True,
                n=n,
                difference=0.0,
                low=0.0,
                high=0.0,
                adjusted_confidence=1 - alpha / max(family, 1),  # no test: [0, 0] at the strictest level
                adjusted_low=0.0,
                adjusted_high=0.0,
                p_value=1.0,
                p_holm=1.0,
                verdict="tied",
            )
        )
    return best, sorted(comparisons, key=lambda c: c.candidate)


def tie_set(best: str, comparisons: Sequence[PairedComparison]) -> list[str]:
    """The best cell and every cell the data could not tell apart from it (twins of a tied cell too)."""
    return [best, *(cell for c in comparisons if c.verdict == "tied" for cell in c.cells)]


def weighted_kappa(
    first: Sequence[int], second: Sequence[int], labels: Sequence[int] = (1, 2, 3, 4, 5)
) -> float | None:
    """Quadratic-weighted Cohen's kappa: agreement beyond chance, a near miss (4 vs 5) counting less
    than a far one (1 vs 5). None with fewer than two pairs. Kappa is undefined (0/0) when both raters
    gave one and the same score to everything; they then agree on every item, reported as 1.0."""
    if len(first) != len(second):
        raise ValueError("both raters must rate the same items")
    if len(first) < 2:
        return None
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # the 0/0 above
        kappa = float(cohen_kappa_score(first, second, labels=list(labels), weights="quadratic"))
    if math.isfinite(kappa):
        return kappa
    return 1.0 if list(first) == list(second) else None


def confusion(
    first: Sequence[int], second: Sequence[int], labels: Sequence[int] = (1, 2, 3, 4, 5)
) -> list[list[int]]:
    """Counts with rows = the first rater's score and columns = the second's."""
    from sklearn.metrics import confusion_matrix

    return confusion_matrix(first, second, labels=list(labels)).tolist()


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test (binomial, p = 1/2) of wins against losses, ties already dropped: is
    one side preferred more often than chance would give? 1.0 with no decided pair (no evidence)."""
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must not be negative, got {wins} and {losses}")
    if wins + losses == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a proportion: unlike the normal (Wald) interval it stays inside [0, 1]
    and keeps its width at 0 or n successes, which small pairwise comparisons hit often. None for n = 0."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n], got {successes} of {n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if n == 0:
        return None
    from scipy.stats import binomtest

    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def cohen_kappa(pairs: Sequence[tuple[object, object]]) -> float | None:
    """Cohen's (unweighted) kappa of two raters over items, one (first, second) pair per item, for any
    categories (e.g. keep/reject as booleans): agreement beyond what chance would give at the raters'
    own rates of each category.

        kappa = (p_o - p_e) / (1 - p_e)
        p_o   = share of items both raters put in the same category
        p_e   = sum over categories c of p_first(c) * p_second(c)

    1 is full agreement, 0 what chance gives, below 0 worse than chance. None when undefined: no pair,
    or p_e = 1 (both raters put every item in the one same category, so chance already agrees fully).
    When only one rater uses a single category, p_o = p_e and kappa is 0."""
    n = len(pairs)
    if n == 0:
        return None
    firsts: dict[object, int] = {}
    seconds: dict[object, int] = {}
    for first, second in pairs:
        firsts[first] = firsts.get(first, 0) + 1
        seconds[second] = seconds.get(second, 0) + 1
    chance = sum(count * seconds.get(category, 0) for category, count in firsts.items())  # p_e * n^2
    if chance == n * n:
        return None
    observed = sum(first == second for first, second in pairs) / n
    expected = chance / (n * n)
    return (observed - expected) / (1.0 - expected)


class StatisticsConfig(Section):
    """How the uncertainty of every number is estimated (docs/concepts/uncertainty.md)."""

    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, description="level of every interval")
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="significance level of paired tests")
    resamples: int = Field(default=2000, ge=100, le=100_000, description="bootstrap and permutation draws")
    seed: int = Field(default=0, description="seed of bootstrap and permutation draws")
    power: float = Field(
        default=0.8,
        gt=0.5,
        lt=1.0,
        description="chance a planned comparison detects the difference it is planned for (dry run, report)",
    )
    detect: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description="a difference between cells, in a headline metric's units, the dry run and the report "
        "say whether the sample can detect and how many cases it needs (none: only the smallest "
        "detectable difference is stated)",
    )
