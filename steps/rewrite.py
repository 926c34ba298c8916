from typing import Annotated

from zenml import log_metadata

from ragbench.inputs.eval_cases import EvalSuite
from ragbench.retrieval.rewrite import RewrittenQueries
from ragbench.retrieval.rewriter import RewriteSetup, rewrite_cases
from steps.caching import OPERATIONS, Operations, cached_step, never_reuse_this_step_run
from steps.spend import step_spending


@cached_step(ignored_inputs=(OPERATIONS,))
def rewrite_queries_step(
    eval_suite: EvalSuite, operations: Operations, mode: str, rewrite: RewriteSetup
) -> Annotated[RewrittenQueries, "queries"]:
    """Once per query_rewrite mode: every case's queries, read by every retrieve key of the mode (the
    search steps never call an LLM). `rewrite`: the rewriter's result settings and the query count
    (`RewriteSetup`, the cache key); its concurrency and retries come with the `operations`. A run with a
    failed rewrite is never reused, so the next run asks the failed ones again (the others are cached)."""
    with step_spending(operations):
        rewritten = rewrite_cases(
            mode,  # type: ignore[arg-type]
            eval_suite.cases,
            rewrite,
            operations.llm,
            llm_cache=operations.llm_cache,
        )
    log_metadata(rewritten.stats.model_dump(mode="json"))
    if rewritten.stats.failures:
        never_reuse_this_step_run()
    return rewritten
