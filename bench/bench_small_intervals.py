"""Do the intervals ragbench prints hold at a handful of cases: 95% intervals that cover the true mean at
least 93% of the time at n = 3, 5, 10, 20 and 40, on samples that do not vary too, and how wide are they?

A simulation of the intervals a results table prints (`ragbench.stats.intervals.mean_interval`) and of the
interval beside a comparison with the best cell (`ragbench.stats.inference.compare_to_best`), old against
new, many replications per setting (default 2,000; the old bootstrap's 500, it is slow):
- bounded scores: 1-5 judge scores mapped to 0-1 as (score - 1) / 4, from point masses (every case a 2, or
  a 5), two-point distributions (1 or 5, 4 or 5) and skewed ones (piled low, piled high, a rare 1 among
  5s), and the uniform; old: the BCa bootstrap cut to the observed range (the mean itself when the values
  do not vary), new: the betting interval on the known scale [0, 1];
- rates (0/1 values, p = 0.02 to 0.98): old: BCa as above; new: Clopper-Pearson's exact interval; Wilson's
  score interval beside them (`ref`), to show why exact was chosen; for scores and differences `ref` is
  Student's t-interval, the textbook width a guaranteed interval is compared with;
- paired differences of two cells' 1-5 scores on the same cases (candidate - reference, on [-1, 1]):
  a constant one-step gain, rare large gains or losses among ties, a hit rate's -1/0/+1, a symmetric wide
  one; old: the sign-flip permutation test inverted, its end where it rejects nothing the range of the
  values compared; new: the betting test on the scale of a difference, [-1, 1].
The truth an interval must cover is the distribution's expected value. A point mass gives the same sample
every time, so its coverage is 0% or 100%.

Target (PASS/FAIL; exit 1 if any fails; `--smoke` checks none): every new interval covers >= 93% in every
setting where one is printed (n >= 3: `MIN_CASES`).

    PYTHONPATH=. python bench/bench_small_intervals.py [--replications 2000] [--old-replications 500]
        [--seed 0] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragbench.report.pages import rows_to_text
from ragbench.stats.betting import BettingTest
from ragbench.stats.inference import wilson_interval
from ragbench.stats.intervals import MIN_CASES, bootstrap_interval, mean_interval
from ragbench.stats.permutation import SignFlipTest

SIZES = (3, 5, 10, 20, 40)
TARGET = 0.93
CONFIDENCE = 0.95
SCORES = np.array([1, 2, 3, 4, 5], dtype=float)


@dataclass(frozen=True)
class Setting:
    """One distribution of per-case values (`draw`: rng, n -> the sample; for a paired one the two
    cells' values), its true mean and the kind of metric it stands for."""

    kind: str  # score, rate or difference
    name: str
    truth: float
    draw: Callable[[np.random.Generator, int], np.ndarray]


def score_setting(name: str, probabilities: list[float]) -> Setting:
    """1-5 scores drawn with `probabilities`, mapped to 0-1."""
    p = np.asarray(probabilities) / sum(probabilities)
    values = (SCORES - 1) / 4
    return Setting("score", name, float(p @ values), lambda rng, n: rng.choice(values, size=n, p=p))


def rate_setting(p: float) -> Setting:
    return Setting("rate", f"p={p:g}", p, lambda rng, n: (rng.random(n) < p).astype(float))


def pair_setting(
    name: str, pairs: list[tuple[tuple[int, int], float]], low: int = 1, high: int = 5
) -> Setting:
    """Pairs (reference, candidate) of scores on low..high drawn with their probabilities, mapped to 0-1:
    the sample is an n x 2 array, the difference candidate - reference."""
    options = np.asarray([pair for pair, _ in pairs], dtype=float)
    p = np.asarray([probability for _, probability in pairs])
    p = p / p.sum()
    mapped = (options - low) / (high - low)
    truth = float(p @ (mapped[:, 1] - mapped[:, 0]))
    return Setting("difference", name, truth, lambda rng, n: mapped[rng.choice(len(p), size=n, p=p)])


SETTINGS = [
    score_setting("every case 2", [0, 1, 0, 0, 0]),
    score_setting("every case 5", [0, 0, 0, 0, 1]),
    score_setting("1 or 5 (10/90)", [0.1, 0, 0, 0, 0.9]),
    score_setting("4 or 5 (80/20)", [0, 0, 0, 0.8, 0.2]),
    score_setting("rare 1 among 5s (3/97)", [0.03, 0, 0, 0, 0.97]),
    score_setting("piled low", [0.6, 0.2, 0.1, 0.05, 0.05]),
    score_setting("piled high", [0.02, 0.03, 0.05, 0.2, 0.7]),
    score_setting("uniform", [1, 1, 1, 1, 1]),
    *(rate_setting(p) for p in (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)),
    pair_setting("always one step better", [((3, 4), 0.5), ((4, 5), 0.5)]),
    pair_setting("tie, or one step better (90/10)", [((4, 4), 0.9), ((4, 5), 0.1)]),
    pair_setting("tie, rarely four steps (95/5)", [((5, 5), 0.95), ((1, 5), 0.05)]),
    pair_setting("tie, rarely 3 worse (90/10)", [((4, 4), 0.9), ((4, 1), 0.1)]),
    pair_setting("-1/0/+1 step (10/70/20)", [((3, 2), 0.1), ((3, 3), 0.7), ((3, 4), 0.2)]),
    pair_setting(
        "hit rate -1/0/+1 (5/80/15)", [((1, 0), 0.05), ((1, 1), 0.4), ((0, 0), 0.4), ((0, 1), 0.15)], 0, 1
    ),
    pair_setting("wide, symmetric", [((3, s), 0.2) for s in (1, 2, 3, 4, 5)]),
]


def new_interval(setting: Setting, sample: np.ndarray, seed: int) -> tuple[float, float]:
    """What ragbench prints now: the metric's interval by its scale, or the betting test's inverted."""
    if setting.kind == "difference":
        differences = sample[:, 1] - sample[:, 0]
        return BettingTest(differences, -1.0, 1.0, confidence=CONFIDENCE, seed=seed).interval(1 - CONFIDENCE)
    binary = setting.kind == "rate"
    interval = mean_interval(sample, seed=seed, bounds=(0.0, 1.0), binary=binary)
    assert interval is not None and interval.low is not None and interval.high is not None
    return interval.low, interval.high


def old_interval(setting: Setting, sample: np.ndarray, seed: int) -> tuple[float, float]:
    """What ragbench printed before: BCa cut to the observed range; the sign-flip test inverted, bounded
    by the range of the values compared."""
    if setting.kind == "difference":
        differences = sample[:, 1] - sample[:, 0]
        if not differences.any():  # compare_to_best: identical cells, [0, 0] without a test
            return 0.0, 0.0
        test = SignFlipTest(differences, seed=seed, resamples=2000)
        return test.interval(1 - CONFIDENCE, float(sample.max() - sample.min()))
    return bootstrap_interval(sample, seed=seed)


def t_interval(setting: Setting, sample: np.ndarray, seed: int) -> tuple[float, float]:
    """Student's t-interval, the textbook reference for width (of width zero without spread)."""
    values = sample[:, 1] - sample[:, 0] if setting.kind == "difference" else sample
    spread = float(values.std(ddof=1)) / np.sqrt(values.size)
    half = float(scipy.stats.t.ppf((1 + CONFIDENCE) / 2, values.size - 1)) * spread
    return float(values.mean()) - half, float(values.mean()) + half


def wilson(setting: Setting, sample: np.ndarray, seed: int) -> tuple[float, float]:
    found = wilson_interval(int(sample.sum()), sample.size, CONFIDENCE)
    assert found is not None
    return found


def measure(setting: Setting, n: int, method: Callable, replications: int, seed: int) -> tuple[float, float]:
    """(coverage, mean width) of `method`'s intervals over `replications` samples of n."""
    rng = np.random.default_rng([seed, n, SETTINGS.index(setting)])
    covered, widths = 0, []
    for replication in range(replications):
        low, high = method(setting, setting.draw(rng, n), replication)
        covered += low - 1e-12 <= setting.truth <= high + 1e-12
        widths.append(high - low)
    return covered / replications, float(np.mean(widths))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--old-replications", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="few replications, no targets checked")
    args = parser.parse_args()
    replications, old_replications = (30, 10) if args.smoke else (args.replications, args.old_replications)
    assert min(SIZES) >= MIN_CASES
    started = time.perf_counter()
    rows, failures = [], []
    for setting in SETTINGS:
        for n in SIZES:
            new_coverage, new_width = measure(setting, n, new_interval, replications, args.seed)
            old_coverage, old_width = measure(setting, n, old_interval, old_replications, args.seed)
            row = {
                "kind": setting.kind,
                "setting": setting.name.replace(" ", "_"),
                "n": n,
                "truth": f"{setting.truth:.3f}",
                "new_cover": f"{new_coverage:.3f}",
                "new_width": f"{new_width:.3f}",
                "old_cover": f"{old_coverage:.3f}",
                "old_width": f"{old_width:.3f}",
            }
            reference = wilson if setting.kind == "rate" else t_interval
            coverage, width = measure(setting, n, reference, replications, args.seed)
            row["ref"] = "wilson" if setting.kind == "rate" else "t"
            row["ref_cover"], row["ref_width"] = f"{coverage:.3f}", f"{width:.3f}"
            rows.append(row)
            if new_coverage < TARGET:
                failures.append(f"{setting.kind} {setting.name} n={n}: coverage {new_coverage:.3f}")
    print(rows_to_text(rows))
    print()
    new = "score: betting on [0, 1]; rate: Clopper-Pearson exact; difference: betting on [-1, 1]"
    old = "BCa cut to the observed range; difference: sign-flip test inverted"
    print(f"new = {new}; old = {old}")
    seconds = time.perf_counter() - started
    print(f"{replications} replications per setting (old: {old_replications}), {seconds:.0f} s")
    lowest = min(float(row["new_cover"]) for row in rows)
    print(f"lowest new coverage {lowest:.3f} (target >= {TARGET})")
    if args.smoke:
        return 0
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else f"FAIL: {len(failures)} setting(s) under {TARGET}")
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
