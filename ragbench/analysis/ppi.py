"""Prediction-powered estimates: a judged metric corrected by a person's labels of a random sample of its
answers, with an interval that is valid whatever the judge's quality and narrower the better the judge.

The judge scores all N answers; a person labels n of them, drawn with known inclusion probabilities. The
estimate is the judge's mean corrected by the judge's average error on the labelled sample, with the
judge's weight `lam` tuned to the data (PPI++: Angelopoulos, Duchi and Zrnic, 2023): lam = 0 is the labels
alone, lam = 1 plain PPI, and the tuned weight is never much worse than the labels alone.

- A uniform sample (a simple random sample of the answers) uses PPI++ exactly as the reference code
  (`ppi_py.ppi_mean_ci` with power tuning) computes it: the labelled answers against the judge's scores of
  the unlabelled ones; tests/test_ppi_conformance.py checks it to 1e-6.
- A weighted sample (answers where the judge is least sure drawn more often, `ragbench.review.sampling`)
  weights every label by its inverse inclusion probability (active inference: Zrnic and Candès, 2024):
  z_i = g_i + (y_i - g_i) * xi_i / pi_i over all N answers for the prediction g_i = a + lam * f_i, the
  estimate their mean and its standard error their spread over sqrt(N); a and lam minimise that spread.
  Unbiased for any fixed a and lam, whatever the probabilities; the labels alone are lam = 0.

A difference between two cells on the same cases is the same estimate applied to the per-case differences
of their judge scores and of their labels (a case's answers are labelled together).

All values are on the metric's own scale (0-1 for normalised judge scores); intervals are t intervals
around the estimate, so the p-value of a difference and the interval beside it are one t-test, inverted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
        half = float(t_dist.isf(level / 2, self.degrees_of_freedom)) * self.standard_error
        return self.estimate - half, self.estimate + half

    def text(self) -> str:
        """`0.42 [0.30, 0.54] (labels 40, worth 71)`, or why there is none."""
        if self.estimate is None:
            return self.why_no_interval
        worth = f", worth {self.effective_labels:.0f}" if self.effective_labels is not None else ""
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}] (labels {self.labels}{worth})"


def ppi_uniform(
    labels: np.ndarray, judge_labelled: np.ndarray, judge_unlabelled: np.ndarray, lam: float | None = None
) -> tuple[float, float, float]:
    """(estimate, standard error, lam) of PPI++ on a simple random sample, as `ppi_py.ppi_mean_ci` computes
    them: lam = cov(Y, Yhat) / ((1 + n/N) var(Yhat over all)), clipped to [0, 1]; standard deviations with
    ddof 0, the covariance biased, the judge's variance over labelled and unlabelled answers unbiased."""
    n, big_n = labels.size, judge_unlabelled.size
    if lam is None:
        centred = (labels - labels.mean()) * (judge_labelled - judge_labelled.mean())
        covariance = float(centred.mean())
        variance = float(np.var(np.concatenate([judge_labelled, judge_unlabelled]), ddof=1))
        lam = 0.0 if variance == 0 else float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))
    estimate = float(lam * judge_unlabelled.mean() + (labels - lam * judge_labelled).mean())
    imputed = float((lam * judge_unlabelled).std()) / math.sqrt(big_n)
    rectifier = float((labels - lam * judge_labelled).std()) / math.sqrt(n)
    return estimate, math.hypot(imputed, rectifier), lam


