"""The sign-flip permutation test of a mean paired difference, and the interval made by inverting it.

A verdict and the interval printed beside it must not contradict each other, so both come from this one
procedure: the interval at level a is every shift delta the test of (d - delta) does not reject at a,
{delta : p(delta) >= a}. It therefore excludes zero exactly when the test rejects zero, whatever the
number of cases, which a bootstrap interval beside a permutation p-value does not (5 of 50 cases one way:
the bootstrap excluded zero where the exact test gives p = 0.0625).

Flipping the signs of d - delta by one row s of a fixed sign matrix S gives the mean (s·d - delta s·1) / n,
so one matrix product, S @ [d, 1], serves the p-value at every shift: each p(delta) after it costs one
pass over the rows. The p-value is scipy.stats.permutation_test's to the last digit (a test checks):
the same sign patterns from the same seed, the observed statistic counted, the same float tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# sign-matrix entries held at once while the row sums are taken: 4 M (32 MB of float64), whatever
# `resamples` and the number of cases
_CHUNK = 1 << 22
# halvings of an interval end's bracket: past 2^-60 of its width the end sits on its p-value's step
_HALVINGS = 60
# an interval end within this share of the largest |difference| of a step of p(delta) is on the step
_SNAP = 1e-9
# scipy.stats.permutation_test counts null values within this relative distance of the observed one
# as equal to it (theoretically equal, numerically apart)
_TOLERANCE = 100 * np.finfo(float).eps


class SignFlipTest:
    """The two-sided sign-flip permutation test of the mean of paired differences (candidate - reference,
    without NaN), at every shift at once: p(delta) tests "the mean difference is delta".

    Sign patterns are enumerated exactly when there are no more than `resamples` of them (2^n for n
    differences; the smallest two-sided p-value is then 2 / 2^n); otherwise `resamples` random ones are
    drawn from `seed` and the observed statistic is counted with them, p = 2 (k + 1) / (resamples + 1),
    so p is never 0. The rows are fixed once, so p(delta) is a deterministic function of delta."""

    def __init__(self, differences: np.ndarray, *, seed: int, resamples: int) -> None:
        data = _differences([differences])[0]
        totals, exact = _sign_totals(data[:, None], seed=seed, resamples=resamples)
        self._set(data, totals[:, 0], totals[:, 1], exact)

    @classmethod
    def several(cls, differences: Sequence[np.ndarray], *, seed: int, resamples: int) -> list[SignFlipTest]:
        """One test per list of differences, each as it would be alone, the sign patterns drawn once for all
        lists of one length (they depend on nothing else but the seed and `resamples`): a metric's
        comparisons with its best cell, or a race's at one look, mostly share their cases, and drawing
        the patterns is most of a test's cost."""
        data = _differences(differences)
        tests = [cls.__new__(cls) for _ in data]
        for n in {d.size for d in data}:
            together = [i for i, d in enumerate(data) if d.size == n]
            totals, exact = _sign_totals(
                np.stack([data[i] for i in together], axis=1), seed=seed, resamples=resamples
            )
            for column, i in enumerate(together):
                tests[i]._set(data[i], totals[:, column], totals[:, -1], exact)
        return tests

    def _set(self, data: np.ndarray, sums: np.ndarray, signs: np.ndarray, exact: bool) -> None:
        """The test of `data` from each sign row's s·d (`sums`) and s·1 (`signs`)."""
        self.n = int(data.size)
        self.mean = float(data.mean())
        self.exact = exact
        self._adjustment = 0 if exact else 1  # the observed pattern, counted with random ones
        self._draws = sums.size
        self._sums, self._signs = sums, signs
        # the mean of the flipped differences of each row that flips any: where p(delta) steps
        flipped = signs < self.n
        self._steps = (float(data.sum()) - sums[flipped]) / (self.n - signs[flipped])
        self._scale = float(np.abs(data).max())

    def p_value(self, shift: float = 0.0) -> float:
        """Two-sided p-value of "the mean difference is `shift`": twice the smaller tail, capped at 1."""
        observed = self.mean - shift
        null = (self._sums - shift * self._signs) / self.n
        tolerance = abs(_TOLERANCE * observed)
        below = int(np.count_nonzero(null <= observed + tolerance))
        above = int(np.count_nonzero(null >= observed - tolerance))
        tail = (min(below, above) + self._adjustment) / (self._draws + self._adjustment)
        return min(1.0, 2.0 * tail)

    def interval(self, level: float, bound: float) -> tuple[float, float]:
        """The shifts the test does not reject at `level` (the interval at confidence 1 - level), found
        from the mean outward by bisection. Each tail of p(delta) counts the sign patterns whose flipped
        cases average at least (or at most) delta, so p only falls on either side of its peak at the mean
        (1 there when every pattern is enumerated: a pattern and its opposite straddle it): the accepted
        shifts are one interval, whose ends sit on such averages (`_steps`).

        It excludes 0 exactly when p(0) < level, by construction rather than by the bisection's precision:
        0 is tested first, and either starts the search (it is inside) or closes the bracket the end is
        searched in (it is outside). The mean itself is always inside (where p is at its peak), so a zero
        mean is a zero-containing interval. Where even the farthest shift is not rejected (too few
        differences for the test to reach `level`) the end is +-`bound`, the largest difference a mean
        can show, e.g. the range of the values compared."""
        outside_zero = self.mean != 0 and self.p_value(0.0) < level
        return (
            self._end(-1.0, level, bound, outside_zero),
            self._end(1.0, level, bound, outside_zero),
        )

    def _end(self, direction: float, level: float, bound: float, outside_zero: bool) -> float:
        """The end in `direction` (-1: low, +1: high): the farthest shift from the mean still accepted."""
        inside, outside = self.mean, direction * max(bound, abs(self.mean))
        if direction * self.mean < 0:  # zero lies on this side of the mean
            if outside_zero:  # rejected: the end lies strictly between the mean and zero
                outside = 0.0
            else:
                inside = 0.0
        if outside != 0.0 and self.p_value(outside) >= level:
            return outside
        for _ in range(_HALVINGS):
            middle = (inside + outside) / 2
            if middle in (inside, outside):
                break
            if self.p_value(middle) >= level:
                inside = middle
            else:
                outside = middle
        return self._on_step(inside, level, outside_zero)

    def _on_step(self, end: float, level: float, outside_zero: bool) -> float:
        """The step of p(delta) the bisection stopped next to, where it lies within a hair of `end` and is
        accepted itself, e.g. -2/11 rather than -0.18181818181818388 and 0 rather than 2.2e-15 (scipy's
        float tolerance widens each step by 100 machine epsilons of the observed mean); `end` otherwise.
        Never across zero, or onto it when zero was rejected."""
        if self._steps.size == 0:
            return end
        step = float(self._steps[np.argmin(np.abs(self._steps - end))])
        near = abs(step - end) <= _SNAP * self._scale
        same_side = step * end > 0 or (step == 0 and not outside_zero)
        return step + 0.0 if near and same_side and self.p_value(step) >= level else end


