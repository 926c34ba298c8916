"""The plan against the config's `budget`, for every command that runs a pipeline: a line for its dry run,
and the refusal of a real run whose plan is over the cap (before any model loads). A plan expects the
retries, calls and tokens its config's previous run of the same pipeline measured (`previous_spend`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cli.command import OVER_BUDGET_EXIT_CODE
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import PreflightError
from ragbench.runs.names import BENCHMARK_PIPELINE

if TYPE_CHECKING:
    from ragbench.config.plan import PreviousSpend
    from ragbench.llm.budget import PlannedSpend

# What changes a benchmark's plan, named in the refusal.
BENCHMARK_KNOBS = (
    "generation.sample_size, the grid's readers or judges, the rubrics, evaluation.judge_samples, "
    "evaluation.judge_check.cases or evaluation.judge_repeats"
)
TESTSET_KNOBS = "testset.chunks, testset.questions_per_chunk or testset.filters"
TRAINING_KNOBS = "reranker_training.chunks"


def previous_spend(
    config: BenchmarkConfig, pipeline: str = BENCHMARK_PIPELINE, last: int = 20
) -> PreviousSpend:
    """The spend the config's newest run of `pipeline` among its `last` logged (its `spend` run metadata,
    which the benchmark's results step and the other pipelines' `sum_run_spend` log); a config's runs carry
    its tag (`config_tag`); the store is opened here if it is not yet."""
    from cli.launch import open_store
    from ragbench.analysis.spend import RunSpend
    from ragbench.config.plan import PreviousSpend
    from ragbench.runs.compare import config_tag
    from ragbench.store import given_store

    open_store()
    for pipeline_run in given_store().runs(pipeline, [f"equals:{config_tag(config.name)}"], size=last):
        if "spend" in pipeline_run.run_metadata:
            spend = RunSpend.model_validate(pipeline_run.run_metadata["spend"])
            return PreviousSpend(
                retry_rate=spend.total.retry_rate,
                token_share=spend.token_share,
                call_share=spend.call_share,
                run=pipeline_run.name,
            )
    return PreviousSpend()


def spend_text(pipeline_run: Any) -> str:
    """What a finished run spent beside its plan (its `spend` run metadata), as its summary prints it."""
    from ragbench.analysis.spend import RunSpend

    return "\n".join(RunSpend.model_validate(pipeline_run.run_metadata["spend"]).lines())


def expected_line(planned: PlannedSpend, shown: str = "the report shows them") -> str:
    """The dry run's expected calls and tokens: the plan's bounds at the previous run's shares."""
    return f"Expected: {planned.bounds_text()} ({shown} beside what the run spent)."


def _checked_plan(rows: list[dict], retry_rate: float, beside: int) -> PlannedSpend:
    """What the cap is checked against: the rows' plan with its expected retries, and the calls `beside`
    them (`dry_run.calls_beside_the_rows`: the judge card's and written references', at most)."""
    from ragbench.config.dry_run import planned_spend

    planned = planned_spend(rows, retry_rate)
    return planned.model_copy(update={"calls": planned.calls + beside})


def budget_line(
    config: BenchmarkConfig,
    rows: list[dict],
    knobs: str = BENCHMARK_KNOBS,
    retry_rate: float = 0.0,
    beside: int = 0,
) -> str | None:
    """The plan against `budget`, or None without a cap; a plan over it says by how much and what to
    lower (a real run refuses it: `refuse_over_budget`)."""
    budget = config.budget
    if not budget.capped:
        return None
    planned = _checked_plan(rows, retry_rate, beside)
    if problems := planned.over(budget, knobs):
        return f"Budget ({budget.describe()}): OVER, a real run is refused: " + "; ".join(problems) + "."
    cost = "unknown cost" if planned.cost_usd is None else f"${planned.cost_usd:.4f}"
    apart = (
        f" ({beside} of them the judge card's and written references' at most, their tokens not planned)"
        if beside
        else ""
    )
    return (
        f"Budget ({budget.describe()}): within; the plan's {planned.calls} new calls{apart}, up to "
        f"{planned.tokens} tokens, {cost}. Every call sent (retries included) is charged before it is sent; "
        "the run stops calling at the cap."
    )


def dry_run_exit_code(
    config: BenchmarkConfig,
    rows: list[dict],
    knobs: str = BENCHMARK_KNOBS,
    retry_rate: float = 0.0,
    beside: int = 0,
) -> int:
    """A dry run's exit code: `OVER_BUDGET_EXIT_CODE` when its plan is over the budget (as `budget_line`
    says), else 0."""
    over = config.budget.capped and _checked_plan(rows, retry_rate, beside).over(config.budget, knobs)
    return OVER_BUDGET_EXIT_CODE if over else 0


def refuse_over_budget(
    config: BenchmarkConfig,
    rows: list[dict],
    knobs: str = BENCHMARK_KNOBS,
    retry_rate: float = 0.0,
    beside: int = 0,
) -> None:
    """Refuse, before any model loads, a run whose plan (its expected retries and the calls `beside` its
    rows included) is over its budget."""
    if config.budget.capped and (
        problems := _checked_plan(rows, retry_rate, beside).over(config.budget, knobs)
    ):
        raise PreflightError(
            f"the run's plan is over its budget ({config.budget.describe()}): " + "; ".join(problems)
        )
