"""What the store's earlier runs tell a benchmark's run plan (`ragbench.config.plan.EarlierRuns`), each
answer remembered beside a local store while it is provably unchanged (`cli.store_memo`), and filed again at
the end of a real run: the dry run then imports no ZenML. Kept apart from the benchmark command, which reads
`earlier_runs` and calls `remember_for_the_next_plan`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cli.budget import previous_spend
from cli.launch import give_store_on_use
from ragbench.config.model import BenchmarkConfig
from ragbench.runs.names import BENCHMARK_PIPELINE

if TYPE_CHECKING:
    from pipelines.options import StackEnvironment
    from ragbench.analysis.results import ResultsTable
    from ragbench.config.plan import EarlierRuns, PreviousSpend


def finished_steps(knowledge_base_fingerprint: str, eval_fingerprint: str, runs: int = 20) -> set[str]:
    """Step ids that recent runs on the same documents and eval cases finished (for the plan)."""
    from ragbench.store import given_store

    done: set[str] = set()
    for pipeline_run in given_store().runs(BENCHMARK_PIPELINE, size=runs):
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


def earlier_runs(use_cache: bool) -> EarlierRuns:
    """What the store's earlier runs tell the plan; none where ZenML never ran (`store_exists`). Each answer
    is the memo's while the store is provably unchanged since it was filed (`cli.store_memo`), else asked of
    the store, which is opened only then (or when the config reads something stored: an eval set, a trained
    reranker). With `--no-cache` no step is reused (every step is recomputed; the LLM cache still serves
    what it holds)."""
    from pipelines.options import store_exists
    from ragbench.config.plan import NO_EARLIER_RUNS, EarlierRuns

    give_store_on_use()
    if not store_exists():
        return NO_EARLIER_RUNS
    return EarlierRuns(
        finished_steps=remembered_finished_steps if use_cache else NO_EARLIER_RUNS.finished_steps,
        previous_spend=remembered_previous_spend,
        latest_results=remembered_latest_results,
    )


def remembered_finished_steps(knowledge_base_fingerprint: str, eval_fingerprint: str) -> set[str]:
    """`finished_steps`, remembered beside the store (`cli.store_memo.remembered`)."""
    from cli.store_memo import remembered

    return remembered(
        "finished_steps",
        f"{knowledge_base_fingerprint} {eval_fingerprint}",
        lambda: finished_steps(knowledge_base_fingerprint, eval_fingerprint),
        dump=sorted,
        load=set,
    )


def remembered_previous_spend(config: BenchmarkConfig) -> PreviousSpend:
    """`cli.budget.previous_spend` of the benchmark pipeline, remembered beside the store."""
    from cli.store_memo import remembered
    from ragbench.config.plan import PreviousSpend

    return remembered(
        "previous_spend",
        config.name,
        lambda: previous_spend(config),
        dump=lambda spend: spend.model_dump(mode="json"),
        load=PreviousSpend.model_validate,
    )


def remembered_latest_results(config_name: str) -> tuple[str, ResultsTable] | None:
    """`steps.history.latest_results`, remembered beside the store without its report page (the plan reads
    the table's verdicts, per-case values and label correction, never the page)."""
    from cli.store_memo import remembered

    def ask() -> tuple[str, ResultsTable] | None:
        from steps.history import latest_results

        return latest_results(config_name)

    def dump(found: tuple[str, ResultsTable] | None) -> Any:
        if found is None:
            return None
        name, table = found
        return {"run": name, "table": table.model_copy(update={"report_html": ""}).model_dump(mode="json")}

    def load(filed: Any) -> tuple[str, ResultsTable] | None:
        from ragbench.analysis.results import ResultsTable

        return None if filed is None else (filed["run"], ResultsTable.model_validate(filed["table"]))

    return remembered("latest_results", config_name, ask, dump=dump, load=load)


def remembered_stack_environment(config: BenchmarkConfig) -> StackEnvironment:
    """The active stack's `pipelines.options.StackEnvironment` for the config's named secrets, remembered
    beside the store (its values are placeholders already); a missing secret is asked every time."""
    from cli.store_memo import remembered
    from pipelines.options import StackEnvironment, stack_environment

    return remembered(
        "stack_environment",
        json.dumps(sorted(config.orchestration.secrets)),
        lambda: stack_environment(config),
        dump=lambda stack: stack._asdict(),
        load=lambda filed: StackEnvironment(**filed),
    )


def remember_for_the_next_plan(config: BenchmarkConfig, pipeline_run: Any) -> None:
    """At the end of a real run, file what the config's next dry run will ask (the store changed with the
    run, so every answer is asked anew here, with ZenML loaded already): the dry run then imports no ZenML."""
    metadata = pipeline_run.run_metadata
    fingerprints = (metadata.get("knowledge_base_fingerprint"), metadata.get("eval_fingerprint"))
    if None not in fingerprints:
        remembered_finished_steps(*fingerprints)
    remembered_previous_spend(config)
    remembered_latest_results(config.name)
    remembered_stack_environment(config)
