from typing import Annotated

from zenml import log_metadata

from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.retrieval.index import VectorIndex
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.retrieval.retrievers import SearchContext, retriever_from_identity
from ragbench.retrieval.rewrite import RewrittenQueries
from ragbench.retrieval.search import (
    RetrievalResult,
    RetrievedCandidates,
    evaluate_retrieval,
    retrieve_candidates,
)
from steps.caching import OPERATIONS, Operations, cached_step
from steps.identity import CellIdentity, PluginIdentity


@cached_step(ignored_inputs=(OPERATIONS,))
def retrieve_cell(
    chunks: ChunkSet,
    eval_suite: EvalSuite,
    dense_index: VectorIndex | None,
    exact_index: VectorIndex | None,
    lexical_index: LexicalIndex | None,
    operations: Operations,
    spec: CellIdentity,
    retriever: PluginIdentity,
    metrics_k: int,
    queries: RewrittenQueries | None = None,
    fusion_k: int = 60,
) -> tuple[Annotated[RetrievedCandidates, "candidates"], Annotated[RetrievalResult, "retrieval_result"]]:
    """Once per retrieve key: every case's candidates (read by every answer key after it) and the retrieval
    metrics over every case with expected sources (not only the end-to-end sample). `retriever`: the cell's
    retriever by its identity (`Plugin.identity`: its settings, e.g. a hybrid cell's rrf_k, and another
    package's code are in the cache key, and only its own); the device the questions are encoded on comes
    with the `operations`, outside the cache key. `queries`: a rewriting key's queries, from its mode's
    rewrite step (`steps.rewrite`): what is searched, recorded per case, and what the metrics measure;
    `fusion_k`: the reciprocal-rank fusion's k for several queries of a case (multi_query)."""
    key = spec.cell()
    if queries is not None and queries.mode != key.query_rewrite:
        raise ValueError(f"queries of rewrite {queries.mode} given to retrieve key {spec.root}")
    context = SearchContext(
        chunks,
        dense=dense_index,
        exact=exact_index,
        lexical=lexical_index,
        device=operations.device,
    )
    candidates, search = retrieve_candidates(
        key,
        retriever_from_identity(retriever.root),
        context,
        eval_suite.cases,
        queries.queries if queries is not None else None,
        rrf_k=fusion_k,
    )
    result = evaluate_retrieval(
        candidates,
        search,
        eval_suite.cases,
        metrics_k,
        chunk_count=len(chunks.chunks),
        index=dense_index.manifest if dense_index else None,
        lexical=lexical_index.manifest if lexical_index else None,
        rewrite=queries.stats if queries is not None else None,
    )
    log_metadata({key: value for key, value in result.columns().items() if value is not None})
    return candidates, result
