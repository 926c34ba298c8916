"""The staged search: the retrieval-stage axes decided first, on a retrieval metric over the search cases
(no LLM call: every cell's retrieval is computed anyway), then the rerank stage on the reranked retrieval
metric, then the answer-stage cells whose retrieval and rerank keys survived raced on the end-to-end metric
(`ragbench.analysis.racing`), and the race's best finalists confirmed on held-out cases
(`ragbench.analysis.holdout`).

A stage keeps the tie set of its best key, not the single best: every key the paired test does not put
significantly behind the best (Holm over the stage's comparisons). A node-by-node search (AutoRAG's)
carries one key per stage and loses the best configuration where stages interact, e.g. a chunk size that
retrieves a hair better but answers clearly worse; a tie set leaves that choice to the stage that can see
it. What a stage drops is dropped on evidence: significantly behind on a metric the later stages are built
on.

Everything here is pure: the pipeline's steps call `keep_tie_set`, `cells_within` and `race_decision` on
the values they computed, and `replay_staged` runs the whole strategy on an oracle of values known in
advance, exactly as the pipeline runs it (bench/bench_search.py, and the pipeline's tests to check it
decided the same).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from ragbench.analysis.holdout import CaseSplit, Confirmation, confirm, split_order
from ragbench.analysis.racing import (
    MAX_RESAMPLES,
    RESAMPLES_PER_THRESHOLD,
    RaceConfig,
    RaceTrace,
    look,
    start_race,
)
from ragbench.analysis.strategies import StagedSearch
from ragbench.stats.inference import holm, holm_levels, sign_flip_tests


class DroppedKey(BaseModel):
    """A key a stage dropped, and the evidence: its difference from the best on the cases both scored,
    the paired test's p-value and the Holm level it fell under."""

    key: str
    mean: float
    difference: float  # mean(key - best)
    p_value: float
    threshold: float


class StageDecision(BaseModel):
    """What one stage kept and dropped, and why."""

    stage: str  # "retrieve" | "rerank" | "answer"
    metric: str
    higher_is_better: bool
    n_cases: int
    alpha: float
    best: str
    means: dict[str, float]
    kept: list[str]  # the best first, then by mean (equal means by the tie-break's: `keep_tie_set`)
    dropped: list[DroppedKey]
    # kept by the test but left out so the answered cells fit search.max_cells (worst by mean first out)
    cut: list[str] = []
    tie_break: str | None = None  # the metric that ordered keys of equal means (None: key order alone)

    def summary(self, names: Mapping[str, str] | None = None) -> str:
        """One line: how many keys the stage kept, its best, what it dropped and cut."""
        name = (names or {}).get
        dropped = (
            f"; dropped {len(self.dropped)} significantly behind (Holm at {self.alpha:g})"
            if self.dropped
            else ""
        )
        order = f", equal means ordered by {self.tie_break}" if self.tie_break else ""
        cut = f"; {len(self.cut)} tied key(s) cut to fit the cell budget{order}" if self.cut else ""
        return (
            f"{self.stage} stage on {self.metric} over {self.n_cases} case(s): kept {len(self.kept)} of "
            f"{len(self.means)} (best {name(self.best, self.best)}, {self.means[self.best]:.3g})"
            f"{dropped}{cut}."
        )


def tie_break_column(metric: str) -> str:
    """The rank-sensitive retrieval measure that orders keys tied on the stage's `metric`: MRR (where the
    first expected source sits), or nDCG@10 when the stage decides on MRR itself."""
    return "ndcg@10" if metric == "mrr" else "mrr"


def _mean(by_case: Mapping[str, float]) -> float:
    present = [v for v in by_case.values() if not math.isnan(v)]
    return float(np.mean(present)) if present else math.nan


