from typing import Annotated

from zenml import log_metadata, step

from ragbench.eval_cases import EvalSuite
from ragbench.grid import CellSpec
from ragbench.index import VectorIndex
from ragbench.retrieval import RetrievalResult, evaluate_retrieval
from steps.caching import step_cache_policy


@step(cache_policy=step_cache_policy(__name__))
def evaluate_retrieval_cell(
    index: VectorIndex, eval_suite: EvalSuite, spec: dict, metrics_k: int
) -> Annotated[RetrievalResult, "retrieval_result"]:
    """Retrieval metrics over every case with expected sources (not only the end-to-end sample)."""
    result = evaluate_retrieval(CellSpec.model_validate(spec), index, eval_suite.cases, metrics_k)
    log_metadata(result.columns())
    return result
