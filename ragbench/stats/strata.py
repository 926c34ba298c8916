"""Means of a stratified sample: each stratum's mean weighted by its share of the population, so strata
sampled at different rates (a rare kind of traffic drawn more often) still estimate the whole's mean.

The interval keeps the guarantee each stratum's own interval has (exact, betting, bootstrap: whichever
the metric's scale gives, `ragbench.stats.intervals`): every stratum's interval is made at level
1 - alpha / H for H strata, so all hold at once with probability 1 - alpha at least (Bonferroni), and the
weighted sums of their ends bound the weighted mean. A stratum sampled whole is known exactly; one with
too few values for an interval spans its metric's whole range when the range is known, and leaves the
mean without an interval when it is not. Conservative by construction: it never claims more than each
stratum's own data says.

A label-corrected mean (`stratified_estimate`) is combined the same way from each stratum's own
prediction-powered estimate: within a stratum the traces are a uniform sample, so its labels correct its
judge's mean as on any run.

The gate's test of two nights (`stratified_p_value`) shuffles values between the nights within each
stratum and weighs each stratum's difference at the two nights' pooled shares, so a change in the mix of
traffic is not read as a change in the system.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from ragbench.stats.intervals import Interval
from ragbench.stats.ppi import Estimate

# The stratum of a case that carries none of the tags a sample is stratified by.
OTHER_STRATUM = "other"

V = TypeVar("V")


def by_stratum(by_case: Mapping[str, V], stratum_of: Mapping[str, str]) -> dict[str, list[V]]:
    """Each case's item (a value, or the case id itself) grouped by its stratum, a case without one in
    OTHER_STRATUM: what every stratified mean, corrected mean and test is computed from."""
    grouped: dict[str, list[V]] = {}
    for case, item in by_case.items():
        grouped.setdefault(stratum_of.get(case, OTHER_STRATUM), []).append(item)
    return grouped


# The interval of one stratum's values at a confidence level (a metric's own `mean_interval`).
IntervalAt = Callable[[Sequence[float], float], Interval | None]


def stratified_mean(
    values: Mapping[str, Sequence[float]],
    shares: Mapping[str, float],
    census: set[str],
    interval_at: IntervalAt,
    confidence: float,
    bounds: tuple[float, float] | None,
) -> Interval | None:
    """The weighted mean of the strata's `values` (stratum -> its sampled cases' values, NaN left out),
    each weighted by its `shares` of the population, with the interval the module describes. `census`: the
    strata sampled whole. Strata without a value are left out and the others' shares renormalised (the
    mean is then of the strata that have values). None when no stratum has a value."""
    kept = {name: [v for v in found if not math.isnan(v)] for name, found in values.items()}
    kept = {name: found for name, found in kept.items() if found and shares.get(name, 0) > 0}
    if not kept:
        return None
    total = sum(shares[name] for name in kept)
    weights = {name: shares[name] / total for name in kept}
    mean = sum(weights[name] * float(np.mean(found)) for name, found in kept.items())
    n = sum(len(found) for found in kept.values())
    uncertain = [name for name in kept if name not in census]
    level = 1 - (1 - confidence) / max(1, len(uncertain))
    low = high = 0.0
    for name, found in kept.items():
        part = float(np.mean(found))
        if name in census:
            part_low = part_high = part
        else:
            interval = interval_at(found, level)
            if interval is not None and not interval.too_few:
                part_low, part_high = float(interval.low), float(interval.high)  # type: ignore[arg-type]
            elif bounds is not None:
                part_low, part_high = bounds
            else:
                return Interval(mean=mean, low=None, high=None, n=n, method="too_few")
        low += weights[name] * part_low
        high += weights[name] * part_high
    return Interval(mean=mean, low=min(low, mean), high=max(high, mean), n=n, method="stratified")


def stratified_p_value(
    before: Mapping[str, Sequence[float]],
    now: Mapping[str, Sequence[float]],
    *,
    seed: int = 0,
    resamples: int = 2000,
) -> float:
    """The two-sided p-value of the change between two independent stratified samples (two nights), by a
    permutation test within strata: the statistic is the sum over the strata both nights have of the
    pooled share times (now's mean - before's mean), and each resample shuffles each stratum's values
    between the nights. NaN values are left out; 1 when no stratum has a value on both nights or nothing
    varies."""
    rng = np.random.default_rng(seed)
    strata = []
    for name in sorted(set(before) & set(now)):
        first = np.asarray([v for v in before[name] if not math.isnan(v)], dtype=float)
        second = np.asarray([v for v in now[name] if not math.isnan(v)], dtype=float)
        if first.size and second.size:
            strata.append((first, second))
    if not strata:
        return 1.0
    pooled = np.asarray([first.size + second.size for first, second in strata], dtype=float)
    shares = pooled / pooled.sum()
    if all(np.ptp(np.concatenate(pair)) == 0 for pair in strata):
        return 1.0
    observed = sum(
        w * (second.mean() - first.mean()) for w, (first, second) in zip(shares, strata, strict=True)
    )
    shuffled = np.zeros(resamples)
    for w, (first, second) in zip(shares, strata, strict=True):
        both = np.concatenate([second, first])
        order = np.argsort(rng.random((resamples, both.size)), axis=1)
        permuted = both[order]
        shuffled += w * (permuted[:, : second.size].mean(axis=1) - permuted[:, second.size :].mean(axis=1))
    extreme = int(np.sum(np.abs(shuffled) >= abs(observed) - 1e-12))
    return (extreme + 1) / (resamples + 1)


def stratified_estimate(
    parts: Mapping[str, Estimate],
    shares: Mapping[str, float],
    bounds: tuple[float, float] | None,
    confidence: float,
) -> Estimate:
    """A label-corrected mean of a stratified sample from each stratum's own (`parts`: stratum -> its
    `ppi_mean`, each made at level 1 - alpha / H for the run's `confidence` 1 - alpha), weighted by the
    strata's `shares` as `stratified_mean` weights a mean. A stratum whose labels are too few for an
    interval stands at the judge's mean with the metric's whole range as its interval; without a range the
    estimate has no value and says which stratum lacks labels. The labels alone's interval is combined the
    same way."""
    total = sum(shares.get(name, 0.0) for name in parts)
    weights = {name: shares.get(name, 0.0) / total for name in parts}
    lacking = [name for name, part in parts.items() if part.estimate is None]
    common = {
        "judge_mean": sum(weights[name] * part.judge_mean for name, part in parts.items()),
        "labels": sum(part.labels for part in parts.values()),
        "answers": sum(part.answers for part in parts.values()),
        "confidence": confidence,
        "weighted": True,
    }
    if lacking and bounds is None:
        why = "; ".join(f"stratum {name}: {parts[name].why_no_interval}" for name in lacking)
        return Estimate(
            estimate=None,
            low=None,
            high=None,
            standard_error=None,
            labels_mean=None,
            labels_low=None,
            labels_high=None,
            effective_labels=None,
            judge_weight=None,
            why_no_interval=why,
            **common,
        )

    def combined(point: str, low: str, high: str) -> tuple[float, float, float]:
        total_point = total_low = total_high = 0.0
        for name, part in parts.items():
            if part.estimate is None:
                assert bounds is not None
                value, part_low, part_high = part.judge_mean, *bounds
            else:
                value, part_low, part_high = getattr(part, point), getattr(part, low), getattr(part, high)
            total_point += weights[name] * value
            total_low += weights[name] * part_low
            total_high += weights[name] * part_high
        return total_point, min(total_low, total_point), max(total_high, total_point)

    estimate, low, high = combined("estimate", "low", "high")
    labels_mean, labels_low, labels_high = combined("labels_mean", "labels_low", "labels_high")
    errors = [part.standard_error for part in parts.values()]
    error = (
        None
        if any(e is None for e in errors)
        else math.sqrt(sum(weights[name] ** 2 * parts[name].standard_error ** 2 for name in parts))  # type: ignore[operator]
    )
    labels = common["labels"]
    return Estimate(
        estimate=estimate,
        low=low,
        high=high,
        standard_error=error,
        labels_mean=labels_mean,
        labels_low=labels_low,
        labels_high=labels_high,
        effective_labels=labels * ((labels_high - labels_low) / (high - low)) ** 2 if high > low else labels,
        judge_weight=None,  # each stratum tunes its own
        judge_used=any(part.judge_used for part in parts.values() if part.estimate is not None),
        **common,
    )