def keep_tie_set(
    values: Mapping[str, Mapping[str, float]],
    *,
    stage: str,
    metric: str,
    higher_is_better: bool,
    alpha: float,
    seed: int,
    resamples: int,
    tie_break: tuple[str, Mapping[str, Mapping[str, float]]] | None = None,
) -> StageDecision:
    """The best key by mean and every key the sign-flip test of the mean paired difference, on the cases
    both scored, does not put significantly behind it, Holm at `alpha` over the comparisons.
    `tie_break`: a second metric's name and its values (key -> case id -> value, higher better), whose mean
    orders keys of equal means
    (the best among them, and which kept keys `cells_within` takes first): a hit rate ties often on few
    cases, and a rank-sensitive measure then says which key puts the source higher. Key order decides
    only what both leave equal.
    `values`: key -> case id -> value (NaN: not scored). A key that scored nothing has no evidence against
    it and is kept. Keys with exactly the best's values are kept without a test, and keys with the same
    values as each other are one comparison (a flat and an HNSW index returning the same lists would
    otherwise make Holm stricter for nothing). Enough resamples are drawn that Holm's smallest level is
    reachable (as a race's look does)."""
    if not values:
        raise ValueError(f"the {stage} stage has no key to decide on")
    means = {key: _mean(by_case) for key, by_case in values.items()}
    scored = sorted(key for key, mean in means.items() if not math.isnan(mean))
    sign = -1.0 if higher_is_better else 1.0
    common = {"stage": stage, "metric": metric, "higher_is_better": higher_is_better, "alpha": alpha}
    cases = {case for by_case in values.values() for case, v in by_case.items() if not math.isnan(v)}
    if not scored:
        keys = sorted(values)
        return StageDecision(**common, n_cases=0, best=keys[0], means=means, kept=keys, dropped=[])
    tie_metric, tie_values = tie_break or (None, {})
    second = {key: _mean(by_case) for key, by_case in tie_values.items()}

    def rank(key: str) -> tuple[float, float, str]:
        """Best first: the stage's mean, then the tie-break's (a key without one after those with one)."""
        tied = second.get(key, math.nan)
        return (sign * means[key], -tied if not math.isnan(tied) else math.inf, key)

    best = min(scored, key=rank)
    groups: dict[tuple[tuple[str, float], ...], list[str]] = {}
    for key in scored:
        signature = tuple(sorted((case, v) for case, v in values[key].items() if not math.isnan(v)))
        groups.setdefault(signature, []).append(key)
    candidates = [keys for keys in groups.values() if best not in keys]
    needed = min(MAX_RESAMPLES, max(resamples, math.ceil(RESAMPLES_PER_THRESHOLD * len(candidates) / alpha)))
    pairs = []
    for keys in candidates:
        shared = [case for case in values[best] if case in values[keys[0]]]
        pairs.append(([values[best][case] for case in shared], [values[keys[0]][case] for case in shared]))
    tests = sign_flip_tests(pairs, seed=seed, resamples=needed)
    p_values = [test.p_value() if test is not None else 1.0 for test, _ in tests]
    dropped = []
    for keys, (test, _), p_value, p_holm, level in zip(
        candidates, tests, p_values, holm(p_values), holm_levels(p_values, alpha), strict=True
    ):
        difference = test.mean if test is not None else 0.0
        behind = difference != 0 and (difference < 0) == higher_is_better
        if behind and p_holm < alpha:
            dropped += [
                DroppedKey(key=key, mean=means[key], difference=difference, p_value=p_value, threshold=level)
                for key in keys
            ]
    gone = {d.key for d in dropped}
    kept = sorted(
        (key for key in values if key not in gone),
        key=lambda key: (key != best, key not in scored, rank(key) if key in scored else (0, 0, key)),
    )
    return StageDecision(
        **common,
        n_cases=len(cases),
        best=best,
        means=means,
        kept=kept,
        dropped=sorted(dropped, key=lambda d: (sign * d.mean, d.key)),
        tie_break=tie_metric,
    )


def cells_within(
    cells_by_key: Mapping[str, Sequence[str]], decision: StageDecision, max_cells: int | None
) -> tuple[list[str], StageDecision]:
    """The cells of the keys `decision` kept (`cells_by_key`: key -> its cells), kept keys taken best
    first while their cells fit `max_cells` (the best key always, whatever it holds: the preflight refuses
    a budget below one key's cells); the decision returned names the tied keys cut for the budget."""
    chosen: list[str] = []
    cut: list[str] = []
    for key in decision.kept:
        cells = list(cells_by_key.get(key, []))
        if chosen and max_cells is not None and len(chosen) + len(cells) > max_cells:
            cut.append(key)
        else:
            chosen += cells
    return chosen, decision.model_copy(update={"cut": cut})


