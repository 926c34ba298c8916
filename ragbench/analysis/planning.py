"""What a sample can decide, planned before the cases are spent: the smallest difference between two cells
a paired comparison on n cases detects (the minimum detectable difference, MDD), and the cases a given
difference needs, both for the test the report really makes (`compare_to_best`: the sign-flip permutation
test of the mean paired difference, Holm-corrected over the comparisons with the best cell).

The spread comes from a pilot: the per-case differences of two cells in an earlier run (or a run of a few
cases). The power is the paired t-test's, from the noncentral t, which the sign-flip test of the mean
matches beyond a handful of cases (it rejects exactly when sum(d) / sqrt(sum(d^2)) is large, a monotone
function of the t statistic); tests/unit/test_planning.py checks the planned power against the real test
by simulation. Two places where the two tests part are handled here rather than assumed away:

- too few cases: the sign-flip test's p-value cannot fall below 2 / 2^n (every pattern enumerated) or
  2 / (resamples + 1) (patterns drawn), so under some n nothing is detectable at all, however large the
  difference, and the plan says so rather than quoting a t-test's answer;
- Holm: the comparison planned for is read at alpha / comparisons, Holm's first and strictest step, the
  level it is held to when the other cells are tied with the best. Where they are clearly behind, Holm
  reads it at a laxer level and the power is higher: the plan is the guarantee, not the typical case.

A binary metric (a hit rate: per-case values 0 or 1) has paired differences of -1, 0 or 1, on which the
sign-flip test is the exact sign test of the cases the two cells disagree on, and the t-test's power is
optimistic (at 100 cases by about 6 points: few disagreeing cases, a discrete test). Its power is computed
exactly instead, over the binomial number of disagreeing cases. The plan keeps the pilot's share q of
cases the cells disagree on (at least |delta|, which a difference that large needs): a difference delta
then puts (q + delta) / 2 of the cases one way and (q - delta) / 2 the other.

A metric corrected by a person's labels is compared by another test (`ragbench.stats.ppi`'s
prediction-powered t-test); `labels_needed` plans the labels that test needs, from a pilot's judge and
label differences, for a simple random sample of labels.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from ragbench.stats.inference import StatisticsConfig, smallest_attainable_p
from ragbench.stats.ppi import MIN_LABELS

# bisection steps of a difference's size: 2^-60 of its bracket, far below any metric's printed precision
_HALVINGS = 60


def fewest_rejecting_cases(level: float, resamples: int | None = None) -> int | None:
    """The fewest paired cases on which the sign-flip test can give a p-value under `level` at all (a
    two-sided p-value under `level` needs 2 / 2^n < level); None when no number of cases can, because
    drawn sign patterns cannot give a p-value under 2 / (resamples + 1)."""
    if not 0 < level < 1:
        raise ValueError(f"the level must lie strictly between 0 and 1, got {level}")
    if resamples is not None and 2 / (resamples + 1) >= level:
        return None
    n = max(1, math.floor(math.log2(2 / level)) + 1)  # the first n with 2 / 2^n < level
    while smallest_attainable_p(n, resamples) >= level:
        n += 1
    return n


def paired_power(effect: float, cases: int, level: float, resamples: int | None = None) -> float:
    """The chance that the two-sided paired test at `level` on `cases` pairs rejects a mean difference of
    `effect` standard deviations of the per-case differences: the paired t-test's (statsmodels' noncentral
    t), and 0 where the sign-flip test cannot reject at `level` on that many cases."""
    if not _can_reject(cases, level, resamples):
        return 0.0
    if math.isinf(effect):  # every case moves the same way: the test rejects as soon as it can
        return 1.0
    from statsmodels.stats.power import TTestPower

    analysis = TTestPower()
    achieved = analysis.power(effect_size=effect, nobs=cases, alpha=level, alternative="two-sided")
    if math.isnan(achieved):
        # scipy's noncentral t gives NaN far in the wrong-direction tail (large effects): count the
        # right-direction tail alone, short of the two-sided power by under Phi(-d sqrt(n))
        achieved = analysis.power(effect_size=effect, nobs=cases, alpha=level / 2, alternative="larger")
    return float(achieved)


def binary_power(
    difference: float, disagree: float, cases: int, level: float, resamples: int | None = None
) -> float:
    """The chance that the sign-flip test at `level` on `cases` pairs of 0/1 values rejects a mean
    difference `difference`, when the two cells disagree on a share `disagree` (>= |difference|) of the
    cases: exactly, summed over the binomial number K of disagreeing cases, on which the test is the
    two-sided sign test (twice the smaller binomial tail, as `SignFlipTest.p_value` counts it)."""
    if not _can_reject(cases, level, resamples) or disagree <= 0:
        return 0.0
    from scipy.stats import binom

    disagree = min(1.0, max(disagree, abs(difference)))
    # only the counts of disagreeing cases with any chance matter: 12 standard deviations either side of
    # the mean leave out under 1e-30 of it, and make a plan for tens of thousands of cases cheap
    spread = 12 * math.sqrt(cases * disagree * (1 - disagree)) + 1
    k = np.arange(
        max(1, math.floor(cases * disagree - spread)), min(cases, math.ceil(cases * disagree + spread)) + 1
    )
    # the sign test on k cases rejects x of them one way when 2 P(X >= x) < level, X ~ Bin(k, 1/2):
    # from the smallest such x (`critical`) up, and from k - critical down
    critical = binom.isf(level / 2, k, 0.5) + 1
    critical = np.where(2 * binom.sf(critical - 1, k, 0.5) < level, critical, critical + 1)
    one_way = (disagree + difference) / (2 * disagree)
    rejects = binom.sf(critical - 1, k, one_way) + binom.cdf(k - critical, k, one_way)
    return float(np.clip(binom.pmf(k, cases, disagree) @ rejects, 0.0, 1.0))


def _can_reject(cases: int, level: float, resamples: int | None) -> bool:
    fewest = fewest_rejecting_cases(level, resamples)
    return fewest is not None and cases >= max(2, fewest)


@dataclass(frozen=True)
class PlannedTest:
    """The paired test a plan is for: its alpha, the power wanted, the Holm family the comparison is read
    in (at alpha / comparisons, Holm's strictest level), whether the metric is binary (0 or 1 per case:
    the exact sign-test power), and the sign-flip test's resamples (None: every pattern enumerated)."""

    alpha: float = 0.05
    power: float = 0.8
    comparisons: int = 1
    binary: bool = False
    resamples: int | None = None

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 1 and 0 < self.power < 1):
            raise ValueError(
                f"alpha and power must lie strictly between 0 and 1, got {self.alpha} and {self.power}"
            )
        if self.comparisons < 1:
            raise ValueError(f"at least one comparison is planned for, got {self.comparisons}")

    @classmethod
    def of(cls, settings: StatisticsConfig, comparisons: int, *, binary: bool) -> PlannedTest:
        """The test the report makes under the config's `statistics`, in a family of `comparisons`."""
        return cls(settings.alpha, settings.power, comparisons, binary, settings.resamples)

    @property
    def level(self) -> float:
        return self.alpha / self.comparisons

    def power_on(self, data: np.ndarray, difference: float, cases: int) -> float:
        """This test's power against a mean `difference` on `cases` cases at the pilot's spread."""
        return power_at(data, difference, cases, self.level, binary=self.binary, resamples=self.resamples)


