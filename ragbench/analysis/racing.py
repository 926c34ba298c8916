"""Racing a grid's cells on shared cases: every surviving cell answers the next `batch` cases of one seeded
order, then each survivor is compared with the current leader on the race's metric by the paired
permutation test of the mean, and the cells that are significantly behind stop. The cases spent go where
they decide.

Error control, over cells and over the repeated looks, by a Bonferroni split of alpha over the planned
looks (`planned_looks`: one per batch of `max_cases`), Holm over the survivors' comparisons within a look.
Any number of looks up to the plan keeps the chance of eliminating a cell that is truly as good as the
leader at most alpha, whatever the data; the simulation benchmark (bench/bench_racing.py) measures it,
including the leader being picked from the same data (which Holm alone does not cover).

A look's input is the per-case values of the survivors on the cases answered so far (cell -> case id ->
value, NaN or absent: not scored); everything here is pure, so the benchmark replays a race over recorded
per-case values exactly as the pipeline runs it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from ragbench.retrieval.measures import is_retrieval_column
from ragbench.scoring.metrics import MetricInfo
from ragbench.section import Section
from ragbench.stats.inference import Test, holm, holm_levels, sign_flip_tests
from ragbench.stats.permutation import SignFlipTest

# Permutation p-values are estimated from resamples: a look's smallest threshold needs enough of them to
# be reachable at all (a Monte Carlo p-value is never below 1 / (resamples + 1)).
RESAMPLES_PER_THRESHOLD = 20
MAX_RESAMPLES = 200_000

StopReason = Literal["decided", "equivalent", "cases_exhausted", "budget_exhausted"]
STOP_REASONS: dict[str, str] = {
    "decided": "one cell is significantly ahead of every other",
    "equivalent": "the survivors are equivalent within the margin",
    "cases_exhausted": "the cases ran out",
    "budget_exhausted": "the call budget ran out",
}


class RaceRules(Section):
    """The race's rules, shared by every search strategy (each ends in a race, or races its trials): the
    base of `RaceConfig` and of the strategies in `ragbench.analysis.strategies`. `strategy` is each
    strategy's own literal, the tag `search:` is told apart by."""

    strategy: str
    metric: str = Field(
        description="the end-to-end metric the race decides on (a rubric criterion, a scorer's metric or a "
        "suite's fail_<name>); retrieval metrics cost no call and are computed on every case anyway"
    )
    batch: int = Field(default=8, ge=2, description="new cases every surviving cell answers per round")
    max_cases: int | None = Field(
        default=None, ge=2, description="cases at most (default: every eval case), the first of the order"
    )
    alpha: float = Field(
        default=0.05,
        gt=0.0,
        lt=0.5,
        description="chance, over every cell and look, of stopping a cell as good as the leader",
    )
    budget_calls: int | None = Field(
        default=None,
        ge=1,
        description="reader and judge calls at most; a round that would pass it is not run",
    )
    margin: float | None = Field(
        default=None,
        gt=0.0,
        description="the race also ends when every survivor's difference from the leader lies within "
        "±margin (in the metric's units) at the look's level: equivalent for the decision at hand",
    )


class RaceConfig(RaceRules):
    """`search:` in a config: race the grid's cells instead of answering a fixed sample in every cell."""

    strategy: Literal["race"] = Field(description="race: rounds of shared cases, losing cells stop")


class RaceComparison(BaseModel):
    """One survivor against the leader at one look, on the cases both scored."""

    cell: str
    n: int
    difference: float  # mean(cell - leader)
    # interval at the comparison's level (1 - threshold), the look's own test inverted (stored before: a
    # paired bootstrap); computed where it is read: at an elimination, at the last look, and at every look
    # when a margin is set (None: not computed)
    low: float | None = None
    high: float | None = None
    p_value: float
    threshold: float  # Holm's level for this comparison at this look (`holm_levels`)
    eliminated: bool


class RaceLook(BaseModel):
    """A look after a round: the leader, every other survivor against it, and who stopped."""

    round: int  # 1-based
    cases: int  # cases of the order answered so far
    alpha: float  # this look's share of the race's alpha
    leader: str
    means: dict[str, float]  # survivor -> mean on the cases so far
    comparisons: list[RaceComparison]

    @property
    def eliminated(self) -> list[str]:
        return [c.cell for c in self.comparisons if c.eliminated]


