"""The interval of a mean, chosen by what the metric's scale guarantees (docs/concepts/uncertainty.md):
exact for a 0/1 rate, betting for a mean on a known scale, a bootstrap only for a metric without bounds,
none under a handful of cases. Every cell's interval in the table, the report and the case-type
breakdown is one of these. NaN values are cases a cell did not score and are dropped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

CONFIDENCE = 0.95

# Fewer cases than this get no interval of their mean: on two cases a guaranteed interval spans nearly the
# whole scale, and an unbounded metric's spread cannot be estimated; the cell says so instead
MIN_CASES = 3

# How a mean's interval was made (docs/concepts/uncertainty.md#intervals): `exact` Clopper-Pearson for a
# 0/1 rate, `betting` for a mean on a known scale (ragbench.stats.betting), `bootstrap` (BCa) for a metric
# without known bounds (latency, tokens, cost), `too_few` under MIN_CASES cases (no interval), `stratified`
# for a stratified sample's weighted mean, from its strata's intervals (ragbench.stats.strata)
IntervalMethod = Literal["exact", "betting", "bootstrap", "too_few", "stratified"]


class Interval(BaseModel):
    mean: float
    low: float | None  # None: too few cases for an interval (`method` too_few)
    high: float | None
    n: int
    method: IntervalMethod = "bootstrap"

    @property
    def too_few(self) -> bool:
        return self.low is None or self.high is None


def too_few_text(n: int) -> str:
    """What a cell shows instead of an interval under MIN_CASES cases."""
    return f"n={n}: too few for an interval"


def mean_interval(
    values: Sequence[float],
    *,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
    binary: bool = False,
) -> Interval | None:
    """Interval of the mean of `values` (None without values), by the metric's scale:

    - `binary` (every value 0 or 1, a rate): Clopper-Pearson's exact interval, which never covers less
      than `confidence` at any rate and any n (Wilson's undercovers near 0 and 1 at a handful of cases);
    - `bounds` (the lowest and highest value a case can have): the betting interval
      (ragbench.stats.betting), guaranteed at every n, never of width zero;
    - neither (latency, tokens, cost): a BCa bootstrap, percentile where BCa is undefined; only an
      approximation, and of width zero when the values do not vary (nothing bounds such a metric).

    Under MIN_CASES values: no interval (`too_few`)."""
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if data.size == 0:
        return None
    mean, n = float(data.mean()), int(data.size)
    if n < MIN_CASES:
        return Interval(mean=mean, low=None, high=None, n=n, method="too_few")
    if binary:
        if not np.isin(data, (0.0, 1.0)).all():
            raise ValueError("a binary metric's values must be 0 or 1")
        from scipy.stats import binomtest

        exact = binomtest(int(data.sum()), n).proportion_ci(confidence_level=confidence, method="exact")
        return Interval(mean=mean, low=float(exact.low), high=float(exact.high), n=n, method="exact")
    if bounds is not None:
        from ragbench.stats.betting import BettingTest

        low, high = BettingTest(data, *bounds, confidence=confidence, seed=seed).interval(1 - confidence)
        return Interval(mean=mean, low=low, high=high, n=n, method="betting")
    low, high = bootstrap_interval(data, resamples=resamples, seed=seed, confidence=confidence)
    return Interval(mean=mean, low=low, high=high, n=n, method="bootstrap")


def bootstrap_interval(
    data: np.ndarray, *, resamples: int = 2000, seed: int = 0, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """BCa bootstrap interval of the mean (percentile where BCa is undefined: degenerate resamples), cut to
    the observed range and holding the mean; the mean itself when the values do not vary. Every interval
    was this before bounds were known; it stays for metrics without bounds."""
    mean = float(data.mean())
    if data.size == 1 or np.all(data == data[0]):
        return mean, mean
    from scipy import stats

    low = high = math.nan
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            # degenerate resamples make BCa divide by zero and warn; the fallback below handles them
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.bootstrap(
                (data,),
                np.mean,
                n_resamples=resamples,
                confidence_level=confidence,
                method=method,
                vectorized=True,
                rng=np.random.default_rng(seed),
            )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            break
    low, high = max(low, float(data.min())), min(high, float(data.max()))
    return min(low, mean), max(high, mean)
