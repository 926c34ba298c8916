"""Pipeline wiring only: the grid is expanded statically, one readable step id per cell."""

from zenml import pipeline

from ragbench.config import BenchmarkConfig
from ragbench.results import cell_id
from steps import (
    build_results_table,
    build_vector_index,
    chunk_knowledge_base,
    evaluate_retrieval_cell,
    ingest_knowledge_base,
    load_eval_suite,
)


@pipeline(name="rag_benchmark")
def rag_benchmark(
    config: dict, knowledge_base_fingerprint: str, eval_cases: list[dict], eval_fingerprint: str
):
    settings = BenchmarkConfig.model_validate(config)
    corpus = ingest_knowledge_base(
        knowledge_base=settings.knowledge_base.model_dump(), fingerprint=knowledge_base_fingerprint
    )
    suite = load_eval_suite(cases=eval_cases, fingerprint=eval_fingerprint)
    cell_results = []
    for chunk_size in settings.grid.chunk_sizes:
        chunks = chunk_knowledge_base(
            corpus,
            chunk_size=chunk_size,
            chunk_overlap=settings.chunking.overlap_for(chunk_size),
            tokenizer=settings.chunking_tokenizer,
            id=f"chunk_cs{chunk_size}",
        )
        for embedding_model in settings.grid.embedding_models:
            cell = cell_id(chunk_size, embedding_model)
            index = build_vector_index(chunks, embedding_model=embedding_model, id=f"index_{cell}")
            cell_results.append(
                evaluate_retrieval_cell(
                    index,
                    suite,
                    cell=cell,
                    top_k=settings.retrieval.top_k,
                    metrics_k=settings.retrieval.metrics_k,
                    id=f"evaluate_{cell}",
                )
            )
    build_results_table(cell_results, title=f"RAG benchmark: {settings.name}")
