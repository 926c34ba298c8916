"""Prediction-powered estimates: a judged metric corrected by a person's labels of a random sample of its
answers, with an interval that is valid whatever the judge's quality and narrower the better the judge.

The judge scores all N answers; a person labels n of them, drawn with known inclusion probabilities. The
estimate is the judge's mean corrected by the judge's average error on the labelled sample, with the
judge's weight `lam` tuned to the data (PPI++: Angelopoulos, Duchi and Zrnic, 2023): lam = 0 is the labels
alone, lam = 1 plain PPI, and the tuned weight is never much worse than the labels alone.

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
small-sample intervals of a regression estimator (which PPI++ with a tuned lam is), t intervals around
the estimate, so the p-value of a difference and the interval beside it are one t-test, inverted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel
from scipy.stats import t as t_dist

MIN_LABELS = 10  # fewer labels than this give no interval: the normal approximation is not to be trusted


class Estimate(BaseModel):
    """One corrected mean (or mean difference) beside the judge's and the labels' own."""

    estimate: float | None  # prediction-powered; None: too few labels
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
    effective_labels: float | None  # labels the estimate is worth: n * var(labels alone) / var(estimate)
    judge_weight: float | None  # lam, the judge's tuned weight in [0, 1]
    weighted: bool  # labels drawn with unequal probabilities, weighted by their inverse
    confidence: float
    why_no_interval: str = ""

    @property
    def p_value(self) -> float:
        """Two-sided t-test of zero (for a difference): the test whose inversion is [low, high]."""
        if self.estimate is None or not self.standard_error or self.degrees_of_freedom is None:
            return 1.0
        return float(2 * t_dist.sf(abs(self.estimate) / self.standard_error, self.degrees_of_freedom))

    def interval_at(self, level: float) -> tuple[float, float]:
        """The interval at significance `level` (1 - confidence): estimate -/+ t * standard error."""
        if self.estimate is None or self.standard_error is None or self.degrees_of_freedom is None:
            raise ValueError("no estimate: too few labels")
        half = _half_width(self.standard_error, self.degrees_of_freedom, level)
        return self.estimate - half, self.estimate + half

    def text(self) -> str:
        """`0.42 [0.30, 0.54] (labels 40, worth 71)`, or why there is none."""
        if self.estimate is None:
            return self.why_no_interval
        worth = f", worth {self.effective_labels:.0f}" if self.effective_labels is not None else ""
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}] (labels {self.labels}{worth})"


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
) -> Estimate:
    """The corrected mean of N answers' judge scores `judge`, given the person's `labels` (NaN where an
    answer was not labelled), drawn uniformly (`probabilities` None) or with the given inclusion
    probabilities (one per answer, every labelled one > 0).

    The interval is the small-sample one of a regression estimator, which PPI++ with a tuned lam is, rather
    than ppi_py's large-sample normal interval (at 20 labels that covered 92.6-94.4 % in bench/bench_ppi.py):
    the correction's variance unbiased (n - 1), the tuned lam's own variance added, and Student's t with
    n - 2 degrees of freedom (a mean and lam are fitted to the n labels). The labels alone are the plain t
    interval (n - 1). Both are cut to `bounds`, the range the values can take (a mean of 0-1 scores is
    never above 1: cutting there changes no coverage and no verdict about zero). Labelled values that do
    not vary at all give no interval (a point would read as certainty)."""
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
    if weighted:
        p = np.asarray(probabilities, dtype=float)
        if p.shape != f.shape or np.any(p[labelled] <= 0) or np.any(p > 1):
            raise ValueError("inclusion probabilities: one per answer, in (0, 1] for every labelled one")
        tuned, alone = ppi_weighted(f, y, labelled, p, None), ppi_weighted(f, y, labelled, p, 0.0)
    elif n == big_n:  # a census: the labels are the answer, the judge adds nothing
        tuned = alone = fit(y, f, np.ones(n), f, f, 0.0, target_holds_labelled=True)
    else:
        tuned = ppi_uniform(y[labelled], f[labelled], f[~labelled])
        alone = ppi_uniform(y[labelled], f[labelled], f[~labelled], 0.0)
    error, freedom = _small_sample_error(tuned, n)
    alone_error, alone_freedom = _small_sample_error(alone, n)
    if error == 0 or alone_error == 0:
        return _no_interval(
            y,
            labelled,
            weighted,
            f"the {n} labelled value(s) do not vary: no interval can be estimated",
            common,
        )
    low, high = _interval(tuned.estimate, error, freedom, confidence, bounds)
    labels_low, labels_high = _interval(alone.estimate, alone_error, alone_freedom, confidence, bounds)
    return Estimate(
        estimate=tuned.estimate,
        low=low,
        high=high,
        standard_error=error,
        degrees_of_freedom=freedom,
        labels_mean=alone.estimate,
        labels_low=labels_low,
        labels_high=labels_high,
        effective_labels=n * (alone_error / error) ** 2,
        judge_weight=tuned.lam,
        weighted=weighted,
        **common,
    )


def _half_width(error: float, freedom: int, level: float) -> float:
    """Half the two-sided t interval at significance `level`: the one quantile every interval here uses."""
    return float(t_dist.isf(level / 2, freedom)) * error


def _interval(
    estimate: float, error: float, freedom: int, confidence: float, bounds: tuple[float, float] | None
) -> tuple[float, float]:
    half = _half_width(error, freedom, 1 - confidence)
    low, high = estimate - half, estimate + half
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
    (a planning figure, not a promise). None without an interval."""
    if estimate.standard_error is None or estimate.degrees_of_freedom is None or width <= 0:
        return None
    current = 2 * _half_width(estimate.standard_error, estimate.degrees_of_freedom, 1 - estimate.confidence)
    return max(estimate.labels, math.ceil(estimate.labels * (current / width) ** 2))


def judge_ceiling(judge_labelled: Sequence[float], labels: Sequence[float]) -> float | None:
    """The most labels a judge's verdict can be worth per label with many unlabelled answers: 1/(1 - rho^2)
    for the correlation rho between its scores and the person's on the labelled answers (PPI++'s variance
    is var(y) (1 - rho^2)/n at best). None when either side does not vary."""
    f, y = np.asarray(judge_labelled, dtype=float), np.asarray(labels, dtype=float)
    if f.size < 2 or f.std() == 0 or y.std() == 0:
        return None
    rho = float(np.corrcoef(f, y)[0, 1])
    return 1.0 / max(1e-9, 1.0 - rho * rho)