class CellOutcome(BaseModel):
    """What the race made of one cell: stopped (and on what evidence) or kept to the end."""

    cell: str
    status: Literal["winner", "survivor", "eliminated"] = "survivor"
    stopped_round: int | None = None
    difference: float | None = None  # against the leader at the look that stopped it
    p_value: float | None = None
    threshold: float | None = None
    leader: str | None = None
    cases: int = 0
    calls: int = 0


class RaceTrace(BaseModel):
    """The elimination trace: the race's settings, its case order, every look and every cell's outcome."""

    settings: RaceConfig
    metric_label: str
    higher_is_better: bool
    test: Test
    order: list[str]  # case ids, the race's cases in the order they are answered
    planned_looks: int
    looks: list[RaceLook] = []
    cells: dict[str, CellOutcome]
    stop: StopReason | None = None

    @model_validator(mode="after")
    def _plan_fits(self) -> RaceTrace:
        if self.planned_looks != planned_looks(len(self.order), self.settings.batch):
            raise ValueError("planned_looks does not match the order and batch")
        return self

    @property
    def survivors(self) -> list[str]:
        return [cell for cell, outcome in self.cells.items() if outcome.status != "eliminated"]

    @property
    def finished(self) -> bool:
        return self.stop is not None

    @property
    def cases_answered(self) -> int:
        return self.looks[-1].cases if self.looks else 0

    def next_cases(self) -> tuple[int, int] | None:
        """(start, stop) positions in the order of the next round's cases; None when the race is over."""
        if self.finished:
            return None
        start = self.cases_answered
        return start, min(start + self.settings.batch, len(self.order))

    @property
    def calls_per_case(self) -> dict[str, float]:
        """Each cell's reader and judge calls per case it answered, as measured (a stopped cell's at its
        last round)."""
        return {cell: outcome.calls / outcome.cases for cell, outcome in self.cells.items() if outcome.cases}

    @property
    def calls_used(self) -> int:
        return sum(outcome.calls for outcome in self.cells.values())

    @property
    def calls_full(self) -> int:
        """What answering and judging every case of the order in every cell would have called, at each
        cell's measured calls per case."""
        return round(sum(self.calls_per_case.get(cell, 0.0) for cell in self.cells) * len(self.order))

    @property
    def share_of_full(self) -> float | None:
        return self.calls_used / self.calls_full if self.calls_full else None

    def status(self, cell: str, names: Mapping[str, str] | None = None) -> str:
        """A cell's outcome as its results row says it, with the evidence that stopped it."""
        outcome = self.cells[cell]
        if outcome.status != "eliminated":
            return f"{outcome.status} (n={outcome.cases})"
        leader = (names or {}).get(outcome.leader or "", outcome.leader)
        return (
            f"eliminated in round {outcome.stopped_round} (n={outcome.cases}): {outcome.difference:+.3g} "
            f"against {leader}, p={outcome.p_value:.2g} <= {outcome.threshold:.2g}"
        )

    def cell_rows(self, names: Mapping[str, str] | None = None) -> list[dict]:
        """The elimination trace, one row per cell: how it ended, on what evidence, at what cost."""
        name = (names or {}).get
        rows = []
        for cell, outcome in self.cells.items():
            rows.append(
                {
                    "cell": name(cell, cell),
                    "outcome": outcome.status,
                    "stopped in round": outcome.stopped_round,
                    "leader then": name(outcome.leader, outcome.leader) if outcome.leader else None,
                    f"difference in {self.metric_label}": outcome.difference,
                    "p": outcome.p_value,
                    "level": outcome.threshold,
                    "cases": outcome.cases,
                    "calls": outcome.calls,
                }
            )
        return rows

    def look_rows(self, names: Mapping[str, str] | None = None) -> list[dict]:
        """One row per look: the cases so far, the leader, the level, who stopped."""
        name = (names or {}).get
        return [
            {
                "round": look.round,
                "cases": look.cases,
                "leader": name(look.leader, look.leader),
                "leader's mean": look.means.get(look.leader),
                "alpha of this look": look.alpha,
                "survivors compared": len(look.comparisons),
                "stopped": ", ".join(name(cell, cell) for cell in look.eliminated),
            }
            for look in self.looks
        ]

    def summary(self, names: Mapping[str, str] | None = None) -> str:
        """The outcome in one sentence, for the terminal and the report."""
        name = (names or {}).get
        survivors = [name(cell, cell) for cell in self.survivors]
        if not self.finished:
            state = f"running after {len(self.looks)} round(s)"
        else:
            state = STOP_REASONS[self.stop or "decided"]
        share = (
            f" ({self.share_of_full:.0%} of a full evaluation's {self.calls_full})" if self.calls_full else ""
        )
        kept = survivors[0] if len(survivors) == 1 else f"{len(survivors)} cells ({', '.join(survivors)})"
        return (
            f"race on {self.metric_label}: {kept} left after {self.cases_answered} case(s) and "
            f"{self.calls_used} reader and judge calls{share}; {state}."
        )


