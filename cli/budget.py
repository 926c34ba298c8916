"""The plan against the config's `budget`, for every command that runs a pipeline: a line for its dry run,
and the refusal of a real run whose plan is over the cap (before any model loads). A benchmark's plan
expects the retries its config's previous run measured (`previous_spend`)."""

from __future__ import annotations

from dataclasses import dataclass

from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import PreflightError

# What changes a benchmark's plan, named in the refusal.
BENCHMARK_KNOBS = (
    "generation.sample_size, the grid's readers or judges, the rubrics or evaluation.judge_samples"
)
TESTSET_KNOBS = "testset.chunks, testset.questions_per_chunk or testset.filters"
TRAINING_KNOBS = "reranker_training.chunks"


@dataclass(frozen=True)
class PreviousSpend:
    """What the config's newest run with a results table measured of its spend: its retries per call and
    the share of its plan's token bound it used (None: it had no plan). `run` None: no such run, or one
    made before runs measured their spend, and nothing is expected."""

    retry_rate: float = 0.0
    token_share: float | None = None
    run: str | None = None

    def line(self) -> str:
        """What the plan expects of retries and tokens, and from which run."""
        if self.run is None:
            return "Retries: none expected (no earlier run of this config measured its spend)."
        tokens = (
            f"; its tokens are expected at {self.token_share:.0%} of their bound, the share that run used"
            if self.token_share is not None
            else ""
        )
        return (
            f"Retries: {self.retry_rate:.1%} of calls expected (the retry rate of run {self.run}); the "
            f"plan's calls include them, its tokens and cost do not (a failed call is charged none){tokens}."
        )


def previous_spend(config: BenchmarkConfig) -> PreviousSpend:
    """The spend the config's newest run with a results table measured (its `spend`)."""
    from steps.history import latest_results

    latest = latest_results(config.name)
    if latest is None or getattr(latest[1], "spend", None) is None:
        return PreviousSpend()
    name, table = latest
    return PreviousSpend(table.spend.total.retry_rate, table.spend.token_share, name)


def budget_line(
    config: BenchmarkConfig, rows: list[dict], knobs: str = BENCHMARK_KNOBS, retry_rate: float = 0.0
) -> str | None:
    """The plan against `budget`, or None without a cap; a plan over it says by how much and what to
    lower (a real run refuses it: `refuse_over_budget`)."""
    from ragbench.config.dry_run import planned_spend

    budget = config.budget
    if not budget.capped:
        return None
    planned = planned_spend(rows, retry_rate)
    if problems := planned.over(budget, knobs):
        return f"Budget ({budget.describe()}): OVER, a real run is refused: " + "; ".join(problems) + "."
    cost = "unknown cost" if planned.cost_usd is None else f"${planned.cost_usd:.4f}"
    return (
        f"Budget ({budget.describe()}): within; the plan's {planned.calls} new calls, up to {planned.tokens} "
        f"tokens, {cost}. Every call sent (retries included) is charged before it is sent; the run stops "
        "calling at the cap."
    )


def refuse_over_budget(
    config: BenchmarkConfig, rows: list[dict], knobs: str = BENCHMARK_KNOBS, retry_rate: float = 0.0
) -> None:
    """Refuse, before any model loads, a run whose plan (its expected retries included) is over its
    budget."""
    from ragbench.config.dry_run import planned_spend

    if config.budget.capped and (problems := planned_spend(rows, retry_rate).over(config.budget, knobs)):
        raise PreflightError(
            f"the run's plan is over its budget ({config.budget.describe()}): " + "; ".join(problems)
        )
