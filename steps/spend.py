"""A run's spend inside a step: `step_spending(operations)` around the step's LLM and external-system calls.

Apart from `steps.caching` (which every step imports) so that only the steps that make calls depend on the
LLM code in their cache keys.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from ragbench.llm.budget import BudgetConfig, SpendAccount, SpendLedger, spending
from steps.caching import Operations, never_reuse_this_step_run

# The step metadata key of what a step sent (`Measured.as_metadata`); the results step sums it per role.
SPEND_KEY = "spend"


@contextmanager
def step_spending(settings: Operations) -> Iterator[SpendLedger]:
    """Inside: every LLM and external-system call of the step is charged to its run's account, kept in the
    LLM cache's store and named by the ZenML run's id (so every step of one run, wherever it runs, charges
    the same account, and each run, a scheduled one too, has its own). Kept with or without a cap, so every
    run measures what it sent: the step's own calls (retries included), tokens, cost and seconds in calls
    are logged as its `spend` metadata. A step whose calls the cap refused is incomplete: kept out of
    ZenML's cache, so a rerun with a higher cap makes it again, its finished calls served by the LLM
    cache."""
    from zenml import get_step_context, log_metadata

    budget = BudgetConfig.model_validate(settings.budget)
    run = str(get_step_context().pipeline_run.id)
    with spending(SpendAccount(account=run, store=settings.llm_cache, budget=budget)) as ledger:
        assert ledger is not None
        yield ledger
        log_metadata({SPEND_KEY: ledger.here.as_metadata()})
        if ledger.refused_here:
            log_metadata({"budget_refused_calls": ledger.refused_here})
            never_reuse_this_step_run()
