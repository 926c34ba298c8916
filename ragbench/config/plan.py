"""The run plan: what a benchmark run will do, made once per command from the composed config.

`make_run_plan` expands the grid once, runs the checks (`ragbench.config.preflight`, which read the
knowledge base, the eval cases and the labels once), and plans from what they read: each cell's calls,
tokens and cost, new or reused from earlier runs (`ragbench.config.dry_run`), the calls beside the rows,
what the run can decide, and the spend the budget is checked against. The dry run renders the plan, the
budget check reads it, and the real run takes the snapshots of the client's inputs from what it read and
hands the pipeline the config, those snapshots and the planned spend (JSON-small parameters: the cases
stay in the artifact store). The pipeline, compiled in the process that planned it, takes its cells
from the plan (`planned_cells`) instead of expanding the grid again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ragbench.config.dry_run import (
    calls_beside_the_rows,
    detection_lines,
    judge_alignment_calls,
    judge_card_calls,
    label_correction_line,
    plan_rows,
    planned_spend,
    reference_calls,
    rerank_work,
)
from ragbench.config.expand import expand_grid
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import run_preflight
from ragbench.config.search_plan import search_plan
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase, EvalSuite
from ragbench.inputs.knowledge_base import Corpus
from ragbench.llm.budget import PlannedSpend
from ragbench.provenance import Checkout, read_checkout
from ragbench.retrieval.rerank import RerankerChoice, resolve_reranker
from ragbench.review.labels import ReviewLabels

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ragbench.analysis.results import ResultsTable


class PreviousSpend(BaseModel, frozen=True):
    """What the config's newest run of a pipeline measured of its spend: its retries per call, and the shares
    of its plan's first attempts it sent and of its token bound it used (None: it had no plan). `run` None:
    no such run, or none since runs measure their spend, and nothing is expected."""

    retry_rate: float = 0.0
    token_share: float | None = None
    call_share: float | None = None
    run: str | None = None

    def line(self) -> str:
        """What the plan expects of retries, calls and tokens, and from which run."""
        if self.run is None:
            return "Retries: none expected (no earlier run of this config measured its spend)."
        shares = [
            f"{what} at {share:.0%} of {bound}"
            for what, share, bound in (
                ("its calls", self.call_share, "its first attempts"),
                ("its tokens", self.token_share, "their bound"),
            )
            if share is not None
        ]
        expected = f"; {' and '.join(shares)} are expected, the shares that run used" if shares else ""
        return (
            f"Retries: {self.retry_rate:.1%} of calls expected (the retry rate of run {self.run}); the "
            "plan's calls include them, its tokens and cost do not (a failed call is charged none)"
            f"{expected}."
        )

    def plan(self, rows: list[dict]) -> PlannedSpend:
        """The plan of `rows` (`planned_spend`) with what this run measured expected."""
        return planned_spend(rows, self.retry_rate, self.token_share, self.call_share)


@dataclass(frozen=True)
class EarlierRuns:
    """What the store's earlier runs tell a plan, asked by the caller (the core never asks ZenML): the step
    ids runs on the same knowledge base and eval cases (their fingerprints) finished, the spend the config's
    newest run measured, and the config's newest results table with its run's name (the pilot the
    detection plan reads). `NO_EARLIER_RUNS` where the store holds none."""

    finished_steps: Callable[[str, str], set[str]]
    previous_spend: Callable[[BenchmarkConfig], PreviousSpend]
    latest_results: Callable[[str], tuple[str, ResultsTable] | None]


NO_EARLIER_RUNS = EarlierRuns(
    finished_steps=lambda knowledge_base, eval_cases: set(),
    previous_spend=lambda config: PreviousSpend(),
    latest_results=lambda config_name: None,
)


class RunPlan(BaseModel, frozen=True):
    """One benchmark run, planned: the config, its cells, the inputs as the checks read them, and what the
    run would do with them. `rows`: one per cell (`dry_run.plan_rows`: calls, tokens, cost, new or reused);
    `beside`: the calls the rows do not count (judge card, references written from context); `notes`: the
    dry run's lines on the work beside the rows (rerank stage, judge card, alignment, label correction,
    references); `detection`: what the run can decide (a real run plans it only with
    `statistics.detect`); `planned`: the spend the budget is checked against and the report shows beside
    what the run spent; `unchecked`: what only a real run can check; `checkout`: the client's git checkout
    of ragbench (none for a dry run), read here because a step on another machine has none
    (`ragbench.provenance`)."""

    config: BenchmarkConfig
    cells: list[CellSpec]
    corpus: Corpus
    eval_suite: EvalSuite
    review_labels: ReviewLabels | None
    rerankers: dict[str, RerankerChoice]
    finished_steps: frozenset[str]
    rows: list[dict[str, Any]]
    beside: int
    notes: list[str]
    detection: list[str]
    previous: PreviousSpend
    planned: PlannedSpend
    warnings: list[str]
    unchecked: list[str]
    checkout: Checkout = Checkout()

    @property
    def cases(self) -> list[EvalCase]:
        return self.eval_suite.cases

    @property
    def knowledge_base_fingerprint(self) -> str:
        return self.corpus.fingerprint

    def search_line(self) -> str | None:
        """How a run with `search` spends the rows' calls (`search_plan`), or None without one."""
        if (search := self.config.search) is None or (
            planned := search_plan(self.config, self.cells, self.cases)
        ) is None:
            return None
        how = {
            "race": f"the cells race on {search.metric} in rounds of {search.batch} cases, the ones "
            "significantly behind stop after each round",
            "staged": "the retrieval stages keep their best keys' tie sets (no LLM call), the survivors race "
            f"on {search.metric}, the best finalists answer the held-out cases",
            "tpe": f"trials of the cells TPE proposes, each pruned on {search.metric} by the race's rule, "
            "the best finalists answer the held-out cases",
        }[search.strategy]
        return (
            f"{planned.line()} The rows above are every cell answering the fixed sample; {how}; the report "
            "says how many calls it used."
        )


