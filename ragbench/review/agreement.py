"""How far a judge agrees with a person, with the uncertainty a few dozen labels leave.

Per rubric criterion and judge: exact agreement, Cohen's kappa (quadratic-weighted on a 1-5 scale, where
4 against 5 is a near miss; unweighted on pass/fail), a percentile bootstrap interval of kappa over the
labelled answers, the confusion matrix, and how many more labels would bring the interval's half-width
under `TARGET_HALF_WIDTH`, assuming it shrinks as 1/sqrt(n) (a planning figure, not a promise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import percentile_bootstrap

TARGET_HALF_WIDTH = 0.1
SCALES: dict[str, tuple[int, ...]] = {"1-5": (1, 2, 3, 4, 5), "pass_fail": (0, 1)}


class Agreement(BaseModel):
    """One judge against the person on one criterion, over the answers both scored."""

    rubric: str
    criterion: str
    judge: str
    scale: str
    labels: int
    exact: float | None
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    confidence: float
    categories: list[int]
    confusion: list[list[int]]  # rows: the person's score, columns: the judge's
    labels_needed: int | None  # more labels for a half-width under TARGET_HALF_WIDTH; None: no interval

    def interval(self) -> str:
        """Kappa's interval as the review page and the sentence write it: ``[0.41, 0.78]``, or empty."""
        return interval_text(self.kappa_low, self.kappa_high, digits=2)

    def sentence(self) -> str:
        if self.kappa is None:
            return f"{self.judge} on {self.criterion}: {self.labels} label(s), kappa not defined yet"
        interval = f" {self.interval() or '(no interval)'}"
        kind = "weighted kappa" if self.scale == "1-5" else "kappa"
        more = (
            ""
            if self.labels_needed is None
            else " (interval within +/-0.1)"
            if self.labels_needed == 0
            else f"; about {self.labels_needed} more labels for +/-0.1"
        )
        return (
            f"{self.judge} on {self.criterion}: {kind} {self.kappa:.2f}{interval}, exact {self.exact:.0%} "
            f"on {self.labels} labels{more}"
        )


def _kappas(person: np.ndarray, judge: np.ndarray, categories: Sequence[int], weighted: bool) -> np.ndarray:
    """Kappa of each row of (draws x n) category indices; NaN where undefined, 1.0 where both raters
    gave every item one and the same score (they agree on everything)."""
    k = len(categories)
    draws, n = person.shape
    cells = person * k + judge
    counts = np.zeros((draws, k * k))
    np.add.at(counts, (np.repeat(np.arange(draws), n), cells.ravel()), 1)
    observed = counts.reshape(draws, k, k) / n
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    weights = ((i - j) ** 2 / (k - 1) ** 2) if weighted else (i != j).astype(float)
    disagree_observed = (weights * observed).sum(axis=(1, 2))
    disagree_expected = (weights * expected).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = 1.0 - disagree_observed / disagree_expected
    kappa[(disagree_expected == 0) & (disagree_observed == 0)] = 1.0
    return kappa


def _indices(values: Sequence[int], scale: str) -> np.ndarray:
    """Scores as their positions on the scale: what `_kappas` counts with."""
    index = {value: position for position, value in enumerate(SCALES[scale])}
    return np.array([index[value] for value in values], dtype=int)


class KappaChange(BaseModel):
    """How much a second judge's kappa with the person differs from a first judge's, on the same labels:
    the difference and its paired percentile bootstrap interval (both judges resampled together)."""

    difference: float | None
    low: float | None
    high: float | None
    confidence: float

    def text(self) -> str:
        if self.difference is None:
            return "kappa change not defined"
        interval = interval_text(self.low, self.high, digits=2, signed=True)
        shown = f" {interval}" if interval else ""
        return f"kappa change {self.difference:+.2f}{shown} (paired bootstrap, {self.confidence:.0%})"


def kappa_change(
    person: Sequence[int],
    first: Sequence[int],
    second: Sequence[int],
    *,
    scale: str = "1-5",
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> KappaChange:
    """kappa(person, second) - kappa(person, first) over the same labelled answers."""
    categories, weighted, n = SCALES[scale], scale == "1-5", len(person)
    rater, before, after = (_indices(values, scale) for values in (person, first, second))
    undefined = KappaChange(difference=None, low=None, high=None, confidence=confidence)
    if n < 5:
        return undefined
    difference = float(
        _kappas(rater[None, :], after[None, :], categories, weighted)[0]
        - _kappas(rater[None, :], before[None, :], categories, weighted)[0]
    )
    interval = percentile_bootstrap(
        lambda draws: (
            _kappas(rater[draws], after[draws], categories, weighted)
            - _kappas(rater[draws], before[draws], categories, weighted)
        ),
        n,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    if not math.isfinite(difference) or interval is None:
        return undefined
    return KappaChange(difference=difference, low=interval[0], high=interval[1], confidence=confidence)


def agreement(
    pairs: Sequence[tuple[int, int]],
    *,
    rubric: str,
    criterion: str,
    judge: str,
    scale: str = "1-5",
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Agreement:
    """`pairs`: (person's score, judge's score), one per labelled answer the judge scored."""
    categories = SCALES[scale]
    person, judged = _indices([p for p, _ in pairs], scale), _indices([j for _, j in pairs], scale)
    n = len(pairs)
    confusion = np.zeros((len(categories), len(categories)), dtype=int)
    np.add.at(confusion, (person, judged), 1)
    weighted = scale == "1-5"
    kappa = low = high = needed = None
    if n >= 2:
        value = float(_kappas(person[None, :], judged[None, :], categories, weighted)[0])
        kappa = value if math.isfinite(value) else None
    if kappa is not None and n >= 5:
        interval = percentile_bootstrap(
            lambda draws: _kappas(person[draws], judged[draws], categories, weighted),
            n,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )
        if interval is not None:
            low, high = interval
            half = (high - low) / 2
            needed = 0 if half <= TARGET_HALF_WIDTH else math.ceil(n * (half / TARGET_HALF_WIDTH) ** 2) - n
    return Agreement(
        rubric=rubric,
        criterion=criterion,
        judge=judge,
        scale=scale,
        labels=n,
        exact=float(np.mean(person == judged)) if n else None,
        kappa=kappa,
        kappa_low=low,
        kappa_high=high,
        confidence=confidence,
        categories=list(categories),
        confusion=confusion.tolist(),
        labels_needed=needed,
    )
