from typing import Annotated

from zenml import log_metadata

from ragbench.inputs.eval_cases import EvalSuite
from ragbench.retrieval.colbert_maxsim import ColbertEncodings, PrecomputedColbertReranker
from ragbench.retrieval.rerank_stage import RerankResult, rerank_stage
from ragbench.retrieval.search import RetrievedCandidates
from steps.caching import cached_step
from steps.identity import CellIdentity


@cached_step()
def rerank_cell(
    candidates: RetrievedCandidates,
    eval_suite: EvalSuite,
    encodings: ColbertEncodings,
    spec: CellIdentity,
    metrics_k: int,
) -> tuple[Annotated[RetrievedCandidates, "candidates"], Annotated[RerankResult, "rerank_result"]]:
    """Once per rerank key (a retrieve key and a reranker): every case's candidates reranked against the
    chunks' stored ColBERT encodings, read by every answer key after it (each top_n, reader, prompt), and
    the reranked ranking's metrics over every case with expected sources. Its cache key is the retrieve
    step's output, the eval cases, the encodings (the checkpoint really used and the chunk set) and the rerank
    key, so a run that changes only what comes after it (top_n, reader, prompt, judge) reranks nothing."""
    reranker = PrecomputedColbertReranker(
        encodings, choice=encodings.choice, chunk_set_fingerprint=candidates.chunk_set_fingerprint
    )
    reranked, result = rerank_stage(
        candidates,
        eval_suite.cases,
        reranker,
        encodings.choice,
        spec=spec.cell(),
        metrics_k=metrics_k,
    )
    log_metadata(
        {
            "reranker": encodings.choice.label,
            "cases": result.cases,
            "ms_per_query": result.ms_per_query,
            **result.retrieval.metrics.means,
        }
    )
    return reranked, result
