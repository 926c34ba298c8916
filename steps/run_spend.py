"""A run's spend summed per role over its steps' `spend` metadata (`steps.spend`), beside the plan it started
with: by the benchmark's results step, and by `sum_run_spend`, the last step of the pipelines that have
none. Apart from `steps.spend`, so that the steps making calls do not depend on the summing in their cache
keys."""

from zenml import get_step_context, log_metadata, step

from ragbench.analysis.spend import RunSpend, run_spend
from ragbench.llm.budget import PlannedSpend
from steps.spend import SPEND_KEY
from steps.store import this_run


def spent_this_run(planned: PlannedSpend | None) -> RunSpend:
    """What this run's steps sent, from their `spend` metadata; a step served from ZenML's cache sent nothing
    this run, whatever its original run's metadata says."""
    steps = this_run().steps.items()
    return run_spend(
        (
            (name, None if run.status.value == "cached" else run.run_metadata.get(SPEND_KEY))
            for name, run in steps
        ),
        planned.model_dump(mode="json") if planned is not None else None,
    )


@step(enable_cache=False)
def sum_run_spend(planned: PlannedSpend | None = None) -> None:
    """The last step of the pipelines without a results step (testset, train-reranker), run after every
    step that calls a model: the run's spend per role beside its plan (`planned`, the CLI's), as the run's
    `spend` metadata, which the CLI prints and the next dry run expects from. Never cached: it reads
    this run's steps."""
    spend = spent_this_run(planned)
    log_metadata({SPEND_KEY: spend.as_metadata()}, run_id_name_or_prefix=get_step_context().pipeline_run.id)
