"""What a search decided, for the results table and the report: the case split, each stage's decision (what
it kept, dropped and cut, on what evidence) or a model-based search's trials, and the confirmation of the
finalists on the held-out cases. A cell's row says where the search left it; the headline verdict on the
search's metric is the confirmed one (`held_out_values`: the finalists on the held-out cases only, the
search's winner as the best), whose interval no search decision saw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.holdout import CaseSplit, Confirmation
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.staged import StageDecision
from ragbench.analysis.trials import ModelSearchTrace
from ragbench.analysis.uncertainty import CaseValues, MetricVerdict, compare_cells
from ragbench.grid.axes import STAGES
from ragbench.grid.cell import CellSpec, cell_labels, distinct_at, varying_axes
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig


class SearchFindings(BaseModel):
    """A search's artifacts as the results step got them, with its stage keys' names for people."""

    split: CaseSplit
    decisions: list[StageDecision]  # in stage order: retrieve, then rerank when the grid reranks
    trials: ModelSearchTrace | None = None  # a model-based search's trials (it decides no stage)
    confirmation: Confirmation | None = None  # None: search.holdout 0, nothing confirmed
    key_names: dict[str, str] = {}  # stage key id -> a short name of the axes that vary up to its stage

    @classmethod
    def of(
        cls,
        split: CaseSplit,
        decisions: Sequence[StageDecision],
        confirmation: Confirmation | None,
        cells: Sequence[CellSpec],
        trials: ModelSearchTrace | None = None,
    ) -> SearchFindings:
        return cls(
            split=split,
            decisions=list(decisions),
            trials=trials,
            confirmation=confirmation,
            key_names=key_names(cells, [decision.stage for decision in decisions]),
        )

    def name(self, key: str) -> str:
        return self.key_names.get(key, key)

    def status(self, cell: CellSpec, race: RaceTrace | None, names: Mapping[str, str]) -> str:
        """Where the search left `cell`: dropped or cut at a retrieval stage (with the evidence), else the
        race's outcome (a model-based search's: the cell's trial), and for a finalist its confirmed mean."""
        for decision in self.decisions:
            key = cell.upto(decision.stage).id  # type: ignore[arg-type]
            if dropped := next((d for d in decision.dropped if d.key == key), None):
                return (
                    f"dropped at the {decision.stage} stage: {decision.metric} {dropped.mean:.3g}, "
                    f"{dropped.difference:+.3g} against {self.name(decision.best)}, "
                    f"p={dropped.p_value:.2g} <= {dropped.threshold:.2g}"
                )
            if key in decision.cut:
                return f"cut at the {decision.stage} stage to fit search.max_cells (tied with the best)"
        if self.trials is not None:
            status = self.trials.status(cell.id, roles=self.confirmation is None)
        elif race is not None and cell.id in race.cells:
            status = race.status(cell.id, names)
        else:
            status = "answered"
        confirmation = self.confirmation
        if confirmation is not None and (confirmed := confirmation.confirmed.get(cell.id)) is not None:
            role = "winner" if cell.id == confirmation.winner else "finalist"
            status += f"; {role}, confirmed {confirmed.mean:.3g} on {confirmed.n} held-out case(s)"
        return status

    def confirmed_verdicts(
        self,
        verdicts: Sequence[MetricVerdict],
        headline: Sequence[MetricInfo],
        case_values: Mapping[str, CaseValues],
        statistics: StatisticsConfig,
        names: Mapping[str, str],
    ) -> list[MetricVerdict]:
        """`verdicts` with the one on the confirmed metric made again on the held-out cases alone, among
        the finalists, the search's winner as the best (not re-picked there: its interval stays
        unbiased); unchanged when nothing was confirmed."""
        if (confirmation := self.confirmation) is None:
            return list(verdicts)
        held = held_out_values(confirmation, self.split, case_values)
        metric = [m for m in headline if m.column == confirmation.metric]
        confirmed = {
            v.column: v
            for v in compare_cells(
                metric, held, statistics, names, best_of={confirmation.metric: confirmation.winner}
            )
        }
        return [confirmed.get(v.column, v) for v in verdicts]

    def decision_rows(self) -> list[dict]:
        """One row per key a stage decided on: its mean, kept / dropped / cut, and the evidence."""
        rows = []
        for decision in self.decisions:
            dropped = {d.key: d for d in decision.dropped}
            for key, mean in decision.means.items():
                evidence = dropped.get(key)
                outcome = (
                    "dropped"
                    if evidence
                    else "cut (cell budget)"
                    if key in decision.cut
                    else "best"
                    if key == decision.best
                    else "kept"
                )
                rows.append(
                    {
                        "stage": decision.stage,
                        "key": self.name(key),
                        f"mean {decision.metric}": mean,
                        "outcome": outcome,
                        "difference from best": evidence.difference if evidence else None,
                        "p": evidence.p_value if evidence else None,
                        "level": evidence.threshold if evidence else None,
                    }
                )
        return rows

    def confirmation_rows(self, names: Mapping[str, str]) -> list[dict]:
        """One row per finalist: the search's estimate beside the held-out mean and interval."""
        confirmation = self.confirmation
        if confirmation is None:
            return []
        return [
            {
                "finalist": names.get(cell, cell),
                "role": "winner" if cell == confirmation.winner else "finalist",
                "search estimate": confirmation.search_estimate[cell],
                "confirmed": confirmed.mean,
                "low": confirmed.low,
                "high": confirmed.high,
                "held-out cases": confirmed.n,
            }
            for cell, confirmed in confirmation.confirmed.items()
        ]

    def summary(self, names: Mapping[str, str]) -> list[str]:
        """The search in a few lines, for the terminal and the report: each stage, then the confirmation."""
        lines = [decision.summary(self.key_names) for decision in self.decisions]
        if self.confirmation is None:
            lines.append(
                "Not confirmed: search.holdout is 0, so the winner's numbers come from the search's cases."
            )
        else:
            lines.append(self.confirmation.summary(names))
        return lines


def key_names(cells: Sequence[CellSpec], stages: Sequence[str]) -> dict[str, str]:
    """Each stage key's short name: the axes that vary among the cells, up to that stage."""
    varying = varying_axes(list(cells))
    names: dict[str, str] = {}
    for stage in stages:
        upto = STAGES[: STAGES.index(stage) + 1]  # type: ignore[arg-type]
        axes = [axis for axis in varying if CellSpec.stage_of(axis) in upto]
        names |= cell_labels(distinct_at(list(cells), stage), axes)  # type: ignore[arg-type]
    return names


def held_out_values(
    confirmation: Confirmation, split: CaseSplit, case_values: Mapping[str, CaseValues]
) -> dict[str, dict[str, dict[str, float]]]:
    """The finalists' per-case values of the confirmed metric on the held-out cases only (cell -> column ->
    case -> value): what the headline verdict on that metric is computed from."""
    held = set(split.held_out)
    column = confirmation.metric
    return {
        cell: {column: {case: v for case, v in case_values[cell].get(column, {}).items() if case in held}}
        for cell in confirmation.finalists
        if cell in case_values
    }