# The newest plan this process made: the pipeline it launches compiles here and reads its cells.
_newest: RunPlan | None = None


def make_run_plan(
    config: BenchmarkConfig,
    earlier: EarlierRuns = NO_EARLIER_RUNS,
    *,
    plan_only: bool = False,
    step_environment: Mapping[str, str] | None = None,
) -> RunPlan:
    """Check the run and plan it, reading each input once. `plan_only` (a dry run): the checks that need
    no model, key or server (`run_preflight`), and the rerankers resolved to name the cells by the
    checkpoint each would really use; a real run's checks resolve them. `earlier`: what the store's earlier
    runs say (none with `--no-cache` for the finished steps: it recomputes every step)."""
    global _newest
    cells = expand_grid(config)
    preflight = run_preflight(config, cells=cells, plan_only=plan_only, step_environment=step_environment)
    rerankers = preflight.rerankers or {
        name: resolve_reranker(name) for name in dict.fromkeys(c.reranker for c in cells if c.reranker)
    }
    cases = preflight.eval_suite.cases
    finished = earlier.finished_steps(preflight.corpus.fingerprint, preflight.eval_suite.fingerprint)
    rows = plan_rows(config, cases, finished, rerankers, cells=cells)
    previous = earlier.previous_spend(config)
    notes = [
        rerank_work(config, cases, finished, cells=cells),
        judge_card_calls(config, cases, cells=cells),
        judge_alignment_calls(config, cells=cells),
        label_correction_line(config),
        reference_calls(config, cases, cells=cells),
    ]
    _newest = RunPlan(
        config=config,
        cells=cells,
        corpus=preflight.corpus,
        eval_suite=preflight.eval_suite,
        review_labels=preflight.review_labels,
        rerankers=rerankers,
        finished_steps=frozenset(finished),
        rows=rows,
        beside=calls_beside_the_rows(config, cases, cells=cells),
        notes=[note for note in notes if note is not None],
        detection=detection_lines(config, cases, earlier.latest_results(config.name), cells=cells)
        if plan_only or config.statistics.detect is not None
        else [],
        previous=previous,
        planned=previous.plan(rows),
        warnings=preflight.warnings,
        unchecked=preflight.unchecked,
        checkout=Checkout() if plan_only else read_checkout(),  # a dry run records nothing
    )
    return _newest


def planned_cells(config: BenchmarkConfig) -> list[CellSpec]:
    """The cells of `config`: those of the plan this process made of the same config (a pipeline compiles
    in the process that planned its run), else the grid expanded now (a run started from Python, a
    schedule's runs). The cells are the config's alone, so the plan's are the expansion's."""
    if _newest is not None and _newest.config.model_dump_json() == config.model_dump_json():
        return _newest.cells
    return expand_grid(config)
