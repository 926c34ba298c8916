"""Confirmation on held-out cases: a search (staged or model-based) decides on a seeded part of the cases,
and its finalists are then compared on the rest, which no search decision saw. The best of many noisy
cells looks better than it is (the winner's curse): its mean on the cases that picked it is biased toward
"better", while its mean on cases that played no part in picking it is not. The headline verdict and the
winner's interval come from the held-out cases only, and the report shows how much the search flattered
the winner.

The held-out cases are the TAIL of the seeded order (`ragbench.generation.answers.case_order`, cut to
max_cases first), so the answer steps reach them with first/stop indices, like one more round of a race,
and a search rerun on a larger case set keeps the search's own cases a prefix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import holm, sign_flip_tests, smallest_attainable_p
from ragbench.stats.intervals import mean_interval

# The held-out comparisons are paired sign-flip tests; on n pairs the smallest two-sided p is 2 / 2^n,
# so below this many held-out cases no comparison could reach p <= 0.05 whatever the data, and
# "confirmed" would mean nothing.
CONFIRMATION_ALPHA = 0.05


def _fewest_pairs(alpha: float) -> int:
    """The fewest pairs on which the two-sided sign-flip test can reach p <= alpha."""
    n = 1
    while smallest_attainable_p(n) > alpha:
        n += 1
    return n


MIN_PAIRED_CASES = _fewest_pairs(CONFIRMATION_ALPHA)  # 6: 2 / 2^6 = 0.031 (5 pairs: 0.0625)
MIN_SEARCH_CASES = 2  # a search compares cells on at least two cases (a race's own floor)


class CaseSplit(BaseModel, frozen=True):
    """The seeded order cut in two: the search's cases (its head) and the held-out ones (its tail)."""

    search: list[str]  # case ids, head of the order
    held_out: list[str]  # case ids, tail of the order
    share: float


def held_out_count(cases: int, share: float) -> int:
    """How many of `cases` a share holds out: rounded down (the search keeps the odd case), with a hair of
    tolerance so that 0.3 of 20 is 6 whatever the float arithmetic gives."""
    return math.floor(cases * share + 1e-9)


def _cases_needed(share: float) -> int:
    """The fewest cases at which `share` holds out MIN_PAIRED_CASES and leaves the search its minimum."""
    n = MIN_PAIRED_CASES
    while held_out_count(n, share) < MIN_PAIRED_CASES or n - held_out_count(n, share) < MIN_SEARCH_CASES:
        n += 1
    return n


def holdout_error(cases: int, share: float) -> str | None:
    """Why `share` of `cases` cases cannot be split into a search part and a confirmation part, or None when
    it can: the check the preflight makes on a count, before any model loads, and `split_order` makes on
    the order itself."""
    if not 0.0 <= share < 1.0:
        return f"search.holdout must lie in [0, 1) (0: no confirmation), got {share}"
    held = held_out_count(cases, share)
    if cases - held < MIN_SEARCH_CASES:
        return (
            f"search.holdout {share} of {cases} case(s) leaves {cases - held} for the search, which needs at "
            f"least {MIN_SEARCH_CASES}; add cases or lower the share"
        )
    if share > 0 and held < MIN_PAIRED_CASES:
        return (
            f"search.holdout {share} of {cases} case(s) holds out {held}: a paired test on the held-out "
            f"cases needs at least {MIN_PAIRED_CASES} (on fewer, p <= {CONFIRMATION_ALPHA} is out of reach "
            f"whatever the data); use at least {_cases_needed(share)} cases at this share, a larger share, "
            "or search.holdout: 0 (no confirmation)"
        )
    return None


def split_order(order: Sequence[str], share: float) -> CaseSplit:
    """The search's cases and the held-out ones of a seeded case order: the held-out ones its tail. Raises
    ValueError (`holdout_error`'s text) when the split leaves too few cases on either side."""
    if error := holdout_error(len(order), share):
        raise ValueError(error)
    cut = len(order) - held_out_count(len(order), share)
    return CaseSplit(search=list(order[:cut]), held_out=list(order[cut:]), share=share)


class ConfirmedCell(BaseModel):
    """A finalist's mean on the held-out cases, with its interval on the metric's scale."""

    cell: str
    mean: float
    low: float
    high: float
    n: int


class FinalistComparison(BaseModel):
    """The winner against another finalist, paired on the held-out cases both scored: difference =
    mean(winner - other), its interval (the sign-flip test inverted) at the confirmation's confidence."""

    cell: str
    difference: float
    low: float
    high: float
    p_value: float
    p_holm: float  # Holm-adjusted over the comparisons with the other finalists
    n: int


