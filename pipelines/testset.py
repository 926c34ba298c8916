"""Pipeline wiring only: the benchmark's ingest, chunk and index steps (the same step ids and cache
keys, so chunks and an index a benchmark run made are reused), then generate, critique, assemble.

The steps are keyed on what can change the eval set (`testset_identity`); the LLMs' concurrency, timeouts
and retries, the LLM cache's location and the embedding shard size and device reach them in the
`operations` artifact their cache keys ignore (`testset_operations`)."""

from collections.abc import Sequence
from typing import Any

from zenml import pipeline

from pipelines.inputs import knowledge_base_snapshot
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import CellSpec
from ragbench.llm.types import LLMSettings
from ragbench.runs.names import TESTSET_PIPELINE
from ragbench.testset.labels import load_labels
from steps import (
    assemble_eval_set,
    build_vector_index,
    chunk_knowledge_base,
    critique_eval_candidates,
    generate_eval_candidates,
    ingest_knowledge_base,
    pass_llm_operations,
    roundtrip_eval_candidates,
    sum_run_spend,
)
from steps.caching import Operations
from steps.identity import SectionIdentity
from steps.testset import EVAL_SET_NAME, GivenLabels


def testset_identity(settings: BenchmarkConfig) -> dict[str, Any]:
    """The `testset` section as the testset steps get it (a cache-keyed parameter): every field that can
    change which cases are written, rated and kept. The generator and the critic are given by the settings
    that can change their replies (`LLMSettings.result_fields`), their role defaults merged in; not given:
    their concurrency, timeouts and retries (`testset_operations`), the eval set's name (the assemble step
    gets it apart) and the labels (they only measure the filters)."""
    testset = settings.testset
    identity = testset.model_dump(
        mode="json",
        exclude={"labels", "name", "generator", "critic", "generator_defaults", "critic_defaults"},
    )
    return identity | {
        "generator": testset.generator_settings().result_fields(),
        "critic": testset.critic_settings().result_fields(),
        "generator_defaults": {},
        "critic_defaults": {},
    }


def llm_operations(settings: BenchmarkConfig, llms: Sequence[LLMSettings]) -> Operations:
    """The `operations` artifact of a run whose steps call `llms` (see `steps.caching.Operations`). Should two
    be the same model with the same result settings, the last one's operations apply to both."""
    return Operations(
        llm={llm.result_key: llm.operations() for llm in llms},
        llm_cache=settings.llm_cache,
        device=settings.embedding.device,
        shard_size=settings.embedding.shard_size,
        budget=settings.budget.model_dump(mode="json"),
    )


def testset_operations(settings: BenchmarkConfig) -> Operations:
    return llm_operations(
        settings, [settings.testset.generator_settings(), settings.testset.critic_settings()]
    )


def indexed_chunks(settings: BenchmarkConfig, key: CellSpec, operations: Any) -> tuple[Any, Any]:
    """The benchmark's ingest, chunk and dense index steps for `key` (same ids, so the same cache)."""
    corpus = ingest_knowledge_base(
        knowledge_base=settings.knowledge_base,
        snapshot=knowledge_base_snapshot(settings),
    )
    chunks = chunk_knowledge_base(
        corpus,
        chunk_size=key.chunk_size,
        chunk_overlap=key.chunk_overlap,
        tokenizer=settings.chunking_tokenizer,
        id=key.step_id("chunk"),
    )
    index = build_vector_index(
        chunks, operations, embedding_model=key.embedding_model, id=key.step_id("index")
    )
    return chunks, index


@pipeline(name=TESTSET_PIPELINE)
def rag_testset(config: dict, planned: dict | None = None):
    """`config` is a `BenchmarkConfig` as JSON; its `testset` section says what to generate. `planned`: the
    CLI's plan of the run (`PlannedSpend`), read only by the never-cached last step, which sums what the
    run spent beside it."""
    settings = BenchmarkConfig.model_validate(config)
    size, overlap = settings.section_chunking(settings.testset)
    key = CellSpec(
        chunk_size=size,
        chunk_overlap=overlap,
        embedding_model=settings.section_embedding_model(settings.testset),
    )
    testset = SectionIdentity(testset_identity(settings))
    operations = pass_llm_operations(operations=testset_operations(settings))
    chunks, index = indexed_chunks(settings, key, operations)
    candidates = generate_eval_candidates(chunks, index, operations, testset=testset)
    filters = settings.testset.filters
    critiques = (
        critique_eval_candidates(candidates, chunks, index, operations, testset=testset)
        if "critics" in filters
        else None
    )
    roundtrip = (
        roundtrip_eval_candidates(candidates, chunks, index, operations, testset=testset)
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
        operations,
        testset=testset,
        name=settings.eval_set_name,
        labels=GivenLabels(labels=list(labels.values())),
    )
    sum_run_spend(planned=planned, after="assemble_eval_set")  # after every step that calls a model
