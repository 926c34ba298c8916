"""Pipeline wiring only: the benchmark's ingest, chunk and index steps (the same step ids and cache
keys, so chunks and an index a benchmark run made are reused), then generate, critique, assemble."""

from zenml import pipeline

from pipelines.inputs import knowledge_base_snapshot
from ragbench.config import BenchmarkConfig
from ragbench.grid import CellSpec
from ragbench.pipeline_names import TESTSET_PIPELINE
from ragbench.testset.labels import load_labels
from steps import (
    assemble_eval_set,
    build_vector_index,
    chunk_knowledge_base,
    critique_eval_candidates,
    generate_eval_candidates,
    ingest_knowledge_base,
    roundtrip_eval_candidates,
)
from steps.testset import EVAL_SET_NAME


@pipeline(name=TESTSET_PIPELINE)
def rag_testset(config: dict):
    """`config` is a `BenchmarkConfig` as JSON; its `testset` section says what to generate."""
    settings = BenchmarkConfig.model_validate(config)
    size, overlap = settings.testset_chunking()
    key = CellSpec(chunk_size=size, chunk_overlap=overlap, embedding_model=settings.testset_embedding_model)
    # the labels only measure the filters: they are no part of what generates or filters the cases
    testset = settings.testset.model_dump(mode="json", exclude={"labels"})
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
        chunks,
        embedding_model=key.embedding_model,
        shard_size=settings.embedding.shard_size,
        device=settings.embedding.device,
        id=key.step_id("index"),
    )
    candidates = generate_eval_candidates(chunks, index, testset=testset, llm_cache=settings.llm_cache)
    filters = settings.testset.filters
    critiques = (
        critique_eval_candidates(candidates, chunks, index, testset=testset, llm_cache=settings.llm_cache)
        if "critics" in filters
        else None
    )
    roundtrip = (
        roundtrip_eval_candidates(candidates, chunks, index, testset=testset, llm_cache=settings.llm_cache)
        if "roundtrip" in filters
        else None
    )
    labels = load_labels(settings.testset.labels) if settings.testset.labels else {}
    assemble_eval_set.with_options(substitutions={EVAL_SET_NAME: settings.eval_set_name})(
        candidates,
        critiques,
        roundtrip,
        chunks,
        index,
        testset=testset,
        name=settings.eval_set_name,
        labels=[label.model_dump(mode="json") for label in labels.values()],
    )
