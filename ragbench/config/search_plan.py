"""What a search can spend, before the run: the cells it answers at most and their reader and judge calls at
most, against what the full grid would call on the same cases. Read by the dry run (`RunPlan.search_line`);
no model loads, no call is made: each cell's calls on one case are counted as the dry run counts them
(`calls_per_case`) and multiplied by the cases it may answer.

The bounds, with S the cases a search spends (`searched_cases`), H of them held out:
- race: every cell may last to the end: every cell on S (the full grid's calls), or budget_calls;
- staged: the retrieval stages may keep every key, so at most `max_cells` cells (else every cell) race on
  the S - H search cases (or budget_calls), and the `finalists` answer the H held-out ones;
- tpe: `max_cells` trials on the S - H search cases (or budget_calls), the finalists on the H held out.
The costliest cells are assumed where a bound picks cells, so it holds whichever cells the search keeps."""

from __future__ import annotations

from dataclasses import dataclass

from ragbench.analysis.holdout import held_out_count
from ragbench.analysis.racing import RaceConfig
from ragbench.analysis.strategies import Confirmed, Search, searched_cases
from ragbench.config.dry_run import calls_per_case
from ragbench.config.model import BenchmarkConfig
from ragbench.generation.answers import case_order
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase


@dataclass(frozen=True)
class SearchPlan:
    """A search's spend at most against the full grid's, on the same cases."""

    strategy: str
    cells: int  # the grid's cells
    cells_at_most: int  # cells that may answer any case
    cases: int  # the cases the search spends, held-out ones included
    held_out: int
    calls_at_most: int  # reader and judge calls
    full_calls: int  # every cell answering and judged on every one of `cases`

    @property
    def share(self) -> float | None:
        return self.calls_at_most / self.full_calls if self.full_calls else None

    def line(self) -> str:
        share = f" ({self.share:.0%})" if self.share is not None else ""
        held = (
            f", {self.cases - self.held_out} search and {self.held_out} held-out"
            if self.strategy != "race"
            else ""
        )
        return (
            f"Search ({self.strategy}): at most {self.cells_at_most} of {self.cells} cells answer, at most "
            f"{self.calls_at_most} reader and judge calls on {self.cases} cases{held}{share}, against "
            f"{self.full_calls} for the full grid on the same cases."
        )


def search_plan(config: BenchmarkConfig, cells: list[CellSpec], cases: list[EvalCase]) -> SearchPlan | None:
    """The plan of the config's search over `cells` and `cases`; None without `search` (or without cases)."""
    search: Search | None = config.search
    if search is None or not cases:
        return None
    spent = searched_cases(search, len(cases), config.generation.sample_size)
    case = case_order(cases, config.generation.seed)[0]
    per_case = sorted((calls_per_case(config, cell, case) for cell in cells), reverse=True)
    full = sum(per_case) * spent
    budget = search.budget_calls
    if isinstance(search, RaceConfig):
        return SearchPlan("race", len(cells), len(cells), spent, 0, min(full, budget or full), full)
    assert isinstance(search, Confirmed)
    held = held_out_count(spent, search.holdout)
    at_most = min(len(cells), search.max_cells or len(cells))
    searching = sum(per_case[:at_most]) * (spent - held)
    confirming = sum(per_case[: min(search.finalists, at_most)]) * held
    calls = min(searching, budget or searching) + confirming
    return SearchPlan(search.strategy, len(cells), at_most, spent, held, calls, full)
