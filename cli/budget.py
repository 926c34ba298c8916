"""The plan against the config's `budget`, for every command that runs a pipeline: a line for its dry run,
and the refusal of a real run whose plan is over the cap (before any model loads)."""

from __future__ import annotations

from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import PreflightError

# What changes a benchmark's plan, named in the refusal.
BENCHMARK_KNOBS = (
    "generation.sample_size, the grid's readers or judges, the rubrics or evaluation.judge_samples"
)
TESTSET_KNOBS = "testset.chunks, testset.questions_per_chunk or testset.filters"
TRAINING_KNOBS = "reranker_training.chunks"


def budget_line(config: BenchmarkConfig, rows: list[dict], knobs: str = BENCHMARK_KNOBS) -> str | None:
    """The plan against `budget`, or None without a cap; a plan over it says by how much and what to
    lower (a real run refuses it: `refuse_over_budget`)."""
    from ragbench.config.dry_run import planned_spend

    budget = config.budget
    if not budget.capped:
        return None
    planned = planned_spend(rows)
    if problems := planned.over(budget, knobs):
        return f"Budget ({budget.describe()}): OVER, a real run is refused: " + "; ".join(problems) + "."
    cost = "unknown cost" if planned.cost_usd is None else f"${planned.cost_usd:.4f}"
    return (
        f"Budget ({budget.describe()}): within; the plan's {planned.calls} new calls, up to {planned.tokens} "
        f"tokens, {cost}. Every call sent (retries included) is charged before it is sent; the run stops "
        "calling at the cap."
    )


def refuse_over_budget(config: BenchmarkConfig, rows: list[dict], knobs: str = BENCHMARK_KNOBS) -> None:
    """Refuse, before any model loads, a run whose plan is over its budget."""
    from ragbench.config.dry_run import planned_spend

    if config.budget.capped and (problems := planned_spend(rows).over(config.budget, knobs)):
        raise PreflightError(
            f"the run's plan is over its budget ({config.budget.describe()}): " + "; ".join(problems)
        )