def race_metric(metrics: Sequence[MetricInfo], column: str) -> MetricInfo:
    """The metric a race decides on, among a run's `metrics`: an end-to-end one (a retrieval metric costs
    no call and is computed on every case anyway)."""
    end_to_end = [m for m in metrics if not is_retrieval_column(m.column)]
    if column not in (columns := [m.column for m in end_to_end]):
        if is_retrieval_column(column):
            raise ValueError(
                f"search.metric {column!r} is a retrieval metric: it costs no call and is computed on every "
                "case anyway; race on an end-to-end metric"
            )
        raise ValueError(f"search.metric {column!r} is not computed here; one of {columns}")
    return next(m for m in end_to_end if m.column == column)


def planned_looks(cases: int, batch: int) -> int:
    return max(1, math.ceil(cases / batch))


def start_race(
    cells: Sequence[str],
    order: Sequence[str],
    settings: RaceConfig,
    *,
    metric_label: str,
    higher_is_better: bool,
    test: Test,
) -> RaceTrace:
    """A race before its first round: every cell a survivor, the order cut to `max_cases`."""
    if len(cells) < 2:
        raise ValueError(f"a race needs at least two cells, got {len(cells)}")
    chosen = list(order)[: settings.max_cases] if settings.max_cases else list(order)
    if len(chosen) < 2:
        raise ValueError(f"a race needs at least two cases, got {len(chosen)}")
    return RaceTrace(
        settings=settings,
        metric_label=metric_label,
        higher_is_better=higher_is_better,
        test=test,
        order=chosen,
        planned_looks=planned_looks(len(chosen), settings.batch),
        cells={cell: CellOutcome(cell=cell) for cell in cells},
    )


def _mean(by_case: Mapping[str, float]) -> float:
    present = [v for v in by_case.values() if not math.isnan(v)]
    return float(np.mean(present)) if present else math.nan


def look(
    trace: RaceTrace,
    values: Mapping[str, Mapping[str, float]],
    calls: Mapping[str, int],
    *,
    seed: int = 0,
    resamples: int = 2000,
) -> RaceTrace:
    """The race after the round just answered: `values` holds every survivor's per-case values on the
    first `trace.next_cases()[1]` cases of the order (cell -> case id -> value), `calls` every cell's
    reader and judge calls so far. Returns the new trace; the input is left unchanged."""
    span = trace.next_cases()
    if span is None:
        raise ValueError("the race is over: no further look")
    cases = trace.order[: span[1]]
    survivors = trace.survivors
    if missing := [cell for cell in survivors if cell not in values]:
        raise ValueError(f"no values for surviving cell(s) {missing}")
    number = len(trace.looks) + 1
    alpha = trace.settings.alpha / trace.planned_looks
    means = {cell: _mean({c: values[cell][c] for c in cases if c in values[cell]}) for cell in survivors}
    scored = sorted(cell for cell in survivors if not math.isnan(means[cell]))
    sign = -1.0 if trace.higher_is_better else 1.0
    cells = {cell: outcome.model_copy() for cell, outcome in trace.cells.items()}
    for cell in survivors:
        cells[cell].cases = span[1]
        cells[cell].calls = calls.get(cell, cells[cell].calls)
    if not scored:  # nothing scored yet (every verdict failed): no evidence, next round
        new_look = RaceLook(
            round=number, cases=span[1], alpha=alpha, leader=survivors[0], means={}, comparisons=[]
        )
        return _after(trace, new_look, cells, {})
    leader = min(scored, key=lambda cell: (sign * means[cell], cell))
    others = [cell for cell in survivors if cell != leader]
    needed = min(MAX_RESAMPLES, max(resamples, math.ceil(RESAMPLES_PER_THRESHOLD * len(others) / alpha)))
    shared = {cell: [c for c in cases if c in values[leader] and c in values[cell]] for cell in others}
    pairs = [
        ([values[leader][c] for c in shared[cell]], [values[cell][c] for c in shared[cell]])
        for cell in others
    ]
    # each survivor's test against the leader, and its interval's widest bound
    tests = dict(zip(others, sign_flip_tests(pairs, seed=seed, resamples=needed), strict=True))
    p_values = [test.p_value() if test is not None else 1.0 for test, _ in tests.values()]
    adjusted = holm(p_values)
    # Holm's step-down levels: the k-th smallest p is held against alpha / (m - k + 1), up to the first
    # that fails, whose level the rest keep
    thresholds = dict(zip(others, holm_levels(p_values, alpha), strict=True))
    comparisons = []
    for cell, p_value, p_holm in zip(others, p_values, adjusted, strict=True):
        test = tests[cell][0]
        difference = test.mean if test is not None else 0.0
        behind = difference != 0 and (difference < 0) == trace.higher_is_better
        comparisons.append(
            RaceComparison(
                cell=cell,
                n=test.n if test is not None else 0,
                difference=difference,
                p_value=p_value,
                threshold=thresholds[cell],
                eliminated=behind and p_holm < alpha,
            )
        )
    for comparison in comparisons:
        if comparison.eliminated:
            cells[comparison.cell] = cells[comparison.cell].model_copy(
                update={
                    "status": "eliminated",
                    "stopped_round": number,
                    "difference": comparison.difference,
                    "p_value": comparison.p_value,
                    "threshold": comparison.threshold,
                    "leader": leader,
                }
            )
    new_look = RaceLook(
        round=number,
        cases=span[1],
        alpha=alpha,
        leader=leader,
        means={cell: means[cell] for cell in scored},
        comparisons=comparisons,
    )
    return _after(trace, new_look, cells, tests)


