"""`testset`: generate, critique and filter an eval set from the knowledge base; its dry run bounds the
calls."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cli.budget import (
    TESTSET_KNOBS,
    budget_line,
    dry_run_exit_code,
    expected_line,
    previous_spend,
    refuse_over_budget,
    spend_text,
)
from cli.command import (
    Command,
    RunStopped,
    add_cache_option,
    add_config_options,
    add_run_tag_option,
    config_of,
)
from cli.launch import launch
from cli.outputs import write_folder
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import run_testset_preflight
from ragbench.report.pages import rows_to_text
from ragbench.runs.names import EVAL_SET_STEP, TESTSET_PIPELINE


class TestsetCommand(Command):
    name = "testset"
    help = "generate an eval set from the knowledge base (stored as a ZenML artifact and as JSONL)"
    dry_run = "list the generator's and each filter's calls with their tokens and cost; call nothing"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        add_cache_option(parser)
        add_run_tag_option(parser)

    def run(self, args: argparse.Namespace) -> int:
        config = config_of(args)
        return print_testset_plan(config) if args.dry_run else run_testset(config, not args.no_cache)


def print_testset_plan(config: BenchmarkConfig) -> int:
    """The most the run calls: every candidate generated and checked by every configured filter."""
    from ragbench.config.pipeline_plans import testset_plan_rows

    chunks = run_testset_preflight(config, plan_only=True)
    rows = testset_plan_rows(config, chunks)
    print(rows_to_text(rows))
    costs = [row["cost_usd"] for row in rows]
    cost = "unknown (a model litellm cannot price)" if None in costs else f"${sum(costs):.4f}"
    print(
        f"\nAt most {sum(row['calls'] for row in rows)} LLM calls, cost {cost} (every candidate generated "
        "and checked by every configured filter, completions of max_tokens, passages as long as the chunk "
        f"size; cached calls are free). The knowledge base makes about {chunks} chunks of "
        f"{config.section_chunking(config.testset)[0]} tokens."
    )
    previous = previous_spend(config, TESTSET_PIPELINE)
    print(previous.line())
    print(expected_line(previous.plan(rows), "its summary shows them"))
    if (budget := budget_line(config, rows, TESTSET_KNOBS, previous.retry_rate)) is not None:
        print(budget)
    return dry_run_exit_code(config, rows, TESTSET_KNOBS, previous.retry_rate)


def testset_preflight(
    config: BenchmarkConfig, *, step_environment: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`run_testset_preflight`, then its plan (every candidate generated and checked, the retries the
    config's previous testset run measured included) against the budget. The plan is the pipeline's
    `planned` parameter: the run sums what it spent beside it."""
    from ragbench.config.pipeline_plans import testset_plan_rows

    chunks = run_testset_preflight(config, step_environment=step_environment)
    rows = testset_plan_rows(config, chunks)
    previous = previous_spend(config, TESTSET_PIPELINE)
    refuse_over_budget(config, rows, TESTSET_KNOBS, previous.retry_rate)
    return {"planned": previous.plan(rows).as_metadata()}


def run_testset(config: BenchmarkConfig, use_cache: bool) -> int:
    """Generate, critique and filter an eval set; export it as JSONL beside the ZenML artifact."""
    from ragbench.runs.compare import config_tag
    from ragbench.testset.assemble import EvalSet

    pipeline_run = launch(TESTSET_PIPELINE, config, use_cache, testset_preflight, [config_tag(config.name)])
    artifact = pipeline_run.steps[EVAL_SET_STEP].outputs[config.eval_set_name][0]
    eval_set: EvalSet = artifact.load()
    summary = eval_set.summary
    failures = summary["generator_failures"] + summary["critic_failures"]
    spent = pipeline_run.run_metadata["spend"]  # per role, beside the plan: the files say what the set cost
    folder = write_folder(
        Path(config.output_dir) / "testsets",
        f"{eval_set.name}-v{artifact.version}" + ("-INCOMPLETE" if failures else ""),
        {
            "cases.jsonl": eval_set.jsonl(),
            "rejected.jsonl": eval_set.jsonl("rejected"),
            "summary.json": json.dumps(summary | {"spend": spent}, indent=2) + "\n",
            "eval_set.html": eval_set.html(),
        },
    )
    print(eval_set.summary_text())
    print(spend_text(pipeline_run))
    for warning in eval_set.warnings:
        print(f"WARNING: {warning}")
    print(
        f"\nZenML artifact: {eval_set.name} version {artifact.version}; files: {folder}/cases.jsonl "
        f"(kept), rejected.jsonl, summary.json\nBenchmark on it: eval_cases: {{artifact: {eval_set.name}, "
        f"version: {artifact.version}}}  or  eval_cases: {folder}/cases.jsonl"
    )
    if failures:
        raise RunStopped(
            f"{summary['generator_failures']} generator and {summary['critic_failures']} critic call(s) "
            f"failed, so version {artifact.version} is incomplete and a benchmark refuses it. Run again to "
            "retry only the failed calls (the others are cached)."
        )
    if not eval_set.cases:
        raise RunStopped("no case passed the critics: see rejected.jsonl for their reasons")
    return 0
