"""The plan against the config's `budget`, for every command that runs a pipeline: a line for its dry run,
and the refusal of a real run whose plan is over the cap (before any model loads). A plan expects the
retries, calls and tokens its config's previous run of the same pipeline measured (`previous_spend`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import PreflightError
from ragbench.runs.names import BENCHMARK_PIPELINE

if TYPE_CHECKING:
    from ragbench.llm.budget import PlannedSpend

# What changes a benchmark's plan, named in the refusal.
BENCHMARK_KNOBS = (
    "generation.sample_size, the grid's readers or judges, the rubrics, evaluation.judge_samples or "
    "evaluation.judge_check.cases"
)
TESTSET_KNOBS = "testset.chunks, testset.questions_per_chunk or testset.filters"
TRAINING_KNOBS = "reranker_training.chunks"


@dataclass(frozen=True)
class PreviousSpend:
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
        from ragbench.config.dry_run import planned_spend

        return planned_spend(rows, self.retry_rate, self.token_share, self.call_share)


def previous_spend(
    config: BenchmarkConfig, pipeline: str = BENCHMARK_PIPELINE, last: int = 20
) -> PreviousSpend:
    """The spend the config's newest run of `pipeline` among its `last` logged (its `spend` run metadata,
    which the benchmark's results step and the other pipelines' `sum_run_spend` log); a config's runs carry
    its tag (`config_tag`)."""
    from cli.launch import open_store
    from ragbench.analysis.spend import RunSpend
    from ragbench.runs.compare import config_tag
    from steps.store import ZenMLStore

    open_store()
    for pipeline_run in ZenMLStore().runs(pipeline, [f"equals:{config_tag(config.name)}"], size=last):
        if "spend" in pipeline_run.run_metadata:
            spend = RunSpend.model_validate(pipeline_run.run_metadata["spend"])
            return PreviousSpend(
                spend.total.retry_rate, spend.token_share, spend.call_share, pipeline_run.name
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
