"""Prediction-powered estimates: a judged metric corrected by a person's labels of a random sample of its
answers, with an interval that is valid whatever the judge's quality and narrower the better the judge.

The judge scores all N answers; a person labels n of them, drawn with known inclusion probabilities. The
estimate is the judge's mean corrected by the judge's average error on the labelled sample, with the
judge's weight `lam` tuned to the data (PPI++: Angelopoulos, Duchi and Zrnic, 2023): lam = 0 is the labels
alone, lam = 1 plain PPI. The tuned weight is no worse than the labels alone only with many labels; at a
dozen it is fitted to the same few, so the estimate used is the narrower of PPI++ and the labels alone
(`ppi_mean`), and bench/bench_ppi.py checks that this choice keeps coverage.

- A uniform sample (a simple random sample of the answers) uses PPI++ exactly as the reference code
  (`ppi_py.ppi_mean_ci` with power tuning) computes it: the labelled answers against the judge's scores of
  the unlabelled ones; tests/system/test_ppi_conformance.py checks it to 1e-6.
- A weighted sample (answers where the judge is least sure drawn more often, `ragbench.review.sampling`)
  weights every label by its inverse inclusion probability (active inference: Zrnic and Candès, 2024) in
  the ratio (Hajek) form of the same estimator: the judge's mean over all N answers plus the weighted
  mean of y_i - lam * f_i over the labels. With equal weights it is PPI++ again.

A difference between two cells on the same cases is the same estimate applied to the per-case differences
of their judge scores and of their labels (a case's answers are labelled together).

All values are on the metric's own scale (0-1 for normalised judge scores). Intervals are the textbook
small-sample intervals of a regression estimator (which PPI++ with a tuned lam is): t intervals, shaped
by the values' range and the scale's step where those are known (`Inference`), so the p-value of a
difference and the interval beside it are one t-test, inverted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.optimize import brentq
from scipy.stats import t as t_dist

from ragbench.stats.formatting import interval_text

MIN_LABELS = 10  # fewer labels than this give no interval: the normal approximation is not to be trusted


class ValueShape(BaseModel):
    """What the labelled values can be: the range they lie in and, for scores on a scale, the step between
    two neighbouring scores. Near a scale's end a mean's spread shrinks, and a sample of a dozen labels
    piled at the end shows almost none: the shape keeps the interval honest there (see `Inference`)."""

    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    step: float | None = None  # None: any value in the range (no floor under the variance)

    def spread(self, mean: np.ndarray) -> np.ndarray:
        """u (1 - u) for u the mean's place in the range: how a bounded value's largest variance, and the
        variance of values piled towards an end, scale with their mean."""
        u = np.clip((mean - self.low) / (self.high - self.low), 0.0, 1.0)
        return u * (1.0 - u)

    def variance_floor(self, mean: np.ndarray) -> np.ndarray:
        """The least variance values on the scale's steps can have with this mean: all of them on the two
        steps around it (mean 0.1 on steps 0, 0.25, ... cannot come from values that all equal 0.1)."""
        if self.step is None:
            return np.zeros_like(mean)
        place = (mean - self.low) / self.step
        fraction = place - np.floor(place)
        return self.step * self.step * fraction * (1.0 - fraction)


class Inference(BaseModel):
    """One estimator of a mean (the labels alone, or the judge corrected by them) and the variance it has
    at each value the true mean might take, so that its interval at any level and its test of any value are
    one t statistic, inverted.

    Without a shape the variance is the estimated one everywhere: the textbook t interval. With one (values
    bounded, as every judged score is) it is a score interval, Wilson's idea for a proportion carried to
    bounded scores: the variance at a candidate mean m scales as m (1 - m) does on the range (quasi-binomial,
    anchored at the labels' own mean and spread), and never falls below the least variance the scale's steps
    allow at m, weighted as the estimator's variance is against the labels'. Labels piled at an end then give
    an interval that leans towards the middle, as the truth can but the t interval cannot, and labels that
    are all the same still give one (all 12 at the bottom of a 1-5 scale: [0, 0.08] on 0-1)."""

    estimate: float
    standard_error: float  # at the labels' own mean, where their spread was measured
    degrees_of_freedom: int
    reference: float  # the labels-alone mean
    floor: float  # weight of the scale's variance floor: (this variance / the labels-alone variance) / n
    shape: ValueShape | None = None

    def variance(self, mean: np.ndarray) -> np.ndarray:
        squared = self.standard_error**2
        if self.shape is None:
            return np.full_like(mean, squared)
        anchor = float(self.shape.spread(np.asarray(self.reference)))
        scaled = squared * self.shape.spread(mean) / anchor if anchor > 0 else np.zeros_like(mean)
        return np.maximum(scaled, self.floor * self.shape.variance_floor(mean))

    def _excess(self, mean: float, quantile: float) -> float:
        """Positive outside the interval: how far `mean` is beyond the quantile's reach."""
        return abs(self.estimate - mean) - quantile * math.sqrt(float(self.variance(np.asarray(mean))))

    def interval_at(self, level: float) -> tuple[float, float]:
        """Every mean the two-sided test at significance `level` does not reject (its hull, for a shape)."""
        quantile = float(t_dist.isf(level / 2, self.degrees_of_freedom))
        if self.shape is None:
            half = quantile * self.standard_error
            return self.estimate - half, self.estimate + half
        grid = np.unique(np.append(np.linspace(self.shape.low, self.shape.high, 401), self.estimate))
        inside = np.abs(self.estimate - grid) <= quantile * np.sqrt(self.variance(grid))
        first, last = int(np.argmax(inside)), int(grid.size - 1 - np.argmax(inside[::-1]))
        low, high = float(grid[first]), float(grid[last])
        if first > 0:
            low = brentq(self._excess, grid[first - 1], grid[first], args=(quantile,), xtol=1e-10)
        if last < grid.size - 1:
            high = brentq(self._excess, grid[last], grid[last + 1], args=(quantile,), xtol=1e-10)
        return low, high

    def p_value(self, null: float = 0.0) -> float:
        """Two-sided t-test of `null`: the test whose inversion is `interval_at`."""
        spread = math.sqrt(float(self.variance(np.asarray(null))))
        gap = abs(self.estimate - null)
        if spread == 0:
            return 1.0 if gap < 1e-12 else 0.0
        return float(2 * t_dist.sf(gap / spread, self.degrees_of_freedom))


class Estimate(BaseModel):
    """One corrected mean (or mean difference) beside the judge's and the labels' own.

    The reported estimate is the narrower of two intervals at the run's confidence: the judge's verdicts
    corrected by the labels (PPI++), or the labels alone. A judge that agrees too poorly for its verdicts
    to help at these labels is thus never allowed to widen the numbers; the report names which was used
    (`judge_used`). bench/bench_ppi.py checks that the choice keeps coverage."""

    estimate: float | None  # the one used; None: too few labels
    low: float | None
    high: float | None
    standard_error: float | None
    degrees_of_freedom: int | None = None  # of the t quantile the interval uses
    judge_mean: float  # the judge alone, over every answer
    labels_mean: float | None  # the labels alone (inverse-probability weighted when the sample is)
    labels_low: float | None
    labels_high: float | None
    labels: int  # labelled answers used
    answers: int  # answers the judge scored
    effective_labels: float | None  # labels the estimate is worth: n (labels-alone width / this width)^2
    judge_weight: float | None  # lam, the judge's tuned weight in [0, 1] (0 when the labels alone are used)
    weighted: bool  # labels drawn with unequal probabilities, weighted by their inverse
    confidence: float
    why_no_interval: str = ""
    judge_used: bool = True  # False: the labels alone are the estimate (the judge would have widened it)
    labels_only: Inference | None = None
    corrected_fit: Inference | None = None  # PPI++ with the tuned lam, used or not

    @property
    def used(self) -> Inference | None:
        return self.corrected_fit if self.judge_used else self.labels_only

    @property
    def source(self) -> str:
        """Which procedure the estimate is: what the report and the terminal name."""
        return "label-corrected" if self.judge_used else "labels alone"

    @property
    def judge_note(self) -> str:
        """Said wherever the estimate is shown when the labels alone were used: the judge added nothing."""
        if self.estimate is None or self.judge_used:
            return ""
        if self.labels == self.answers:
            return "labels alone: every answer is labelled, the judge adds nothing"
        return (
            f"labels alone: at {self.labels} labels the judge's verdicts would widen the interval, "
            "so they are not used"
        )

    @property
    def p_value(self) -> float:
        """Two-sided test of zero (for a difference): the test whose inversion is [low, high]."""
        return 1.0 if self.estimate is None or self.used is None else self.used.p_value(0.0)

    @property
    def labels_p_value(self) -> float:
        """The labels alone's own test of zero, whichever estimate is used."""
        return 1.0 if self.labels_only is None else self.labels_only.p_value(0.0)

    def interval_at(self, level: float) -> tuple[float, float]:
        """The interval at significance `level` (1 - confidence) of the estimate used."""
        if self.estimate is None or self.used is None:
            raise ValueError("no estimate: too few labels")
        return self.used.interval_at(level)

    def text(self) -> str:
        """`0.42 [0.30, 0.54] (labels 40, worth 71)`, or why there is none."""
        if self.estimate is None:
            return self.why_no_interval
        shown = f"{self.estimate:.2f} {interval_text(self.low, self.high, digits=2)}"
        if not self.judge_used:
            return f"{shown} (labels alone, {self.labels})"
        worth = f", worth {self.effective_labels:.0f}" if self.effective_labels is not None else ""
        return f"{shown} (labels {self.labels}{worth})"


@dataclass(frozen=True)
class Fit:
    """One prediction-powered mean and the parts of its variance, before any small-sample correction."""

    estimate: float
    lam: float
    tuned: bool  # lam fitted to these labels (not given): its own variance counts, and a degree of freedom
    imputed_variance: float  # lam^2 var(f) / |target|: the judge's mean over the answers it stands for
    rectifier_variance: float  # sum w_i^2 (r_i - r)^2, r_i = y_i - lam f_i: the labelled correction's
    shared_variance: float  # twice their covariance when the target holds the labelled answers too
    lam_variance_term: float  # var(lam) (target mean of f - labelled mean of f)^2: a tuned lam's own noise

    @property
    def standard_error(self) -> float:
        """lam taken as known, standard deviations with ddof 0: ppi_py's for a uniform sample."""
        return math.sqrt(self.imputed_variance + self.shared_variance + self.rectifier_variance)


def fit(
    labels: np.ndarray,
    judge_labelled: np.ndarray,
    weights: np.ndarray,
    judge_target: np.ndarray,
    judge_all: np.ndarray,
    lam: float | None = None,
    *,
    target_holds_labelled: bool = False,
) -> Fit:
    """PPI++ with the labelled answers weighted by `weights` (normalised here):
    estimate = lam * mean(judge_target) + sum w_i (y_i - lam f_i).

    Equal weights with the unlabelled answers as the target are ppi_py's estimator. Inverse inclusion
    probabilities with every answer as the target are its ratio (Hajek) form for a weighted sample: unbiased
    to first order whatever the probabilities, and, unlike a plain inverse-probability sum, indifferent to
    where the scale's zero lies. The tuned lam is ppi_py's, cov(y, f) / ((1 + n / |target|) var(f over
    `judge_all`)), clipped to [0, 1], with the weighted covariance and Kish's effective n when weighted.
    `lam_variance_term` is the delta-method (sandwich) variance of that lam times the squared gap it
    multiplies: the term a regression estimator's textbook interval adds for its fitted slope. When the
    target holds the labelled answers too (`target_holds_labelled`: the weighted form), the judge's mean
    and the correction share those answers, and `shared_variance` adds twice their covariance (from the
    linearised estimator: lam (f_i - mean f) / |target| + w_i (r_i - r) summed over every answer)."""
    w = weights / weights.sum()
    labelled_mean = float(w @ judge_labelled)
    judge_centred = judge_labelled - labelled_mean
    tuned = lam is None
    if lam is None:
        covariance = float(w @ ((labels - w @ labels) * judge_centred))
        variance = float(np.var(judge_all, ddof=1))
        effective = 1.0 / float(w @ w)
        ratio = 1 + effective / judge_target.size
        lam = 0.0 if variance == 0 else float(np.clip(covariance / (ratio * variance), 0.0, 1.0))
    residuals = labels - lam * judge_labelled
    centred = residuals - float(w @ residuals)
    squared = w * w
    spread = float(w @ (judge_centred * judge_centred))
    lam_variance = 0.0 if spread == 0 else float(squared @ (centred * judge_centred) ** 2) / spread**2
    target_mean = float(judge_target.mean())
    shared = 0.0
    if target_holds_labelled:
        shared = 2 * lam * float(w @ ((judge_labelled - target_mean) * centred)) / judge_target.size
    return Fit(
        estimate=float(lam * target_mean + w @ residuals),
        lam=lam,
        tuned=tuned,
        imputed_variance=lam * lam * float(np.var(judge_target)) / judge_target.size,
        rectifier_variance=float(squared @ (centred * centred)),
        shared_variance=shared,
        lam_variance_term=lam_variance * (target_mean - labelled_mean) ** 2,
    )


def ppi_uniform(
    labels: np.ndarray, judge_labelled: np.ndarray, judge_unlabelled: np.ndarray, lam: float | None = None
) -> Fit:
    """PPI++ on a simple random sample exactly as `ppi_py.ppi_mean_ci` computes it: the labelled answers
    against the judge's scores of the unlabelled ones (tests/system/test_ppi_conformance.py checks it to
    1e-6)."""
    return fit(
        labels,
        judge_labelled,
        np.ones(labels.size),
        judge_unlabelled,
        np.concatenate([judge_labelled, judge_unlabelled]),
        lam,
    )


def ppi_weighted(
    judge: np.ndarray, labels: np.ndarray, labelled: np.ndarray, probabilities: np.ndarray, lam: float | None
) -> Fit:
    """PPI++ on a sample drawn with unequal `probabilities`: every label weighted by its inverse inclusion
    probability, the judge's mean taken over all N answers (`labels` read only where `labelled`)."""
    weights = 1.0 / probabilities[labelled]
    return fit(labels[labelled], judge[labelled], weights, judge, judge, lam, target_holds_labelled=True)


def ppi_mean(
    judge: Sequence[float],
    labels: Sequence[float],
    probabilities: Sequence[float] | None = None,
    *,
    confidence: float = 0.95,
    min_labels: int = MIN_LABELS,
    bounds: tuple[float, float] | None = None,
    step: float | None = None,
) -> Estimate:
    """The corrected mean of N answers' judge scores `judge`, given the person's `labels` (NaN where an
    answer was not labelled), drawn uniformly (`probabilities` None) or with the given inclusion
    probabilities (one per answer, every labelled one > 0).

    Two estimators are fitted and the one with the narrower interval at `confidence` is used: PPI++ with
    the judge's weight tuned (its interval the small-sample one of a regression estimator, which PPI++
    with a tuned lam is, rather than ppi_py's large-sample normal interval, which covered 92.6-94.4 % at
    20 labels in bench/bench_ppi.py: the correction's variance unbiased (n - 1), the tuned lam's own
    variance added, Student's t with n - 2 degrees of freedom), and the labels alone (t with n - 1). At a
    dozen labels lam is fitted to the same few labels and PPI++ can come out wider than the labels alone
    (its extra degree of freedom and lam's noise cost more than a poor judge saves; arXiv 2505.20178):
    the choice keeps the corrected number never wider, and bench/bench_ppi.py measures that it keeps
    coverage. `bounds` is the range the values can take and `step` the step between scale scores: with
    them both intervals are score intervals shaped by the range (`Inference`), which hold where labels pile
    at an end of the scale; without, plain t intervals. Labelled values that do not vary give no interval
    unless the scale's step says how little they could vary (a point would read as certainty)."""
    f = np.asarray(judge, dtype=float)
    y = np.asarray(labels, dtype=float)
    if f.shape != y.shape or f.ndim != 1 or f.size == 0:
        raise ValueError(
            f"judge scores and labels must be two equally long lists, got {f.shape} and {y.shape}"
        )
    if np.isnan(f).any():
        raise ValueError("every answer needs the judge's score: leave unscored answers out")
    labelled = ~np.isnan(y)
    n, big_n = int(labelled.sum()), int(f.size)
    common = {"judge_mean": float(f.mean()), "labels": n, "answers": big_n, "confidence": confidence}
    weighted = probabilities is not None
    fewest = max(3, min_labels)
    if n < fewest:
        return _no_interval(
            y, labelled, weighted, f"{n} label(s): at least {fewest} are needed for an interval", common
        )
    effective_n = float(n)
    if weighted:
        p = np.asarray(probabilities, dtype=float)
        if p.shape != f.shape or np.any(p[labelled] <= 0) or np.any(p > 1):
            raise ValueError("inclusion probabilities: one per answer, in (0, 1] for every labelled one")
        tuned, alone = ppi_weighted(f, y, labelled, p, None), ppi_weighted(f, y, labelled, p, 0.0)
        weights = 1.0 / p[labelled]
        effective_n = float(weights.sum() ** 2 / (weights @ weights))
    elif n == big_n:  # a census: the labels are the answer, the judge adds nothing
        tuned = alone = fit(y, f, np.ones(n), f, f, 0.0, target_holds_labelled=True)
    else:
        tuned = ppi_uniform(y[labelled], f[labelled], f[~labelled])
        alone = ppi_uniform(y[labelled], f[labelled], f[~labelled], 0.0)
    error, freedom = _small_sample_error(tuned, n)
    alone_error, alone_freedom = _small_sample_error(alone, n)
    shape = None if bounds is None else ValueShape(low=bounds[0], high=bounds[1], step=step)
    if (error == 0 or alone_error == 0) and (shape is None or shape.step is None):
        return _no_interval(
            y,
            labelled,
            weighted,
            f"the {n} labelled value(s) do not vary: no interval can be estimated",
            common,
        )
    share = (error / alone_error) ** 2 if alone_error > 0 else 1.0
    labels_only = Inference(
        estimate=alone.estimate,
        standard_error=alone_error,
        degrees_of_freedom=alone_freedom,
        reference=alone.estimate,
        floor=1.0 / effective_n,
        shape=shape,
    )
    corrected = Inference(
        estimate=tuned.estimate,
        standard_error=error,
        degrees_of_freedom=freedom,
        reference=alone.estimate,
        floor=share / effective_n,
        shape=shape,
    )
    level = 1 - confidence
    labels_low, labels_high = _cut(labels_only.interval_at(level), bounds)
    corrected_low, corrected_high = _cut(corrected.interval_at(level), bounds)
    judge_used = tuned is not alone and corrected_high - corrected_low < labels_high - labels_low
    used = corrected if judge_used else labels_only
    low, high = (corrected_low, corrected_high) if judge_used else (labels_low, labels_high)
    return Estimate(
        estimate=used.estimate,
        low=low,
        high=high,
        standard_error=used.standard_error,
        degrees_of_freedom=used.degrees_of_freedom,
        labels_mean=alone.estimate,
        labels_low=labels_low,
        labels_high=labels_high,
        effective_labels=n * ((labels_high - labels_low) / (high - low)) ** 2 if high > low else float(n),
        judge_weight=tuned.lam if judge_used else 0.0,
        weighted=weighted,
        judge_used=judge_used,
        labels_only=labels_only,
        corrected_fit=corrected,
        **common,
    )


def _cut(interval: tuple[float, float], bounds: tuple[float, float] | None) -> tuple[float, float]:
    """An interval cut to the range the values can take (a mean of 0-1 scores is never above 1: cutting
    there changes no coverage and no verdict about zero)."""
    low, high = interval
    return (low, high) if bounds is None else (max(low, bounds[0]), min(high, bounds[1]))


def _small_sample_error(result: Fit, n: int) -> tuple[float, int]:
    """(standard error, degrees of freedom) of a fit on n labels: the correction's variance made unbiased
    (n / (n - 1)); with lam tuned, lam's own variance added and t with n - 2 (a mean and lam are fitted),
    with lam given (the labels alone) t with n - 1."""
    lam_term = result.lam_variance_term if result.tuned else 0.0
    correction = (result.rectifier_variance + lam_term) * n / (n - 1)
    variance = result.imputed_variance + result.shared_variance + correction
    return math.sqrt(max(0.0, variance)), n - 2 if result.tuned else n - 1


def _no_interval(y: np.ndarray, labelled: np.ndarray, weighted: bool, why: str, common: dict) -> Estimate:
    return Estimate(
        estimate=None,
        low=None,
        high=None,
        standard_error=None,
        labels_mean=float(y[labelled].mean()) if labelled.any() else None,
        labels_low=None,
        labels_high=None,
        effective_labels=None,
        judge_weight=None,
        weighted=weighted,
        why_no_interval=why,
        **common,
    )


def labels_for_width(estimate: Estimate, width: float) -> int | None:
    """Labels in all that would bring the interval's full width (before any cut to the values' range) under
    `width`, if the judge keeps agreeing with the person as it has so far: the width shrinks as 1/sqrt(n)
    (a planning figure, not a promise). None without an interval. A figure past the answers there are to
    label is not capped here: `labels_plan_text` says to add cases."""
    if estimate.used is None or width <= 0:
        return None
    low, high = estimate.used.interval_at(1 - estimate.confidence)
    return max(estimate.labels, math.ceil(estimate.labels * ((high - low) / width) ** 2))


def labels_plan_text(needed: int, cases: int) -> str:
    """`about 40 labelled cases in all`, or, past the eval set's size, that labelling cannot get there."""
    if needed <= cases:
        return f"about {needed} labelled cases in all"
    return f"more labelled cases than the eval set's {cases} (about {needed}): label them all and add cases"


def judge_ceiling(judge_labelled: Sequence[float], labels: Sequence[float]) -> float | None:
    """The most labels a judge's verdict can be worth per label with many unlabelled answers: 1/(1 - rho^2)
    for the correlation rho between its scores and the person's on the labelled answers (PPI++'s variance
    is var(y) (1 - rho^2)/n at best). None when either side does not vary."""
    f, y = np.asarray(judge_labelled, dtype=float), np.asarray(labels, dtype=float)
    if f.size < 2 or f.std() == 0 or y.std() == 0:
        return None
    rho = float(np.corrcoef(f, y)[0, 1])
    return 1.0 / max(1e-9, 1.0 - rho * rho)
