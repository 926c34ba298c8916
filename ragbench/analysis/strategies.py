"""`search:` in a config: how a sweep spends its calls. One section per strategy, told apart by `strategy`:

- `race` (`RaceConfig`): every cell answers rounds of shared cases, the ones significantly behind stop;
- `staged` (`StagedSearch`): the retrieval-stage keys decided first on a retrieval metric (no LLM call),
  then the rerank keys among the survivors, then the answer-stage cells of what survived raced;
- `tpe` (`ModelSearch`): trials over the whole space, a cell budget, each trial's cases spent by the
  race's rules.

Every strategy shares the race's rules (`RaceRules`); the two searches also confirm their winner on held-out
cases, the tail of the seeded order no search decision saw (`Confirmed`). What is checked here needs only
the section and the metric registry; what needs the grid's cells or the case count (a cell budget under
the first stage, a holdout too small to test on) is checked by the preflight (`search_errors`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragbench.analysis.racing import RaceConfig, RaceRules
from ragbench.grid.cell import CellSpec
from ragbench.retrieval.measures import RETRIEVAL_MEASURES
from ragbench.scoring.metrics import MetricInfo

# The headline retrieval measure a stage decides on unless `retrieval_metric` names another.
DEFAULT_STAGE_MEASURE = "hit_rate@{k}"

# The level a retrieval stage drops keys at (`stage_alpha`'s default), far stricter than the race's 5%: a
# stage's drop is final and made on a proxy (retrieval, not answers), while a tied key kept only costs race
# rounds, which the race spends where they decide. Holm's step-down tests the last comparisons near the
# full level, so a key a hair behind on retrieval (and better on answers) is dropped near that level's
# rate: in bench/bench_search.py's planted interaction at 120 cells, 1% left the search inside the full
# grid's tie set in 94% of 100 replays, 0.1% in 99% with 7.2% of the full grid's calls (docs/measured.md,
# "Search strategies by simulation"). One paired comparison can reach it from 11 search cases on
# (the exact sign-flip test's smallest p, 2/2^11, is under 0.001); with fewer a stage drops nothing.
DEFAULT_STAGE_ALPHA = 0.001


class Confirmed(RaceRules):
    """A search that confirms its winner: `finalists` cells, the best by the search's estimate, answer the
    held-out cases, and the headline verdict and interval come from those cases only."""

    holdout: float = Field(
        default=0.3,
        ge=0.0,
        lt=1.0,
        description="share of the cases (the tail of the seeded order, after max_cases) no search decision "
        "sees, on which the finalists are confirmed; 0: no confirmation (the report says 'not confirmed')",
    )
    finalists: int = Field(
        default=3, ge=1, description="cells carried to confirmation, the best by the search's estimate"
    )


class StagedSearch(Confirmed):
    """Stage by stage: retrieval decided without an LLM call, keeping the tie set, then a race."""

    strategy: Literal["staged"] = Field(
        description="staged: retrieval and rerank keys decided on a retrieval metric, survivors raced"
    )
    retrieval_metric: str | None = Field(
        default=None,
        description="the retrieval metric (a column at retrieval.metrics_k, e.g. mrr or hit_rate@5) the "
        "retrieve and rerank stages decide on, per case over the search cases; default: hit_rate@<metrics_k>",
    )
    stage_alpha: float = Field(
        default=DEFAULT_STAGE_ALPHA,
        gt=0.0,
        lt=0.5,
        description="a stage keeps every key not significantly behind its best at this level (Holm over the "
        "stage's comparisons), so stages that interact are not cut to one key blindly",
    )
    max_cells: int | None = Field(
        default=None,
        ge=1,
        description="answered cells at most: the retrieval keys that survive are raced best first while "
        "their cells fit (at least the cells of one retrieval key); default: every surviving cell",
    )

    def retrieval_column(self, metrics_k: int) -> str:
        return self.retrieval_metric or DEFAULT_STAGE_MEASURE.format(k=metrics_k)


class ModelSearch(Confirmed):
    """Model-based: TPE trials over the whole space, each a cell raced by the race's rules."""

    strategy: Literal["tpe"] = Field(
        description="tpe: Optuna's TPE proposes cells, a pruner on paired per-case values stops trials"
    )
    max_cells: int = Field(ge=2, description="cells evaluated at most (trials, pruned ones included)")
    startup_trials: int = Field(
        default=8, ge=1, description="cells sampled at random before the model proposes any"
    )
    seed: int = Field(default=0, description="the sampler's seed: the same seed asks the same cells")

    @model_validator(mode="after")
    def _budget_covers_startup(self) -> ModelSearch:
        if self.max_cells < self.startup_trials:
            raise ValueError(
                f"max_cells ({self.max_cells}) is smaller than startup_trials ({self.startup_trials}): the "
                "model would never propose a cell"
            )
        return self


Search = RaceConfig | StagedSearch | ModelSearch
SearchConfig = Annotated[Search, Field(discriminator="strategy")]


def stage_metric(column: str, metrics_k: int) -> MetricInfo:
    """The retrieval metric a staged search's retrieve and rerank stages decide on: one every retrieve and
    rerank step computes per case (`ragbench.retrieval.measures.RETRIEVAL_MEASURES` at `metrics_k`)."""
    known = {
        measure.column_at(metrics_k): MetricInfo(
            column=measure.column_at(metrics_k),
            label=measure.label_at(metrics_k),
            higher_is_better=measure.higher_is_better,
        )
        for measure in RETRIEVAL_MEASURES
    }
    if column not in known:
        raise ValueError(
            f"search.retrieval_metric {column!r} is not a retrieval metric computed per case at "
            f"retrieval.metrics_k {metrics_k}; one of {list(known)}"
        )
    return known[column]


def searched_cases(search: RaceRules, cases: int, sample_size: int | None) -> int:
    """How many cases of the seeded order a search spends (the held-out ones included): the first
    `max_cases`, by default `generation.sample_size`, else every case."""
    most = search.max_cases or sample_size
    return min(cases, most) if most else cases


def first_stage_cells(cells: Sequence[CellSpec]) -> int:
    """The most cells that share one retrieval key (`upto("rerank")`): a staged search's answer stage
    answers at least these, whatever the retrieval stages keep."""
    return max(Counter(cell.upto("rerank").id for cell in cells).values(), default=0)


def cell_budget_error(search: Search, cells: Sequence[CellSpec]) -> str | None:
    """Why `search.max_cells` cannot be kept on these cells (None: it can): a staged search's budget must
    hold one retrieval key's cells, the first stage that answers (a model-based search's is checked against
    its startup trials by the section itself)."""
    budget = search.max_cells if isinstance(search, StagedSearch) else None
    if budget is not None and budget < (least := first_stage_cells(cells)):
        return (
            f"search.max_cells ({search.max_cells}) is smaller than the first stage that answers: one "
            f"retrieval key's cells are {least} (the answer and judge axes' combinations); raise it to at "
            f"least {least}"
        )
    return None