class Confirmation(BaseModel):
    """What the held-out cases say of the search's winner and its finalists."""

    metric: str
    higher_is_better: bool
    winner: str
    finalists: list[str]
    search_estimate: dict[str, float]  # mean on the search cases (what the search saw)
    confirmed: dict[str, ConfirmedCell]  # on held-out cases only
    flattery: float  # search_estimate[winner] - confirmed[winner].mean, signed toward "better"
    comparisons: list[FinalistComparison]  # winner - each other finalist, paired, held-out cases only
    confidence: float

    def summary(self, names: Mapping[str, str] | None = None) -> str:
        """One line for the terminal and the report: the confirmed interval, the search's estimate, and
        the winner against the other finalists."""
        name = (names or {}).get
        winner = self.confirmed[self.winner]
        shown = interval_text(winner.low, winner.high)
        against = "; ".join(
            f"{c.difference:+.3g} {interval_text(c.low, c.high)} against {name(c.cell, c.cell)} "
            f"(p={c.p_value:.2g}, Holm {c.p_holm:.2g})"
            for c in self.comparisons
        )
        return (
            f"confirmed on {winner.n} held-out case(s): {name(self.winner, self.winner)} {self.metric} "
            f"{winner.mean:.3g} {shown} at {self.confidence:.0%}; the search estimated "
            f"{self.search_estimate[self.winner]:.3g} (flattered by {self.flattery:+.3g})"
            + (f"; {against}" if against else "")
            + "."
        )


def confirm(
    held_out_values: Mapping[str, Mapping[str, float]],
    search_means: Mapping[str, float],
    winner: str,
    *,
    metric: str,
    higher_is_better: bool,
    confidence: float,
    seed: int,
    resamples: int,
    bounds: tuple[float, float] | None = None,
    binary: bool = False,
) -> Confirmation:
    """The finalists (`held_out_values`' cells: cell -> held-out case id -> value, NaN: not scored)
    measured on the held-out cases. `winner` is the search's choice, not re-picked here: picking it again
    on the held-out cases would bring the winner's curse back into its interval. `bounds` and `binary`:
    the metric's scale, which the finalists' intervals are computed on (`ragbench.stats.intervals`)."""
    if winner not in held_out_values:
        raise ValueError(f"the winner {winner!r} is not among the finalists {sorted(held_out_values)}")
    if missing := [cell for cell in held_out_values if cell not in search_means]:
        raise ValueError(f"no search estimate for finalist(s) {missing}")
    confirmed = {}
    for cell, by_case in held_out_values.items():
        present = list(by_case.values())
        interval = mean_interval(
            present, resamples=resamples, seed=seed, confidence=confidence, bounds=bounds, binary=binary
        )
        if interval is None:
            raise ValueError(f"finalist {cell!r} scored none of the held-out cases")
        confirmed[cell] = ConfirmedCell(
            cell=cell, mean=interval.mean, low=interval.low, high=interval.high, n=interval.n
        )
    others = [cell for cell in held_out_values if cell != winner]
    best = held_out_values[winner]
    pairs = []
    for cell in others:
        shared = [case for case in best if case in held_out_values[cell]]
        pairs.append(([held_out_values[cell][case] for case in shared], [best[case] for case in shared]))
    tests = sign_flip_tests(pairs, seed=seed, resamples=resamples)
    p_values = [test.p_value() if test is not None else 1.0 for test, _ in tests]
    comparisons = []
    for cell, (test, bound), p_value, p_holm in zip(others, tests, p_values, holm(p_values), strict=True):
        if test is None:
            difference, low, high, n = 0.0, 0.0, 0.0, 0
        else:
            difference, n = test.mean, test.n
            low, high = test.interval(1 - confidence, bound)
        comparisons.append(
            FinalistComparison(
                cell=cell, difference=difference, low=low, high=high, p_value=p_value, p_holm=p_holm, n=n
            )
        )
    sign = 1.0 if higher_is_better else -1.0
    return Confirmation(
        metric=metric,
        higher_is_better=higher_is_better,
        winner=winner,
        finalists=list(held_out_values),
        search_estimate={cell: float(search_means[cell]) for cell in held_out_values},
        confirmed=confirmed,
        flattery=sign * (float(search_means[winner]) - confirmed[winner].mean),
        comparisons=comparisons,
        confidence=confidence,
    )
