"""The model-based search: Optuna's TPE sampler over the grid's cells, one trial a cell, each axis a
categorical parameter, a budget of cells (`search.max_cells`), and each trial's cases spent by the race's
rule: after every round the trial's per-case values are paired with the incumbent's (the best trial that
answered every search case) and the trial stops when it is significantly behind.

The pruner is the race's sign-flip rule, not Optuna's WilcoxonPruner, for three reasons:
- error control over looks: WilcoxonPruner tests at `p_threshold` at every report, with no correction for
  how often it looks, so a trial as good as the best is pruned far more often than that threshold says;
  the race splits alpha over its planned looks (Bonferroni), so a tied trial is pruned with chance at most
  alpha whatever the number of rounds;
- the hypothesis: the signed-rank test is about a symmetric location shift (a median, for 1-5 judge scores
  piled at the ends), while every ragbench verdict is about the mean the results table shows; the sign-flip
  test of the mean paired difference is the one the race, the stage tie sets and the report use;
- one rule, one place: a pruned trial and an eliminated race cell are stopped on the same evidence, read
  the same way in the report.

Optuna still sees every round (`Trial.report` of the running mean, step = cases answered), so TPE ranks a
pruned trial by how far it got, as it does with its own pruners.

Determinism: TPE is seeded, trials run one at a time, and the same reported values make the same
suggestions, so a rerun asks for the same cells and the pipeline's cached steps serve them. A suggestion of
a cell already evaluated is told its known value at once and spends no budget.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import optuna
from pydantic import BaseModel

from ragbench.analysis.holdout import CaseSplit, Confirmation, confirm, split_order
from ragbench.analysis.racing import RESAMPLES_PER_THRESHOLD, planned_looks
from ragbench.analysis.strategies import ModelSearch
from ragbench.stats.inference import paired_differences, paired_p_value

# Optuna logs every trial at INFO: a search of a hundred cells would bury the run's own output.
optuna.logging.set_verbosity(optuna.logging.WARNING)

# TPE proposes a cell it has already seen more and more often as it converges; after this many such
# proposals in a row, without a new cell, the search stops: its model has nothing new to try.
MAX_REPEATS = 200


class TrialRecord(BaseModel):
    """One evaluated cell: how many cases it answered, its mean on them, whether it was pruned."""

    cell: str
    cases: int
    mean: float
    pruned: bool
    order: int  # 0-based: the order the cells were asked in


class TrialSearch:
    """TPE over the grid's cells (each axis a categorical parameter), ask/tell, a cell budget, and a pruner
    on paired per-case values: the race's sign-flip rule (see the module's docstring for why not Optuna's
    WilcoxonPruner).

    `cells`: cell id -> {axis name: value label}. The axes are walked in order and each one's choices are the
    labels of the cells that agree with the choices so far, so a grid that is not a full product (a bm25 cell
    has no embedding) is searched over its own cells only: an axis with a single remaining choice is no
    parameter, and one whose choices depend on earlier axes is its own parameter per choice set (Optuna's
    distributions must not change under one name).

    `planned_looks`: the rounds a full trial answers (`racing.planned_looks(search cases, batch)`); a round's
    test is held at alpha / planned_looks, so a trial as good as the incumbent is pruned with chance at most
    `alpha` over all of them."""

    def __init__(
        self,
        cells: Mapping[str, Mapping[str, str]],
        *,
        higher_is_better: bool,
        max_cells: int,
        startup_trials: int,
        seed: int,
        alpha: float = 0.05,
        planned_looks: int = 1,
        resamples: int = 2000,
    ) -> None:
        if len(cells) < 2:
            raise ValueError(f"a model-based search needs at least two cells, got {len(cells)}")
        if max_cells < 2:
            raise ValueError(f"search.max_cells must be at least 2, got {max_cells}")
        self._axes = list(dict.fromkeys(axis for labels in cells.values() for axis in labels))
        self._cells = {
            cell: tuple(labels.get(axis, "") for axis in self._axes) for cell, labels in cells.items()
        }
        if len(set(self._cells.values())) < len(self._cells):
            raise ValueError(
                "two cells have the same value on every axis: the search could not tell them apart"
            )
        self._by_labels = {labels: cell for cell, labels in self._cells.items()}
        self._choices = {
            axis: sorted({labels[i] for labels in self._cells.values()}) for i, axis in enumerate(self._axes)
        }
        self.higher_is_better = higher_is_better
        self.max_cells = max_cells
        self.level = alpha / planned_looks
        self._resamples = max(resamples, math.ceil(RESAMPLES_PER_THRESHOLD / self.level))
        self._seed = seed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # multivariate TPE
            sampler = optuna.samplers.TPESampler(
                n_startup_trials=startup_trials, seed=seed, multivariate=True, group=True
            )
        self._study = optuna.create_study(
            direction="maximize" if higher_is_better else "minimize", sampler=sampler
        )
        self._records: dict[str, TrialRecord] = {}
        self._values: dict[str, dict[str, float]] = {}
        self._open: tuple[str, optuna.trial.Trial] | None = None
        self._pruned = False  # a report of the open trial said to stop
        self.repeats = 0  # suggestions of a cell already evaluated, told its known value
        self.stop: str | None = None  # why ask() returned None

    def _suggest(self, trial: optuna.trial.Trial) -> str:
        """The cell a trial's suggestions name, axis by axis among the cells still consistent."""
        remaining = list(self._cells.values())
        for i, axis in enumerate(self._axes):
            choices = sorted({labels[i] for labels in remaining})
            if len(choices) > 1:
                name = axis if choices == self._choices[axis] else f"{axis} | {' / '.join(choices)}"
                chosen = trial.suggest_categorical(name, choices)
                remaining = [labels for labels in remaining if labels[i] == chosen]
        return self._by_labels[remaining[0]]

    def ask(self) -> str | None:
        """The next cell to evaluate; None when max_cells are spent, every cell is evaluated, or TPE keeps
        proposing cells it has seen (`stop` says which)."""
        if self._open is not None:
            raise RuntimeError(f"trial of {self._open[0]!r} is still open: tell() it first")
        if len(self._records) >= self.max_cells:
            self.stop = "max_cells"
            return None
        if len(self._records) == len(self._cells):
            self.stop = "space_done"
            return None
        for _ in range(MAX_REPEATS):
            trial = self._study.ask()
            cell = self._suggest(trial)
            if cell not in self._records:
                self._open = (cell, trial)
                return cell
            self._tell_known(trial, self._records[cell])
        self.stop = "converged"
        return None

    def _tell_known(self, trial: optuna.trial.Trial, record: TrialRecord) -> None:
        self.repeats += 1
        if record.pruned:
            trial.report(record.mean, record.cases)
            self._study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            self._study.tell(trial, record.mean)

    def _incumbent(self) -> str | None:
        complete = [r for r in self._records.values() if not r.pruned]
        if not complete:
            return None
        sign = 1.0 if self.higher_is_better else -1.0
        return max(complete, key=lambda r: (sign * r.mean, -r.order)).cell

    def report(self, cell: str, values: Mapping[str, float]) -> bool:
        """The open trial's per-case values so far (case id -> value, NaN: not scored); True when it is
        significantly behind the incumbent on the cases both answered and should stop (prune)."""
        trial = self._trial(cell)
        present = {case: float(v) for case, v in values.items() if not math.isnan(v)}
        self._values[cell] = dict(values)
        if not present:
            return self._pruned
        mean = float(np.mean(list(present.values())))
        trial.report(mean, len(values))
        incumbent = self._incumbent()
        if incumbent is None:
            return self._pruned
        reference = self._values[incumbent]
        shared = [case for case in present if not math.isnan(reference.get(case, math.nan))]
        differences = paired_differences([reference[c] for c in shared], [present[c] for c in shared])
        if differences.size == 0:
            return self._pruned
        difference = float(differences.mean())
        behind = difference != 0 and (difference < 0) == self.higher_is_better
        if behind and paired_p_value(differences, seed=self._seed, resamples=self._resamples) < self.level:
            self._pruned = True
        return self._pruned

    def tell(self, cell: str) -> None:
        """The open trial is finished, with its values reported: pruned if a report said so (or it scored
        nothing), else complete on them."""
        trial = self._trial(cell)
        values = self._values.get(cell, {})
        present = [v for v in values.values() if not math.isnan(v)]
        mean = float(np.mean(present)) if present else math.nan
        pruned = self._pruned or not present
        if pruned:
            self._study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            self._study.tell(trial, mean)
        self._records[cell] = TrialRecord(
            cell=cell, cases=len(values), mean=mean, pruned=pruned, order=len(self._records)
        )
        self._open = None
        self._pruned = False

    def _trial(self, cell: str) -> optuna.trial.Trial:
        if self._open is None or self._open[0] != cell:
            raise RuntimeError(f"{cell!r} is not the open trial")
        return self._open[1]

    def trials(self) -> list[TrialRecord]:
        """Every evaluated cell in the order asked (repeated suggestions spent nothing and are not here)."""
        return sorted(self._records.values(), key=lambda r: r.order)

    def finalists(self, count: int) -> list[str]:
        """The `count` best complete trials by mean, best first (ties: the earlier asked)."""
        sign = 1.0 if self.higher_is_better else -1.0
        complete = [r for r in self._records.values() if not r.pruned]
        return [r.cell for r in sorted(complete, key=lambda r: (-sign * r.mean, r.order))[:count]]

    @property
    def best(self) -> str | None:
        """The best complete trial's cell (None before one completes)."""
        return self._incumbent()

    def values(self, cell: str) -> dict[str, float]:
        """The per-case values last reported for an evaluated cell."""
        return dict(self._values[cell])


