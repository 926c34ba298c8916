"""`run` (the default command) and `race`: the benchmark pipeline, its dry run (the plan) and its report."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cli.budget import budget_line, dry_run_exit_code, expected_line, refuse_over_budget
from cli.command import (
    Command,
    RunStopped,
    add_cache_option,
    add_config_options,
    add_run_tag_option,
    config_of,
)
from cli.earlier_runs import earlier_runs, remember_for_the_next_plan, remembered_stack_environment
from cli.launch import check_output_dir, launch
from cli.outputs import append_step_summary, write_outputs
from ragbench.config.model import BenchmarkConfig, ConfigError
from ragbench.inputs.tables import rows_to_csv
from ragbench.report.pages import rows_to_text
from ragbench.runs.names import BENCHMARK_PIPELINE, GATE_STEP, RESULTS_STEP
from ragbench.section import validation_message

if TYPE_CHECKING:
    from ragbench.analysis.results import ResultsTable
    from ragbench.config.plan import RunPlan

PLAN = (
    "list the cells with their LLM calls, tokens and cost, new or reused from earlier runs; call nothing, "
    "download nothing"
)

# The pipeline function (`pipelines.PIPELINES`) a run with each `search.strategy` launches; a run without
# `search` launches the fixed-sample `rag_benchmark`. Every one is registered under the same pipeline name.
SEARCH_PIPELINES: dict[str, str] = {"race": "rag_race", "staged": "rag_staged", "tpe": "rag_model_search"}


class RunCommand(Command):
    name = "run"
    help = "run the benchmark (the default command) and write its report"
    dry_run = PLAN

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        add_cache_option(parser)
        add_run_tag_option(parser)

    def run(self, args: argparse.Namespace) -> int:
        config = self.config(args)
        use_cache = not args.no_cache
        return print_plan(config, use_cache) if args.dry_run else run_benchmark(config, use_cache)

    def config(self, args: argparse.Namespace) -> BenchmarkConfig:
        return config_of(args)


class RaceCommand(RunCommand):
    name = "race"
    help = (
        "run the benchmark with its cells raced: the config's `search`, or a race on its first end-to-end "
        "headline metric"
    )

    def config(self, args: argparse.Namespace) -> BenchmarkConfig:
        return raced(config_of(args))


def raced(config: BenchmarkConfig) -> BenchmarkConfig:
    """The config with its cells raced: its own `search`, else a race with the defaults on its first
    end-to-end headline metric."""
    if config.search is not None:
        return config
    from ragbench.retrieval.measures import is_retrieval_column

    metrics = [m.column for m in config.scoring().headline() if not is_retrieval_column(m.column)]
    if not metrics or not config.grid.reader:
        raise ConfigError("race: the config computes no end-to-end metric (it needs readers and a judge)")
    data = config.model_dump(mode="json") | {"search": {"strategy": "race", "metric": metrics[0]}}
    try:
        return BenchmarkConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(validation_message(error)) from None


def benchmark_preflight(
    config: BenchmarkConfig, *, step_environment: Mapping[str, str] | None = None, use_cache: bool = True
) -> dict[str, Any]:
    """The run's plan (`make_run_plan`: its checks, then what it would send, the retries the previous run
    measured included); with `statistics.detect`, what the run can decide is printed, so a sample that
    cannot detect that difference says so before anything is spent; a plan over the budget is refused.
    Returns the pipeline's parameters besides `config`: the planned spend (the report shows it beside what
    the run spent), the stored snapshots of the inputs the plan read (`pipelines.inputs`) and the git
    checkout it was planned from (the run records it)."""
    from pipelines.inputs import plan_snapshots
    from ragbench.config.plan import make_run_plan

    plan = make_run_plan(config, earlier_runs(use_cache), step_environment=step_environment)
    for line in plan.detection:
        print(line)
    refuse_over_budget(config, plan.rows, retry_rate=plan.previous.retry_rate, beside=plan.beside)
    return {
        "planned": plan.planned.as_metadata(),
        "snapshots": plan_snapshots(plan).model_dump(mode="json"),
        "checkout": plan.checkout.model_dump(mode="json"),
    }


def print_plan(config: BenchmarkConfig, use_cache: bool = True) -> int:
    """The dry run: every check that needs no model, key or server (config, knowledge base, eval cases,
    index parameters, model names this machine can resolve, docker settings, named secrets, the output
    folder), then the plan; what only a real run can check is listed, never passed over in silence.
    Imports no step nor pipeline; where ZenML never ran it opens no store, and where the store is provably
    unchanged since its answers were remembered (`cli.store_memo`) it imports no ZenML. Exit code 0, or
    `OVER_BUDGET_EXIT_CODE` when the plan is over the budget."""
    from pipelines.options import run_options, step_environment, store_exists
    from ragbench.config.plan import make_run_plan

    earlier = earlier_runs(use_cache)
    run_options(config)  # a typo in orchestration.docker fails here
    stack = remembered_stack_environment(config) if store_exists() else None
    environment = step_environment(config, stack)
    plan = make_run_plan(config, earlier, plan_only=True, step_environment=environment)
    check_output_dir(config)
    print(plan_text(plan))  # preflight has logged its warnings (size estimate included) above
    return dry_run_exit_code(config, plan.rows, retry_rate=plan.previous.retry_rate, beside=plan.beside)


def plan_text(plan: RunPlan) -> str:
    """The dry run's text of a plan: its rows, the stand-in rerankers, what only a real run can check, the
    totals, the work beside the rows, what the run can decide, the spend expected against the budget."""
    from ragbench.config.dry_run import ANSWER_ASSUMPTION

    rows = plan.rows
    parts = [rows_to_text(rows)]
    parts += [
        f"\nRERANKER: the UNTRAINED stand-in ({choice.label}) would run for {choice.requested}"
        for choice in plan.rerankers.values()
        if choice.is_standin
    ]
    if plan.unchecked:
        unchecked = "\n".join(f"  - {item}" for item in plan.unchecked)
        parts.append(f"\nChecked only by a real run:\n{unchecked}")
    new = sum(row["status"] == "new" for row in rows)
    total_calls = sum(row["llm_calls"] for row in rows)
    costs = [row["cost_usd"] for row in rows]
    cost = "unknown (a model litellm cannot price)" if None in costs else f"${sum(costs):.4f}"
    parts.append(
        f"\n{len(rows)} cells: {new} new, {len(rows) - new} reused from earlier runs on the same documents "
        f"and eval cases (unless code changed since). New LLM calls: {total_calls}, cost {cost}; "
        f"{ANSWER_ASSUMPTION}."
    )
    parts += [*plan.notes, *plan.detection, plan.previous.line(), expected_line(plan.planned)]
    budget = budget_line(plan.config, rows, retry_rate=plan.previous.retry_rate, beside=plan.beside)
    parts += [line for line in (budget, plan.search_line()) if line is not None]
    return "\n".join(parts)


def run_benchmark(config: BenchmarkConfig, use_cache: bool) -> int:
    """Run the pipeline, copy its report to the output folder and print its summary; the gate's exit code."""
    from ragbench.report.terminal import run_summary
    from ragbench.runs.compare import config_tag
    from ragbench.runs.gate import GateResult

    tags = [config_tag(config.name), *config.tags]
    function = SEARCH_PIPELINES[config.search.strategy] if config.search is not None else None
    preflight = functools.partial(benchmark_preflight, use_cache=use_cache)
    pipeline_run = launch(BENCHMARK_PIPELINE, config, use_cache, preflight, tags, function=function)
    results_step = pipeline_run.steps[RESULTS_STEP]
    table: ResultsTable = results_step.outputs["results"][0].load()
    records = results_step.outputs["case_records"][0].load()
    searched = results_step.outputs["searched"][0].load()
    gate: GateResult = pipeline_run.steps[GATE_STEP].outputs["gate"][0].load()
    files = {
        "results.csv": table.csv(),
        "results.html": table.report_html,
        "cases.jsonl": records.jsonl(),
        "searched.jsonl": searched.jsonl(),
        "case_values.csv": table.case_values_csv(),
        **gate.files(),  # the verdict page, its Markdown summary and JUnit XML
        **({"case_types.csv": table.case_type_csv()} if table.case_type_rows else {}),
        **({"turn_modes.csv": rows_to_csv(table.turn_mode_rows)} if table.turn_mode_rows else {}),
    }
    folder = write_outputs(config, pipeline_run.name, files)
    remember_for_the_next_plan(config, pipeline_run)
    append_step_summary(files["gate.md"])
    print(run_summary(table, str(folder)))
    print(f"\n{gate.text()}")
    print(f"\nZenML run: {pipeline_run.name}  report: {folder}/results.html  gate: {folder}/gate.html")
    if gate.status == "incomplete":
        raise RunStopped(
            "; ".join(table.incomplete.values()) + ". Their steps are not cached: run again to retry only "
            "the failed calls."
        )
    return gate.exit_code
