"""`run` (the default command) and `race`: the benchmark pipeline, its dry run (the plan) and its report."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cli.budget import budget_line, expected_line, previous_spend, refuse_over_budget
from cli.command import (
    Command,
    RunStopped,
    add_cache_option,
    add_config_options,
    add_run_tag_option,
    config_of,
)
from cli.launch import check_output_dir, launch, open_store
from cli.outputs import write_outputs
from ragbench.analysis.judge_card import card_lines
from ragbench.config.model import BenchmarkConfig, ConfigError
from ragbench.config.preflight import Preflight, run_preflight
from ragbench.report.pages import rows_to_text
from ragbench.runs.names import BENCHMARK_PIPELINE, GATE_STEP, RESULTS_STEP
from ragbench.section import validation_message

if TYPE_CHECKING:
    from ragbench.analysis.results import ResultsTable

PLAN = (
    "list the cells with their LLM calls, tokens and cost, new or reused from earlier runs; call nothing, "
    "download nothing"
)


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


def finished_steps(knowledge_base_fingerprint: str, eval_fingerprint: str, runs: int = 20) -> set[str]:
    """Step ids that recent runs on the same documents and eval cases finished (for the dry run)."""
    from steps.store import ZenMLStore

    open_store()
    done: set[str] = set()
    for pipeline_run in ZenMLStore().runs(BENCHMARK_PIPELINE, size=runs):
        metadata = pipeline_run.run_metadata
        if (
            metadata.get("knowledge_base_fingerprint") == knowledge_base_fingerprint
            and metadata.get("eval_fingerprint") == eval_fingerprint
        ):
            done |= {
                name
                for name, step in pipeline_run.steps.items()
                if step.status.value in ("completed", "cached")
            }
    return done


def reusable_steps(preflight: Preflight, use_cache: bool) -> set[str]:
    """The steps a run may take from earlier runs, which its plan does not count: none with `--no-cache`,
    which recomputes every step (the LLM cache still serves what it holds)."""
    if not use_cache:
        return set()
    return finished_steps(preflight.knowledge_base_fingerprint, preflight.eval_suite.fingerprint)


def benchmark_preflight(
    config: BenchmarkConfig, *, step_environment: Mapping[str, str] | None = None, use_cache: bool = True
) -> dict[str, Any]:
    """The run's checks; then, with `statistics.detect`, what the run can decide (the dry run's lines), so
    a sample that cannot detect that difference says so before anything is spent; and the plan, the
    retries the previous run measured included, refused when over the budget (it needs the eval cases the
    checks read and the steps earlier runs finished, which cost nothing). The plan is the pipeline's
    `planned` parameter: the report shows it beside what the run spent."""
    from ragbench.config.dry_run import calls_beside_the_rows, detection_lines, plan_rows
    from steps.history import latest_results

    preflight = run_preflight(config, step_environment=step_environment)
    if config.statistics.detect is not None:
        for line in detection_lines(config, preflight.eval_suite.cases, latest_results(config.name)):
            print(line)
    done = reusable_steps(preflight, use_cache)
    rows = plan_rows(config, preflight.eval_suite.cases, done)
    previous = previous_spend(config)
    beside = calls_beside_the_rows(config, preflight.eval_suite.cases)
    refuse_over_budget(config, rows, retry_rate=previous.retry_rate, beside=beside)
    return {"planned": previous.plan(rows).as_metadata()}


def print_plan(config: BenchmarkConfig, use_cache: bool = True) -> int:
    """The dry run: every check that needs no model, key or server (config, knowledge base, eval cases,
    index parameters, model names this machine can resolve, docker settings, named secrets, the output
    folder), then the plan; what only a real run can check is listed, never passed over in silence."""
    from pipelines.options import run_options, step_environment
    from ragbench.config.dry_run import (
        ANSWER_ASSUMPTION,
        calls_beside_the_rows,
        detection_lines,
        judge_alignment_calls,
        judge_card_calls,
        label_correction_line,
        plan_rows,
        reference_calls,
        rerank_work,
    )
    from ragbench.config.expand import expand_grid
    from ragbench.retrieval.rerank import resolve_reranker
    from steps.history import latest_results

    open_store()
    run_options(config)  # a typo in orchestration.docker fails here
    preflight = run_preflight(config, plan_only=True, step_environment=step_environment(config))
    check_output_dir(config)
    rerankers = {
        name: resolve_reranker(name)
        for name in dict.fromkeys(c.reranker for c in expand_grid(config) if c.reranker)
    }
    done = reusable_steps(preflight, use_cache)
    rows = plan_rows(config, preflight.eval_suite.cases, done, rerankers)
    print(rows_to_text(rows))  # preflight has logged its warnings (size estimate included) above
    for choice in rerankers.values():
        if choice.is_standin:
            print(f"\nRERANKER: the UNTRAINED stand-in ({choice.label}) would run for {choice.requested}")
    if preflight.unchecked:
        print("\nChecked only by a real run:\n" + "\n".join(f"  - {item}" for item in preflight.unchecked))
    new = sum(row["status"] == "new" for row in rows)
    total_calls = sum(row["llm_calls"] for row in rows)
    costs = [row["cost_usd"] for row in rows]
    cost = "unknown (a model litellm cannot price)" if None in costs else f"${sum(costs):.4f}"
    print(
        f"\n{len(rows)} cells: {new} new, {len(rows) - new} reused from earlier runs on the same documents "
        f"and eval cases (unless code changed since). New LLM calls: {total_calls}, cost {cost}; "
        f"{ANSWER_ASSUMPTION}."
    )
    if (reranking := rerank_work(config, preflight.eval_suite.cases, done)) is not None:
        print(reranking)
    if (card_calls := judge_card_calls(config, preflight.eval_suite.cases)) is not None:
        print(card_calls)
    if (alignment_calls := judge_alignment_calls(config)) is not None:
        print(alignment_calls)
    if (correction := label_correction_line(config)) is not None:
        print(correction)
    if (fetched := reference_calls(config, preflight.eval_suite.cases)) is not None:
        print(fetched)
    for line in detection_lines(config, preflight.eval_suite.cases, latest_results(config.name)):
        print(line)
    previous = previous_spend(config)
    print(previous.line())
    print(expected_line(previous.plan(rows)))
    beside = calls_beside_the_rows(config, preflight.eval_suite.cases)
    if (budget := budget_line(config, rows, retry_rate=previous.retry_rate, beside=beside)) is not None:
        print(budget)
    if (search := config.search) is not None:
        cases = len(preflight.eval_suite.cases)
        most = min(cases, search.max_cases or config.generation.sample_size or cases)
        print(
            f"The cells race on {search.metric} in rounds of {search.batch} cases, at most {most}: the calls "
            "above are what every cell answering the fixed sample would make; the race stops the cells "
            "significantly behind after each round, and its report says how many calls it used."
        )
    return 0


def run_benchmark(config: BenchmarkConfig, use_cache: bool) -> int:
    """Run the pipeline, copy its report to the output folder and print its summary; the gate's exit code."""
    from ragbench.report.corrected import label_correction_lines
    from ragbench.report.run_page import summary_rows
    from ragbench.runs.compare import config_tag
    from ragbench.runs.gate import GateResult

    tags = [config_tag(config.name), *config.tags]
    function = "rag_race" if config.search is not None else None
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
        "gate.html": gate.html(),
        **({"case_types.csv": table.case_type_csv()} if table.case_type_rows else {}),
    }
    folder = write_outputs(config, pipeline_run.name, files)
    print()
    print(rows_to_text(summary_rows(table)))
    print(f"(all columns: {folder}/results.csv)")
    if table.race is not None:
        print("\n" + table.race.summary({row["cell"]: row["label"] for row in table.rows}))
    if table.verdicts:
        print(
            "\nIs the best really better? (paired tests on the same cases, Holm-corrected; intervals "
            f"adjusted for the number of comparisons, then the unadjusted {table.confidence:.0%} one)"
        )
        for verdict in table.verdicts:
            print(f"  {verdict.sentence()}")
    names = {row["cell"]: row["label"] for row in table.rows}
    for line in label_correction_lines(table.label_correction, table.configured_metrics, names):
        print(line)
    if table.rerank_gains:
        labels = {row["cell"]: row["label"] for row in table.rows}
        print(
            "\nWhat reranking changed (the ranking the reader reads against the first stage, paired on the "
            f"same cases; {table.confidence:.0%} interval of the difference):"
        )
        for gain in table.rerank_gains:
            print(f"  {labels[gain.cell]}: {gain.text()}")
    if table.rewrite_gains:
        labels = {row["cell"]: row["label"] for row in table.rows}
        print(
            "\nWhat query rewriting changed (each rewriting cell against the same cell searching the "
            f"question as asked, paired on the same cases; {table.confidence:.0%} interval of the "
            "difference):"
        )
        for rewrite in table.rewrite_gains:
            print(f"  {labels[rewrite.cell]}: {rewrite.text()}")
    if table.judge_reliability is not None:
        for line in table.judge_reliability.lines():
            print(line)
    for card in table.judge_cards:
        print("\n" + "\n".join(card_lines(card)))
    for alignment in table.judge_alignments:
        print("\n" + "\n".join(alignment.lines()))
    for comparison in table.pairwise:
        print(comparison.text())
    for note in table.notes:
        print(note)
    for warning in table.warnings:
        print(f"WARNING: {warning}")
    print(f"\n{gate.text()}")
    print(f"\nZenML run: {pipeline_run.name}  report: {folder}/results.html  gate: {folder}/gate.html")
    if gate.status == "incomplete":
        raise RunStopped(
            "; ".join(table.incomplete.values()) + ". Their steps are not cached: run again to retry only "
            "the failed calls."
        )
    return gate.exit_code