def race_decision(trace: RaceTrace) -> StageDecision:
    """The answer stage's decision as a stage's: the race's survivors kept (its leader first), each
    eliminated cell dropped with the evidence that stopped it (against the leader at that look)."""
    last = trace.looks[-1] if trace.looks else None
    means = dict(last.means) if last else {}
    sign = -1.0 if trace.higher_is_better else 1.0
    survivors = sorted(trace.survivors, key=lambda cell: (sign * means.get(cell, math.inf), cell))
    dropped = [
        DroppedKey(
            key=cell,
            mean=next((look.means[cell] for look in reversed(trace.looks) if cell in look.means), math.nan),
            difference=outcome.difference or 0.0,
            p_value=outcome.p_value if outcome.p_value is not None else 1.0,
            threshold=outcome.threshold or 0.0,
        )
        for cell, outcome in trace.cells.items()
        if outcome.status == "eliminated"
    ]
    return StageDecision(
        stage="answer",
        metric=trace.metric_label,
        higher_is_better=trace.higher_is_better,
        n_cases=trace.cases_answered,
        alpha=trace.settings.alpha,
        best=survivors[0],
        means={**{d.key: d.mean for d in dropped}, **means},
        kept=survivors,
        dropped=dropped,
    )


def race_settings(settings: StagedSearch) -> RaceConfig:
    """The race of the answer stage: the search's race fields, on the search cases (already cut to
    max_cases before the split, so not cut again)."""
    return RaceConfig(
        strategy="race",
        metric=settings.metric,
        batch=settings.batch,
        alpha=settings.alpha,
        budget_calls=settings.budget_calls,
        margin=settings.margin,
    )


@dataclass(frozen=True)
class StagedOracle:
    """Every value a staged search could read, known in advance (a simulation, or a full run's records)."""

    cells: Mapping[str, tuple[str, str]]  # cell -> (its retrieve key, its rerank key)
    retrieval: Mapping[str, Mapping[str, float]]  # retrieve key -> case -> the retrieval metric
    # rerank key -> case -> the retrieval metric after reranking; None: the grid has no reranker, so there
    # is no rerank stage (as in the pipeline: a second test of the same keys on the same values would only
    # spend Holm's level again)
    reranked: Mapping[str, Mapping[str, float]] | None
    answers: Mapping[str, Mapping[str, float]]  # cell -> case -> the end-to-end metric


class StagedPlan(BaseModel):
    """The staged search as it ran: the split, each stage's decision, the race, the confirmation, the
    cost."""

    split: CaseSplit
    decisions: list[StageDecision]  # retrieve, rerank (when the grid reranks), answer
    race: RaceTrace | None  # None: a single cell survived the retrieval stages, nothing to race
    finalists: list[str]  # the race's survivors best first, at most search.finalists
    winner: str
    search_means: dict[str, float]  # finalists' means on the search cases they answered (NaN: none)
    confirmation: Confirmation | None  # None: search.holdout 0
    answered: dict[str, int]  # cell -> cases it answered (search and held-out)
    calls: int  # reader and judge calls


