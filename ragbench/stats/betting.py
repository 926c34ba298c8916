"""Confidence intervals for the mean of values on a known bounded scale, by betting (Waudby-Smith and
Ramdas, "Estimating means of bounded random variables by betting", JRSS B 2023): valid at every sample
size, without assuming normality, symmetry or a variance, and never of width zero.

Why this method: a judge's scores, a retrieval metric and a paired difference of either are bounded, so
their mean's interval can be guaranteed rather than approximated. The bootstrap and the t-interval are
approximations that fail exactly where this project runs most (3 to 10 cases, skewed scores, samples with
no spread, where both give a zero-width interval). Hoeffding's and the empirical Bernstein bounds are also
guaranteed but about twice as wide at 20-40 cases; the betting interval adapts to the observed spread and
is within a few percent of the t-interval's width there (docs/measured.md).

How: for each candidate mean m, a gambler who bets that the mean is above m (and one who bets below)
starts with 1 and multiplies their wealth by 1 + lambda_i (x_i - m) case by case; under the true mean the
wealth is a nonnegative martingale, so by Ville's inequality it reaches 1/alpha with probability at most
alpha. The interval is every m neither gambler's hedged wealth reached 1/alpha on, and 1 / (the largest
wealth) is a valid p-value of "the mean is m", so a test and its interval are one decision. Bets are the
paper's predictable plug-in, tuned for a fixed number of cases (its section 5.1), truncated at
c / m and c / (1 - m), hedged half and half (theta = 1/2).

The wealth depends on the order the cases are taken in; they are taken in a seeded random order, so an
interval is a deterministic function of the values, the seed and nothing else.
"""

from __future__ import annotations

import math

import numpy as np

# candidate means on [0, 1] the wealth is computed at: an interval's ends are exact to 1 / GRID, rounded
# outward (a rejected neighbour of the last accepted candidate is the end)
GRID = 2000
# the largest share of wealth a bet may risk (the paper's c: 1/2 or 3/4)
TRUNCATION = 0.75


class BettingTest:
    """The betting test of "the mean is m" for values on [low, high], at every m at once, and the interval
    made by inverting it. `values` without NaN, at least one."""

    def __init__(self, values: np.ndarray, low: float, high: float, *, confidence: float, seed: int) -> None:
        data = np.asarray(values, dtype=float)
        if data.ndim != 1 or data.size == 0:
            raise ValueError("a betting interval needs a non-empty list of values")
        if not high > low:
            raise ValueError(f"the scale's high end must exceed its low end, got [{low}, {high}]")
        if data.min() < low - 1e-12 or data.max() > high + 1e-12:
            raise ValueError(f"values must lie on [{low}, {high}], got {data.min()} to {data.max()}")
        self.low, self.high = low, high
        self.n = int(data.size)
        self.mean = float(data.mean())
        scaled = np.clip((data - low) / (high - low), 0.0, 1.0)
        scaled = scaled[np.random.default_rng(seed).permutation(self.n)]
        self._candidates = np.linspace(0.0, 1.0, GRID + 1)
        self._wealth = _largest_wealth(scaled, self._candidates, alpha=1 - confidence)

    def p_value(self, shift: float = 0.0) -> float:
        """p-value of "the mean is `shift`" (in the values' units): 1 / the largest hedged wealth, capped at
        1, read at the nearest candidate mean."""
        position = (shift - self.low) / (self.high - self.low)
        if not 0.0 <= position <= 1.0:
            return 0.0  # a mean off the scale is impossible
        index = round(position * GRID)
        return float(min(1.0, 1.0 / self._wealth[index]))

    def interval(self, level: float) -> tuple[float, float]:
        """Every mean the test does not reject at `level` (the interval at confidence 1 - level), in the
        values' units, widened outward to the next rejected candidate and always holding the mean. Where 0
        lies on the scale (a difference's) and is rejected, the interval excludes it: it then excludes 0
        exactly when p(0) < level, so a verdict read off it and the test are one decision."""
        values = self.low + (self.high - self.low) * self._candidates
        accepted = self._wealth < 1.0 / level
        zero_rejected = self.low < 0.0 < self.high and self.p_value(0.0) < level
        if zero_rejected:  # keep the mean's side of zero (the accepted means are one interval there)
            accepted &= values > 0 if self.mean > 0 else values < 0
        kept = np.flatnonzero(accepted)
        if kept.size == 0:  # every candidate rejected (none seen): the candidates either side of the mean
            kept = np.asarray([int((self.mean - self.low) / (self.high - self.low) * GRID)] * 2)
        first, last = max(int(kept[0]) - 1, 0), min(int(kept[-1]) + 1, GRID)
        if zero_rejected:  # widened, but never onto zero
            first, last = (first + (values[first] <= 0 < self.mean), last - (values[last] >= 0 > self.mean))
        return min(float(values[first]), self.mean), max(float(values[last]), self.mean)


def _largest_wealth(x: np.ndarray, m: np.ndarray, *, alpha: float) -> np.ndarray:
    """For each candidate mean in `m`: the largest hedged wealth max(K+/2, K-/2) reached over the cases
    `x` (on [0, 1], in betting order). Taking the largest over time stays valid (Ville's inequality bounds
    the supremum) and is the paper's running intersection."""
    n = x.size
    t = np.arange(1, n + 1, dtype=float)
    running_mean = (0.5 + np.cumsum(x)) / (t + 1)
    running_variance = (0.25 + np.cumsum((x - running_mean) ** 2)) / (t + 1)
    previous_variance = np.concatenate([[0.25], running_variance[:-1]])  # predictable: before case i
    bet = np.sqrt(2 * math.log(2 / alpha) / (n * previous_variance))  # (n,)
    with np.errstate(divide="ignore"):
        up_cap = np.where(m > 0, TRUNCATION / m, np.inf)
        down_cap = np.where(m < 1, TRUNCATION / (1 - m), np.inf)
    up_bet = np.minimum(bet[None, :], up_cap[:, None])  # (candidates, n)
    down_bet = np.minimum(bet[None, :], down_cap[:, None])
    step = x[None, :] - m[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.cumsum(np.log1p(up_bet * step), axis=1)
        down = np.cumsum(np.log1p(-down_bet * step), axis=1)
    hedged = np.maximum(up, down) + math.log(0.5)
    return np.exp(np.max(np.nan_to_num(hedged, nan=-np.inf, neginf=-np.inf), axis=1))