def _differences(lists: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each list of differences as a float array, refused unless one-dimensional and not empty."""
    data = [np.asarray(d, dtype=float) for d in lists]
    if bad := [d.shape for d in data if d.ndim != 1 or d.size == 0]:
        raise ValueError(f"a sign-flip test needs a non-empty list of differences, got shapes {bad}")
    return data


def _sign_totals(columns: np.ndarray, *, seed: int, resamples: int) -> tuple[np.ndarray, bool]:
    """S @ [columns, 1] for the sign matrix S of n = len(columns) differences (every one of the 2^n
    patterns when there are no more than `resamples`, else `resamples` drawn from `seed`), and whether
    the patterns are all of them."""
    n = columns.shape[0]
    columns = np.column_stack([columns, np.ones(n)])
    if 2.0**n <= resamples:
        patterns = np.arange(2**n)[:, None] >> np.arange(n) & 1
        return (1.0 - 2.0 * patterns) @ columns, True
    return _random_totals(columns, resamples, np.random.default_rng(seed)), False


def _random_totals(columns: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """S @ columns for `draws` random sign rows, in chunks so that S is never held whole. The signs are
    the ones scipy.stats.permutation_test draws with the same generator: it shuffles each pair (d, -d) with
    numpy's `permuted`, which takes one 32-bit draw per pair and keeps the order when its lowest bit is
    set; the same draws, in the same order, come from `integers` over the 32-bit range."""
    n = columns.shape[0]
    rows = max(1, _CHUNK // n)
    totals = np.empty((draws, columns.shape[1]))
    for start in range(0, draws, rows):
        count = min(rows, draws - start)
        bits = rng.integers(0, 2**32, size=(count, n), dtype=np.uint32)
        np.bitwise_and(bits, 1, out=bits)
        # s = 2 bit - 1, so s @ columns = 2 (bits @ columns) - the column sums: one float pass fewer
        totals[start : start + count] = 2.0 * (bits.astype(float) @ columns) - columns.sum(axis=0)
    return totals