def _by_key(keys: Mapping[str, str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for cell, key in keys.items():
        grouped.setdefault(key, []).append(cell)
    return grouped


def replay_staged(
    oracle: StagedOracle,
    order: Sequence[str],
    settings: StagedSearch,
    *,
    higher_is_better: bool,
    retrieval_higher_is_better: bool,
    calls_per_case: int = 2,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 2000,
    metrics_k: int = 5,
) -> StagedPlan:
    """The staged search on `oracle` over the seeded case `order`: retrieve and (when the grid reranks)
    rerank tie sets on the search cases, the race of the surviving cells (each answering round by round,
    `calls_per_case` reader and judge calls per case), the best `finalists` survivors answering the
    held-out cases. `settings`: the config's section; `metrics_k` says what its default retrieval metric
    is called (hit_rate@<metrics_k>), the label of the stages' decisions."""
    split = split_order(
        list(order)[: settings.max_cases] if settings.max_cases else list(order), settings.holdout
    )
    search = set(split.search)

    def on_search(values: Mapping[str, float]) -> dict[str, float]:
        return {case: v for case, v in values.items() if case in search}

    stage = {"metric": settings.retrieval_column(metrics_k), "higher_is_better": retrieval_higher_is_better}
    stage |= {"alpha": settings.stage_alpha, "seed": seed, "resamples": resamples}
    retrieve_keys = _by_key({cell: keys[0] for cell, keys in oracle.cells.items()})
    retrieve = keep_tie_set(
        {key: on_search(oracle.retrieval[key]) for key in retrieve_keys}, stage="retrieve", **stage
    )
    if oracle.reranked is None:  # no rerank stage: the cell budget applies to the retrieve keys kept
        cells, retrieve = cells_within(retrieve_keys, retrieve, settings.max_cells)
        retrieval_stages = [retrieve]
    else:
        alive = {cell: keys[1] for cell, keys in oracle.cells.items() if keys[0] in retrieve.kept}
        rerank_keys = _by_key(alive)
        rerank = keep_tie_set(
            {key: on_search(oracle.reranked[key]) for key in rerank_keys}, stage="rerank", **stage
        )
        cells, rerank = cells_within(rerank_keys, rerank, settings.max_cells)
        retrieval_stages = [retrieve, rerank]
    answered = dict.fromkeys(cells, 0)
    trace = None
    if len(cells) == 1:
        finalists, means = cells, {cells[0]: math.nan}
        answer = StageDecision(
            stage="answer",
            metric=settings.metric,
            higher_is_better=higher_is_better,
            n_cases=0,
            alpha=settings.alpha,
            best=cells[0],
            means=means,
            kept=cells,
            dropped=[],
        )
    else:
        trace = _race(
            oracle.answers,
            cells,
            split.search,
            race_settings(settings),
            higher_is_better=higher_is_better,
            calls_per_case=calls_per_case,
            seed=seed,
            resamples=resamples,
        )
        answer = race_decision(trace)
        finalists = answer.kept[: settings.finalists]
        means = {cell: answer.means[cell] for cell in finalists}
        answered |= {cell: outcome.cases for cell, outcome in trace.cells.items()}
    confirmation = None
    if split.held_out:
        held = {cell: {case: oracle.answers[cell][case] for case in split.held_out} for cell in finalists}
        confirmation = confirm(
            held,
            means,
            finalists[0],
            metric=settings.metric,
            higher_is_better=higher_is_better,
            confidence=confidence,
            seed=seed,
            resamples=resamples,
        )
        for cell in finalists:
            answered[cell] += len(split.held_out)
    return StagedPlan(
        split=split,
        decisions=[*retrieval_stages, answer],
        race=trace,
        finalists=finalists,
        winner=finalists[0],
        search_means=means,
        confirmation=confirmation,
        answered=answered,
        calls=calls_per_case * sum(answered.values()),
    )


def _race(
    answers: Mapping[str, Mapping[str, float]],
    cells: Sequence[str],
    order: Sequence[str],
    settings: RaceConfig,
    *,
    higher_is_better: bool,
    calls_per_case: int,
    seed: int,
    resamples: int,
) -> RaceTrace:
    """The race as the pipeline runs it: after each round, every survivor's values on the cases answered
    so far and its calls."""
    trace = start_race(
        cells,
        order,
        settings,
        metric_label=settings.metric,
        higher_is_better=higher_is_better,
        test="paired_permutation",
    )
    while (span := trace.next_cases()) is not None:
        stop = span[1]
        seen = {cell: {case: answers[cell][case] for case in trace.order[:stop]} for cell in trace.survivors}
        calls = {cell: calls_per_case * stop for cell in trace.survivors}
        trace = look(trace, seen, calls, seed=seed, resamples=resamples)
    return trace