def ppi_weighted(
    judge: np.ndarray, labels: np.ndarray, labelled: np.ndarray, probabilities: np.ndarray, lam: float | None
) -> tuple[float, float, float]:
    """(estimate, standard error, lam) of the inverse-probability-weighted estimator over all N answers
    (`labels` read only where `labelled`): z_i = g_i + (y_i - g_i) xi_i / pi_i for the prediction
    g_i = a + lam * f_i, unbiased for any fixed a and lam. Both are tuned to minimise the spread of the z_i
    (lam clipped to [0, 1], or held at the given value; lam = 0 is the labels alone), so the estimate does
    not depend on where the scale's zero lies, as a plain Horvitz-Thompson sum would."""
    inverse = np.where(labelled, 1.0 / probabilities, 0.0)
    observed = np.where(labelled, labels, 0.0) * inverse  # y xi / pi
    rest = 1.0 - inverse  # what the prediction is weighted by: g (1 - xi / pi)
    scaled = judge * rest
    if lam is None:
        design = np.column_stack([rest - rest.mean(), scaled - scaled.mean()])
        coefficients = np.linalg.lstsq(design, -(observed - observed.mean()), rcond=None)[0]
        lam = float(np.clip(coefficients[1], 0.0, 1.0))
    target = observed + lam * scaled
    spread = float(np.var(rest))
    intercept = 0.0 if spread == 0 else -float(np.cov(target, rest, ddof=0)[0, 1]) / spread
    terms = target + intercept * rest
    return float(terms.mean()), float(terms.std()) / math.sqrt(judge.size), lam


def ppi_mean(
    judge: Sequence[float],
    labels: Sequence[float],
    probabilities: Sequence[float] | None = None,
    *,
    confidence: float = 0.95,
    min_labels: int = MIN_LABELS,
) -> Estimate:
    """The corrected mean of N answers' judge scores `judge`, given the person's `labels` (NaN where an
    answer was not labelled), drawn uniformly (`probabilities` None) or with the given inclusion
    probabilities (one per answer, every labelled one > 0).

    Intervals use Student's t with n - 1 degrees of freedom rather than the normal quantile ppi_py uses:
    with 20-40 labels the normal interval covered 91-92 % in bench/bench_ppi.py, t about 93-94 %. A
    weighted sample fits an intercept, lam and the mean on the same n labels, and its plain standard
    error ran 4-7 % short of the estimate's real spread: it is widened by sqrt(n / (n - 3)), with n - 3
    degrees of freedom. Labelled values that do not vary at all give no interval (a point would read as
    certainty)."""
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
    fewest = max(4 if weighted else 2, min_labels)
    if n < fewest:
        return _no_interval(
            y, labelled, weighted, f"{n} label(s): at least {fewest} are needed for an interval", common
        )
    if weighted:
        p = np.asarray(probabilities, dtype=float)
        if p.shape != f.shape or np.any(p[labelled] <= 0) or np.any(p > 1):
            raise ValueError("inclusion probabilities: one per answer, in (0, 1] for every labelled one")
        estimate, error, lam = ppi_weighted(f, y, labelled, p, None)
        alone, alone_error, _ = ppi_weighted(f, y, labelled, p, 0.0)
        inflate, freedom = math.sqrt(n / (n - 3)), n - 3
        error, alone_error = error * inflate, alone_error * inflate
    elif n == big_n:  # a census: the labels are the answer, the judge adds nothing
        alone = estimate = float(y.mean())
        alone_error = error = float(y.std()) / math.sqrt(n)
        lam, freedom = 0.0, n - 1
    else:
        estimate, error, lam = ppi_uniform(y[labelled], f[labelled], f[~labelled])
        alone, alone_error = float(y[labelled].mean()), float(y[labelled].std()) / math.sqrt(n)
        freedom = n - 1
    if error == 0 or alone_error == 0:
        return _no_interval(
            y,
            labelled,
            weighted,
            f"the {n} labelled value(s) do not vary: no interval can be estimated",
            common,
        )
    half = float(t_dist.isf((1 - confidence) / 2, freedom))
    return Estimate(
        estimate=estimate,
        low=estimate - half * error,
        high=estimate + half * error,
        standard_error=error,
        degrees_of_freedom=freedom,
        labels_mean=alone,
        labels_low=alone - half * alone_error,
        labels_high=alone + half * alone_error,
        effective_labels=n * (alone_error / error) ** 2,
        judge_weight=lam,
        weighted=weighted,
        **common,
    )


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
    """Labels in all that would bring the interval's full width under `width`, if the judge keeps agreeing
    with the person as it has so far: the width shrinks as 1/sqrt(n) (a planning figure, not a promise).
    None without an interval."""
    if estimate.low is None or estimate.high is None or width <= 0:
        return None
    current = estimate.high - estimate.low
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
