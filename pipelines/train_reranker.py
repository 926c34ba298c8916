"""Pipeline wiring only: the benchmark's ingest, chunk, dense and BM25 index steps and its eval suite (the
same step ids and cache keys), then write questions, mine pairs, train. The steps are keyed on the
`reranker_training` section (`training_identity`); LLM concurrency, timeouts and retries, the LLM cache and
the device reach them in the `operations` artifact their cache keys ignore."""

from typing import Any

from zenml import pipeline

from materializers.inputs import EvalSuiteMaterializer
from pipelines.inputs import eval_cases_snapshot
from pipelines.testset import indexed_chunks, llm_operations
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import CellSpec
from ragbench.models.trained import artifact_name
from ragbench.runs.names import TRAIN_RERANKER_PIPELINE
from steps import (
    build_bm25_index,
    load_eval_suite,
    pass_llm_operations,
    sum_run_spend,
)
from steps.identity import SectionIdentity
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


@pipeline(name=TRAIN_RERANKER_PIPELINE)
def rag_train_reranker(config: dict, planned: dict | None = None):
    """`config` is a `BenchmarkConfig` as JSON; its `reranker_training` section says what to train.
    `planned`: the CLI's plan of the run, beside which the never-cached last step sums what it spent."""
    settings = BenchmarkConfig.model_validate(config)
    size, overlap = settings.section_chunking(settings.reranker_training)
    key = CellSpec(
        chunk_size=size,
        chunk_overlap=overlap,
        embedding_model=settings.section_embedding_model(settings.reranker_training),
    )
    training = SectionIdentity(training_identity(settings))
    operations = pass_llm_operations(
        operations=llm_operations(settings, [settings.reranker_training.generator_settings()])
    )
    chunks, index = indexed_chunks(settings, key, operations)
    bm25 = build_bm25_index(chunks, id=key.lexical_step_id)
    eval_suite = load_eval_suite.with_options(output_materializers=EvalSuiteMaterializer)(
        eval_cases=settings.eval_cases, snapshot=eval_cases_snapshot(settings)
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
    sum_run_spend(planned=planned, after="train_reranker_checkpoint")  # after every step that calls a model