class TrialPlan(BaseModel):
    """The model-based search as it ran: the split, every trial, the finalists, the confirmation, the cost."""

    split: CaseSplit
    trials: list[TrialRecord]
    repeats: int  # suggestions of a cell already evaluated (no budget spent)
    stop: str | None  # why the search asked no further cell
    finalists: list[str]  # the best complete trials, best first
    winner: str
    search_means: dict[str, float]  # finalists' means on the search cases
    confirmation: Confirmation | None  # None: search.holdout 0
    answered: dict[str, int]  # cell -> cases it answered (search and held-out)
    calls: int  # reader and judge calls


def replay_model_search(
    cells: Mapping[str, Mapping[str, str]],
    answers: Mapping[str, Mapping[str, float]],
    order: Sequence[str],
    settings: ModelSearch,
    *,
    higher_is_better: bool,
    calls_per_case: int = 2,
    confidence: float = 0.95,
    resamples: int = 2000,
) -> TrialPlan:
    """The model-based search on values known in advance (`answers`: cell -> case -> the end-to-end
    metric), as the pipeline runs it: each asked cell answers the search cases round by round (`batch` at a
    time) until it is pruned or has answered them all; the best `finalists` complete trials then answer
    the held-out cases."""
    split = split_order(
        list(order)[: settings.max_cases] if settings.max_cases else list(order), settings.holdout
    )
    search = TrialSearch(
        cells,
        higher_is_better=higher_is_better,
        max_cells=settings.max_cells,
        startup_trials=settings.startup_trials,
        seed=settings.seed,
        alpha=settings.alpha,
        planned_looks=planned_looks(len(split.search), settings.batch),
        resamples=resamples,
    )
    while (cell := search.ask()) is not None:
        values: dict[str, float] = {}
        for start in range(0, len(split.search), settings.batch):
            values |= {case: answers[cell][case] for case in split.search[start : start + settings.batch]}
            if search.report(cell, values):
                break
        search.tell(cell)
    answered = {record.cell: record.cases for record in search.trials()}
    finalists = search.finalists(settings.finalists)
    if not finalists:
        raise ValueError("no trial answered every search case: nothing to confirm")
    records = {record.cell: record for record in search.trials()}
    means = {cell: records[cell].mean for cell in finalists}
    confirmation = None
    if split.held_out:
        held = {cell: {case: answers[cell][case] for case in split.held_out} for cell in finalists}
        confirmation = confirm(
            held,
            means,
            finalists[0],
            metric=settings.metric,
            higher_is_better=higher_is_better,
            confidence=confidence,
            seed=settings.seed,
            resamples=resamples,
        )
        for cell in finalists:
            answered[cell] += len(split.held_out)
    return TrialPlan(
        split=split,
        trials=search.trials(),
        repeats=search.repeats,
        stop=search.stop,
        finalists=finalists,
        winner=finalists[0],
        search_means=means,
        confirmation=confirmation,
        answered=answered,
        calls=calls_per_case * sum(answered.values()),
    )