def _pilot(differences: Sequence[float]) -> np.ndarray:
    return np.asarray([d for d in differences if not math.isnan(d)], dtype=float)


def disagreement(data: np.ndarray) -> float:
    """The share of cases two cells of a binary metric disagree on: the pilot's non-zero differences."""
    return float(np.mean(data != 0)) if data.size else 0.0


def power_at(
    data: np.ndarray, difference: float, cases: int, level: float, *, binary: bool, resamples: int | None
) -> float:
    """The power of the report's paired test at `level` on `cases` cases against a mean `difference`, at
    the pilot's spread: the pilot's standard deviation (ddof 1; a shift keeps it) for a continuous metric,
    its disagreement share for a binary one (`binary_power`)."""
    if binary:
        return binary_power(difference, disagreement(data), cases, level, resamples)
    sd = float(data.std(ddof=1))
    return paired_power(abs(difference) / sd if sd > 0 else math.inf, cases, level, resamples)


def _no_spread(data: np.ndarray, *, binary: bool) -> bool:
    """The pilot cannot say how differences vary: too few, the two cells scored the same on every case, or
    (a continuous metric) every case moved by the same amount."""
    return data.size < 2 or not data.any() or (not binary and float(data.std()) == 0.0)


def cases_needed(
    differences: Sequence[float], test: PlannedTest = PlannedTest(), *, difference: float | None = None
) -> int | None:
    """Paired cases the report's paired test needs to detect `difference` (default: the pilot's observed
    mean difference) with `power`, at the spread of the pilot's per-case `differences` (`power_at`; a
    paired test on n pairs is a one-sample test on their n differences), at alpha / comparisons (Holm's
    strictest level), and never fewer than the sign-flip test needs to reject at that level at all.

    None when there is no difference to detect, when the pilot is too small or never differs (no spread
    to plan from), or when no number of cases can reach the level (`resamples` too few). When a continuous
    pilot's differences do not vary (every case moves the same way) the answer is the fewest cases that
    can reject."""
    binary = test.binary
    data = _pilot(differences)
    if data.size < 2 or not data.any():
        return None
    target = float(data.mean()) if difference is None else float(difference)
    fewest = fewest_rejecting_cases(test.level, test.resamples)
    if target == 0.0 or (binary and abs(target) > 1.0) or fewest is None:
        return None
    if _no_spread(data, binary=binary):  # a continuous pilot whose every case moved by one amount
        return max(2, fewest)
    from statsmodels.stats.power import TTestPower
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    def enough(n: int) -> bool:
        return test.power_on(data, target, n) >= test.power

    # the t-test's answer is the starting guess (a binary metric's at its variance at the target); the
    # integer answer is the smallest n whose power reaches the target. solve_power's root finder fails
    # (NaN) or lands one case short for large effects, where the answer is a handful of cases.
    sd = (
        math.sqrt(max(0.0, max(disagreement(data), abs(target)) - target * target))
        if binary
        else float(data.std(ddof=1))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # said before returning NaN
        guess = (
            float(
                np.asarray(
                    TTestPower().solve_power(
                        effect_size=abs(target) / sd,
                        alpha=test.level,
                        power=test.power,
                        alternative="two-sided",
                    )
                ).item()
            )
            if sd > 0
            else math.nan
        )
    low, high = 1, max(2, fewest, math.ceil(guess) if math.isfinite(guess) else 2)  # n = 1: no test
    while not enough(high):  # power grows with n: double until enough, then bisect
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return max(2, high)


def minimum_detectable_difference(
    differences: Sequence[float], cases: int, test: PlannedTest = PlannedTest()
) -> float | None:
    """The smallest mean paired difference (in the metric's units, either direction) the report's paired
    test detects with `power` on `cases` cases at alpha / comparisons, at the spread of the pilot's
    per-case `differences` (`power_at`). None when the pilot has no spread to plan from or when nothing is
    detectable on that many cases (`fewest_rejecting_cases`); `plan` says which."""
    data = _pilot(differences)
    if _no_spread(data, binary=test.binary) or not _can_reject(cases, test.level, test.resamples):
        return None

    def enough(delta: float) -> bool:
        return test.power_on(data, delta, cases) >= test.power

    # a binary difference of 1 (every case one way) is detected wherever anything is
    low, high = 0.0, 1.0 if test.binary else float(data.std(ddof=1))
    while not enough(high):
        low, high = high, high * 2
    for _ in range(_HALVINGS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


class DetectionPlan(BaseModel):
    """What a sample of `cases` paired cases can decide on one metric, from a pilot's spread: the smallest
    difference it detects and, for a difference the user names (`statistics.detect`), the cases it needs."""

    cases: int  # paired cases the comparison will have
    alpha: float
    power: float
    comparisons: int  # the family Holm corrects over; the plan reads each at alpha / comparisons
    pilot_cases: int  # paired differences the spread was measured on
    binary: bool
    spread: bool = True  # the pilot varies: False, nothing can be planned from it
    detectable: float | None  # the minimum detectable difference; None: see `why_not`
    why_not: str = ""
    detect: float | None = None  # the difference the user wants to detect (`statistics.detect`)
    cases_to_detect: int | None = None  # paired cases that difference needs; None: no number can

    @property
    def level(self) -> float:
        return self.alpha / self.comparisons

    @property
    def can_detect(self) -> bool | None:
        """Whether the sample detects `detect` with the planned power; None without a target."""
        if self.detect is None or not self.spread:
            return None
        return self.detectable is not None and self.detectable <= abs(self.detect)

    def text(self) -> str:
        """`on 50 cases the paired test detects a difference of 0.081 or more (80% power, alpha 0.05 / 3
        comparisons (Holm)); a difference of 0.05 needs about 130 cases: THIS SAMPLE CANNOT DETECT IT`."""
        holm = f" / {self.comparisons} comparisons (Holm)" if self.comparisons > 1 else ""
        how = f"{self.power:.0%} power, alpha {self.alpha:g}{holm}"
        if self.detectable is None:
            text = f"on {self.cases} cases {self.why_not}"
        else:
            size = f"{self.detectable:.3g}"
            text = f"on {self.cases} cases the paired test detects a difference of {size} or more ({how})"
        if self.detect is None:
            return text
        if not self.spread:
            return f"{text}, nor whether it detects a difference of {abs(self.detect):g}"
        needs = (
            f"needs about {self.cases_to_detect} cases"
            if self.cases_to_detect is not None
            else "cannot be detected by any number of cases at this level"
        )
        verdict = "this sample can detect it" if self.can_detect else "THIS SAMPLE CANNOT DETECT IT"
        return f"{text}; a difference of {abs(self.detect):g} {needs}: {verdict}"


def plan(
    differences: Sequence[float],
    cases: int,
    test: PlannedTest = PlannedTest(),
    *,
    detect: float | None = None,
) -> DetectionPlan:
    """The plan of a comparison on `cases` cases from the pilot's per-case `differences` (NaN dropped),
    with the reason when nothing can be planned: no spread in the pilot, or too few cases for the
    sign-flip test to reach alpha / comparisons whatever the difference."""
    data = _pilot(differences)
    detectable = minimum_detectable_difference(data, cases, test)
    level, resamples = test.level, test.resamples
    why_not = ""
    if detectable is None:
        fewest = fewest_rejecting_cases(level, resamples)
        if _no_spread(data, binary=test.binary):
            why_not = (
                f"nothing can be planned: the pilot's {data.size} paired case(s) do not vary, so they say "
                "nothing of how a difference would"
            )
        elif fewest is None:
            why_not = (
                f"nothing is detectable: {resamples} resamples cannot give a p-value under the level "
                f"{level:.3g} (raise statistics.resamples)"
            )
        else:
            why_not = (
                f"nothing is detectable, however large the difference: the paired test's smallest p-value "
                f"there is {smallest_attainable_p(cases, resamples):.3g}, not under the level {level:.3g} "
                f"(it needs at least {fewest} cases)"
            )
    return DetectionPlan(
        cases=cases,
        alpha=test.alpha,
        power=test.power,
        comparisons=test.comparisons,
        pilot_cases=int(data.size),
        binary=test.binary,
        detectable=detectable,
        why_not=why_not,
        spread=not _no_spread(data, binary=test.binary),
        detect=detect,
        cases_to_detect=None if detect is None else cases_needed(data, test, difference=detect),
    )


def is_binary(*values: Sequence[float]) -> bool:
    """Whether every (non-NaN) value is 0 or 1: a hit-rate-like metric, planned with the sign test's exact
    power (`binary_power`)."""
    return all(v in (0.0, 1.0) for side in values for v in side if not math.isnan(v))


def labels_needed(
    judge: Sequence[float],
    labels: Sequence[float],
    *,
    answers: int,
    difference: float,
    alpha: float = 0.05,
    power: float = 0.8,
    comparisons: int = 1,
    min_labels: int = MIN_LABELS,
) -> int | None:
    """Labels (of `answers` judged paired differences, drawn as a simple random sample) the label-corrected
    comparison needs to detect a mean paired difference `difference` with `power` at alpha / comparisons:
    the prediction-powered t-test of `ragbench.stats.ppi` (PPI++, its judge weight tuned), planned from
    a pilot's judge differences `judge` and the person's `labels` of them (NaN where unlabelled).

    The pilot gives the judge's variance (over every answer), the labels' variance and their covariance
    with the judge; at n labels the estimate's variance is then the judge's mean over the N - n unlabelled
    answers, lam^2 var(f) / (N - n), plus the correction's, var(y - lam f) / n, with lam tuned as PPI++
    tunes it, plus the tuned lam's own variance times the squared gap it multiplies (as `ppi.fit` adds
    it), and t with n - 2 degrees of freedom. Labelling every answer is the labels alone. None when the
    pilot has fewer than 3 labelled differences or none that vary, or when even labelling all `answers`
    would not reach `power`. A weighted (uncertainty-first) sample is not planned here: its variance
    depends on the probabilities the next labels would be drawn with."""
    level = PlannedTest(alpha, power, comparisons).level
    f, y = np.asarray(judge, dtype=float), np.asarray(labels, dtype=float)
    if f.shape != y.shape or f.ndim != 1:
        raise ValueError("judge differences and labels must be two equally long lists")
    labelled = ~np.isnan(y)
    if labelled.sum() < 3 or np.ptp(y[labelled]) == 0 or f.size < 2:
        return None
    var_f = float(np.var(f, ddof=1))
    person, judged = y[labelled], f[labelled]
    var_y = float(np.var(person, ddof=1))
    cov = float(np.cov(person, judged, ddof=1)[0, 1])
    judged_centred = judged - judged.mean()

    def achieved(n: int) -> float:
        if n >= answers:  # a census: the labels alone
            error, freedom = math.sqrt(var_y / answers), answers - 1
        else:
            rest = answers - n
            lam = 0.0 if var_f == 0 else float(np.clip(cov / ((1 + n / rest) * var_f), 0.0, 1.0))
            residuals = person - lam * judged
            centred = residuals - residuals.mean()
            # the tuned lam's own variance, m4 / (n var_f^2), times the expected squared gap between the
            # judge's mean over the unlabelled and the labelled answers, var_f (1 / (N - n) + 1 / n)
            moment = float(np.mean(centred**2 * judged_centred**2))
            lam_term = 0.0 if var_f == 0 else moment * (1 / rest + 1 / n) / (n * var_f)
            variance = (
                lam * lam * var_f / rest + float(np.var(residuals, ddof=1)) / n + lam_term * n / (n - 1)
            )
            error, freedom = math.sqrt(variance), n - 2
        return _t_power(abs(difference) / error if error > 0 else math.inf, freedom, level)

    # every count in turn, not a bisection: the power is not monotone in the labels. Near a census the tuned
    # lam's own variance term grows as 1 / (N - n) (ppi.py's interval widens there, as planned here),
    # until labelling every answer drops it
    return next((n for n in range(max(3, min_labels), answers + 1) if achieved(n) >= power), None)


def _t_power(shift: float, freedom: int, level: float) -> float:
    """Power of a two-sided t-test at `level` with `freedom` degrees of freedom whose statistic is centred
    at `shift` standard errors (the noncentral t)."""
    if math.isinf(shift):
        return 1.0
    from scipy.stats import nct
    from scipy.stats import t as t_dist

    critical = float(t_dist.isf(level / 2, freedom))
    shift = abs(shift)
    # scipy's noncentral t gives NaN far in a tail (large shifts): the wrong-direction tail is then 0, and
    # the right-direction one the normal's, which it is within a hair of out there
    wrong = float(nct.cdf(-critical, freedom, shift))
    right = float(nct.sf(critical, freedom, shift))
    if math.isnan(right):
        from scipy.stats import norm

        right = float(norm.sf(critical - shift))
    return min(1.0, right + (0.0 if math.isnan(wrong) else wrong))
