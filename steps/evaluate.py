from typing import Annotated

from zenml import log_metadata, step

import ragbench.results
import ragbench.retrieval
from ragbench.eval_cases import EvalSuite
from ragbench.index import VectorIndex, load_embedder
from ragbench.results import CellResult
from ragbench.retrieval import retrieval_metrics, retrieve
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.retrieval, ragbench.results))
def evaluate_retrieval_cell(
    index: VectorIndex, eval_suite: EvalSuite, cell: str, top_k: int, metrics_k: int
) -> Annotated[CellResult, "cell_result"]:
    cases = [case for case in eval_suite.cases if case.expected_sources]
    embedder = load_embedder(index.manifest.embedding_model)
    retrieved = retrieve(index, embedder, [case.question for case in cases], top_k)
    report = retrieval_metrics(cases, retrieved, metrics_k=metrics_k, top_k=top_k)
    result = CellResult(cell_id=cell, index=index.manifest, retrieval=report)
    log_metadata(result.row())
    return result
