"""`train-reranker`: fine-tune a ColBERT reranker on questions written from the knowledge base."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from cli.budget import (
    TRAINING_KNOBS,
    budget_line,
    dry_run_exit_code,
    expected_line,
    previous_spend,
    refuse_over_budget,
    spend_text,
)
from cli.command import Command, add_cache_option, add_config_options, config_of
from cli.launch import launch
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import run_training_preflight
from ragbench.report.pages import rows_to_text
from ragbench.runs.names import TRAIN_RERANKER_PIPELINE


class TrainRerankerCommand(Command):
    name = "train-reranker"
    help = (
        "fine-tune a ColBERT reranker on questions written from the knowledge base (use it as "
        "reranker: trained:<name>)"
    )
    dry_run = "say what training would call and how long it may train; call nothing"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        add_cache_option(parser)

    def run(self, args: argparse.Namespace) -> int:
        config = config_of(args)
        return print_training_plan(config) if args.dry_run else run_train_reranker(config, not args.no_cache)


def print_training_plan(config: BenchmarkConfig) -> int:
    """What `train-reranker` would do, calling nothing."""
    training = config.reranker_training
    size, _ = config.section_chunking(training)
    model = training.generator_settings().model
    print(
        f"train-reranker {config.trained_reranker_name}: up to {training.chunks} call(s) of {model} writing "
        f"one question per chunk of {size} tokens (cached calls are free)"
        + (", plus an inverse-cloze question per chunk (no call)" if training.cloze else "")
        + f"; then at most {training.epochs} epoch(s) or {training.max_minutes:g} min of training on "
        f"{training.device}. Eval cases held out: those of {config.eval_cases.label}."
    )
    from ragbench.config.pipeline_plans import training_plan_rows

    rows = training_plan_rows(config)
    previous = previous_spend(config, TRAIN_RERANKER_PIPELINE)
    print(previous.line())
    print(expected_line(previous.plan(rows), "its summary shows them"))
    if (budget := budget_line(config, rows, TRAINING_KNOBS, previous.retry_rate)) is not None:
        print(budget)
    return dry_run_exit_code(config, rows, TRAINING_KNOBS, previous.retry_rate)


def training_preflight(
    config: BenchmarkConfig, *, step_environment: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`run_training_preflight`, then its plan (a question for every sampled chunk, the retries the config's
    previous training run measured included) against the budget; the plan is the pipeline's `planned`
    parameter."""
    from ragbench.config.pipeline_plans import training_plan_rows

    run_training_preflight(config, step_environment=step_environment)
    rows = training_plan_rows(config)
    previous = previous_spend(config, TRAIN_RERANKER_PIPELINE)
    refuse_over_budget(config, rows, TRAINING_KNOBS, previous.retry_rate)
    return {"planned": previous.plan(rows).as_metadata()}


def run_train_reranker(config: BenchmarkConfig, use_cache: bool) -> int:
    """Write questions, mine pairs and train; print what the checkpoint reached and how to use it."""
    from ragbench.models.trained import artifact_name
    from ragbench.runs.compare import config_tag

    pipeline_run = launch(
        TRAIN_RERANKER_PIPELINE, config, use_cache, training_preflight, [config_tag(config.name)]
    )
    name = config.trained_reranker_name
    artifact = pipeline_run.steps["train_reranker_checkpoint"].outputs[artifact_name(name)][0]
    summary = artifact.run_metadata
    rows = [{"field": key, "value": value} for key, value in summary.items() if key != "held_out_case_ids"]
    print(rows_to_text(rows))
    print(spend_text(pipeline_run))
    print(
        f"\nZenML artifact: {artifact_name(name)} version {artifact.version} ({summary.get('label')}); "
        f"{len(summary.get('held_out_case_ids', []))} eval case(s) held out of training.\n"
        f"Benchmark it: grid.reranker: [off, trained:{name}]  (or trained:{name}@{artifact.version})"
    )
    return 0
