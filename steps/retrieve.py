from typing import Annotated

from zenml import log_metadata, step

from ragbench.grid.cell import CellSpec
from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.retrieval.index import VectorIndex
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.retrieval.retrievers import SearchContext, retriever_from_identity
from ragbench.retrieval.rewrite import RewriteSetup, queries_for
from ragbench.retrieval.search import (
    RetrievalResult,
    RetrievedCandidates,
    evaluate_retrieval,
    retrieve_candidates,
)
from steps.caching import OPERATIONS, Operations, never_reuse_this_step_run, step_cache_policy


@step(cache_policy=step_cache_policy(__name__, ignored_inputs=(OPERATIONS,)))
def retrieve_cell(
    chunks: ChunkSet,
    eval_suite: EvalSuite,
    dense_index: VectorIndex | None,
    exact_index: VectorIndex | None,
    lexical_index: LexicalIndex | None,
    operations: dict,
    spec: dict,
    retriever: dict,
    metrics_k: int,
    rewrite: dict | None = None,
) -> tuple[Annotated[RetrievedCandidates, "candidates"], Annotated[RetrievalResult, "retrieval_result"]]:
    """Once per retrieve key: every case's candidates (read by every answer key after it) and the retrieval
    metrics over every case with expected sources (not only the end-to-end sample). `retriever`: the cell's
    retriever by its identity (`Plugin.identity`: its settings, e.g. a hybrid cell's rrf_k, and another
    package's code are in the cache key, and only its own); the device the questions are encoded on comes
    with the `operations`, outside the cache key. `rewrite`: the rewriter of a key that rewrites its queries
    (`RewriteSetup`: its result settings, in the cache key; its operations outside it); the rewritten
    queries are what is searched, recorded per case, and what the metrics measure."""
    cell = CellSpec.model_validate(spec)
    ops = Operations.model_validate(operations)
    queries, rewritten = queries_for(
        cell.query_rewrite,  # type: ignore[arg-type]
        eval_suite.cases,
        RewriteSetup.model_validate(rewrite) if rewrite is not None else None,
        ops.llm,
        llm_cache=ops.llm_cache,
        desc=f"rewrite {cell.id}",
    )
    context = SearchContext(
        chunks,
        dense=dense_index,
        exact=exact_index,
        lexical=lexical_index,
        device=ops.device,
    )
    candidates, search = retrieve_candidates(
        cell,
        retriever_from_identity(retriever),
        context,
        eval_suite.cases,
        queries,
        rrf_k=rewrite["rrf_k"] if rewrite is not None else 60,
    )
    result = evaluate_retrieval(
        candidates,
        search,
        eval_suite.cases,
        metrics_k,
        chunk_count=len(chunks.chunks),
        index=dense_index.manifest if dense_index else None,
        lexical=lexical_index.manifest if lexical_index else None,
        rewrite=rewritten,
    )
    log_metadata({key: value for key, value in result.columns().items() if value is not None})
    if rewritten is not None and rewritten.failures:
        never_reuse_this_step_run()  # the next run asks the failed rewrites again (the others are cached)
    return candidates, result