def _with_intervals(
    comparisons: list[RaceComparison], tests: Mapping[str, tuple[SignFlipTest | None, float]]
) -> list[RaceComparison]:
    """Each comparison with the interval of its mean difference at its own level (1 - its Holm threshold):
    the evidence shown beside an elimination, and what equivalence within a margin reads. It is the look's
    own test inverted, on the same sign patterns, so it excludes zero exactly when p < threshold: an
    eliminated cell's interval never holds zero, and a kept cell's, behind the leader, always does."""
    out = []
    for comparison in comparisons:
        test, bound = tests[comparison.cell]
        low, high = (
            test.interval(comparison.threshold, bound)
            if test is not None
            else (comparison.difference, comparison.difference)
        )
        out.append(comparison.model_copy(update={"low": low, "high": high}))
    return out


def _after(
    trace: RaceTrace,
    new_look: RaceLook,
    cells: dict[str, CellOutcome],
    tests: Mapping[str, tuple[SignFlipTest | None, float]],
) -> RaceTrace:
    """The trace with the look added, and the race stopped if it is over; the look's intervals computed
    where they are read (an elimination, a margin to check, the last look)."""
    margin = trace.settings.margin
    if margin is not None:
        new_look.comparisons = _with_intervals(new_look.comparisons, tests)
    survivors = [cell for cell, outcome in cells.items() if outcome.status != "eliminated"]
    stop: StopReason | None = None
    if len(survivors) == 1:
        stop = "decided"
    elif (
        margin is not None
        and new_look.comparisons
        and all(_within(c, margin) for c in new_look.comparisons if not c.eliminated)
    ):
        stop = "equivalent"
    elif new_look.cases >= len(trace.order):
        stop = "cases_exhausted"
    elif (budget := trace.settings.budget_calls) is not None:
        used = sum(outcome.calls for outcome in cells.values())
        batch = min(trace.settings.batch, len(trace.order) - new_look.cases)
        next_round = sum(cells[cell].calls / cells[cell].cases for cell in survivors) * batch
        if used + next_round > budget:
            stop = "budget_exhausted"
    if stop is not None and margin is None:
        new_look.comparisons = _with_intervals(new_look.comparisons, tests)
    elif margin is None:
        shown = [c for c in new_look.comparisons if c.eliminated]
        with_interval = {c.cell: c for c in _with_intervals(shown, tests)}
        new_look.comparisons = [with_interval.get(c.cell, c) for c in new_look.comparisons]
    if stop == "decided":
        cells[survivors[0]] = cells[survivors[0]].model_copy(update={"status": "winner"})
    return trace.model_copy(
        update={
            "looks": [*trace.looks, new_look],
            "cells": cells,
            "stop": stop,
        }
    )


def _within(comparison: RaceComparison, margin: float) -> bool:
    """Equivalent to the leader for the decision at hand: the difference's interval inside ±margin."""
    low, high = comparison.low, comparison.high
    return low is not None and high is not None and -margin <= low and high <= margin
