"""Pipeline wiring only: the grid is expanded statically, one readable step id per cell."""

from zenml import pipeline

from ragbench.config import BenchmarkConfig
from ragbench.results import cell_id, full_cell_id
from steps import (
    answer_questions_cell,
    build_results_table,
    build_vector_index,
    chunk_knowledge_base,
    evaluate_answers_cell,
    evaluate_retrieval_cell,
    ingest_knowledge_base,
    load_eval_suite,
)


@pipeline(name="rag_benchmark")
def rag_benchmark(
    config: dict,
    knowledge_base_fingerprint: str,
    eval_cases: list[dict],
    eval_fingerprint: str,
    reranker: dict | None,
    notes: list[str],
    warnings: list[str],
):
    """`reranker` is the checkpoint run.py resolved (possibly the labelled stand-in), or None."""
    settings = BenchmarkConfig.model_validate(config)
    generation, evaluation = settings.generation, settings.evaluation
    corpus = ingest_knowledge_base(
        knowledge_base=settings.knowledge_base.model_dump(), fingerprint=knowledge_base_fingerprint
    )
    suite = load_eval_suite(cases=eval_cases, fingerprint=eval_fingerprint)
    retrieval_results, answer_sets, answer_evaluations = [], [], []
    for chunk_size in settings.grid.chunk_sizes:
        chunks = chunk_knowledge_base(
            corpus,
            chunk_size=chunk_size,
            chunk_overlap=settings.chunking.overlap_for(chunk_size),
            tokenizer=settings.chunking_tokenizer,
            id=f"chunk_cs{chunk_size}",
        )
        for embedding_model in settings.grid.embedding_models:
            pair = cell_id(chunk_size, embedding_model)
            index = build_vector_index(chunks, embedding_model=embedding_model, id=f"index_{pair}")
            retrieval_results.append(
                evaluate_retrieval_cell(
                    index,
                    suite,
                    cell=pair,
                    top_k=settings.retrieval.top_k,
                    metrics_k=settings.retrieval.metrics_k,
                    id=f"evaluate_{pair}",
                )
            )
            for rerank in settings.grid.rerank:
                for reader in settings.grid.readers:
                    cell = full_cell_id(chunk_size, embedding_model, rerank, reader)
                    answers = answer_questions_cell(
                        index,
                        suite,
                        cell=cell,
                        reader=generation.reader_settings(reader).model_dump(mode="json"),
                        reranker=reranker if rerank else None,
                        top_k=settings.retrieval.top_k,
                        top_n=generation.top_n,
                        sample_size=generation.sample_size,
                        seed=generation.seed,
                        llm_cache_dir=settings.llm_cache_dir,
                        id=f"answer_{cell}",
                    )
                    answer_sets.append(answers)
                    answer_evaluations.append(
                        evaluate_answers_cell(
                            answers,
                            suite,
                            keyword_tests=evaluation.keyword_tests,
                            judge=evaluation.judge.model_dump(mode="json") if evaluation.judge else None,
                            rubrics=list(evaluation.rubrics),
                            llm_cache_dir=settings.llm_cache_dir,
                            id=f"judge_{cell}",
                        )
                    )
    build_results_table(
        retrieval_results,
        answer_sets,
        answer_evaluations,
        title=f"RAG benchmark: {settings.name}",
        notes=notes,
        warnings=warnings,
    )
