"""Pipeline wiring only: the benchmark's ingest, chunk, dense and BM25 index steps and its eval suite (the
same step ids and cache keys), then write questions, mine pairs, train. The steps are keyed on the
`reranker_training` section (`training_identity`); LLM concurrency, timeouts and retries, the LLM cache and
the device reach them in the `operations` artifact their cache keys ignore."""

from typing import Any

from zenml import pipeline

from materializers.inputs import EvalSuiteMaterializer
from pipelines.inputs import eval_cases_snapshot, knowledge_base_snapshot
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import CellSpec
from ragbench.models.trained import artifact_name
from ragbench.runs.names import TRAIN_RERANKER_PIPELINE
from steps import (
    build_bm25_index,
    build_vector_index,
    chunk_knowledge_base,
    ingest_knowledge_base,
    load_eval_suite,
    pass_llm_operations,
)
from steps.caching import Operations
from steps.train import (
    RERANKER_ARTIFACT,
    mine_training_pairs,
    train_reranker_checkpoint,
    write_training_questions,
)


def training_identity(settings: BenchmarkConfig) -> dict[str, Any]:
    """The section as the steps get it: every field that can change the checkpoint; the generator by the
    settings that can change its replies, its name and device apart (they change nothing learned)."""
    training = settings.reranker_training
    identity = training.model_dump(mode="json", exclude={"name", "generator", "generator_defaults", "device"})
    return identity | {"generator": training.generator_settings().result_fields(), "generator_defaults": {}}


def training_operations(settings: BenchmarkConfig) -> dict[str, Any]:
    generator = settings.reranker_training.generator_settings()
    return Operations(
        llm={generator.result_key: generator.operations()},
        llm_cache=settings.llm_cache,
        device=settings.embedding.device,
        shard_size=settings.embedding.shard_size,
    ).model_dump(mode="json")


@pipeline(name=TRAIN_RERANKER_PIPELINE)
def rag_train_reranker(config: dict):
    """`config` is a `BenchmarkConfig` as JSON; its `reranker_training` section says what to train."""
    settings = BenchmarkConfig.model_validate(config)
    size, overlap = settings.section_chunking(settings.reranker_training)
    key = CellSpec(
        chunk_size=size,
        chunk_overlap=overlap,
        embedding_model=settings.section_embedding_model(settings.reranker_training),
    )
    training = training_identity(settings)
    operations = pass_llm_operations(operations=training_operations(settings))
    corpus = ingest_knowledge_base(
        knowledge_base=settings.knowledge_base.model_dump(mode="json"),
        snapshot=knowledge_base_snapshot(settings),
    )
    chunks = chunk_knowledge_base(
        corpus,
        chunk_size=size,
        chunk_overlap=overlap,
        tokenizer=settings.chunking_tokenizer,
        id=key.step_id("chunk"),
    )
    index = build_vector_index(
        chunks, operations, embedding_model=key.embedding_model, id=key.step_id("index")
    )
    bm25 = build_bm25_index(chunks, id=key.lexical_step_id)
    eval_suite = load_eval_suite.with_options(output_materializers=EvalSuiteMaterializer)(
        eval_cases=settings.eval_cases.model_dump(mode="json"), snapshot=eval_cases_snapshot(settings)
    )
    questions = write_training_questions(chunks, operations, training=training)
    pairs = mine_training_pairs(
        questions,
        chunks,
        index,
        bm25,
        eval_suite,
        operations,
        training=training,
        knowledge_base=settings.knowledge_base.kind,
    )
    name = settings.trained_reranker_name
    train_reranker_checkpoint.with_options(substitutions={RERANKER_ARTIFACT: artifact_name(name)})(
        pairs, chunks, operations, training=training, name=name
    )
