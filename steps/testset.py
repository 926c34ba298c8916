"""The eval-set pipeline's own steps; ingest, chunk and index are the benchmark's, and so is their cache.

Each gets the `testset` section as its cache-keyed identity (`pipelines.testset.testset_identity`: the LLMs
by their result settings) and the `operations` outside the key: the LLMs' concurrency, timeouts and
retries, the LLM cache, and the device questions are embedded on."""

from typing import Annotated

from pydantic import BaseModel
from zenml import ArtifactConfig, log_metadata

from materializers.eval_set import EvalSetMaterializer
from ragbench.inputs.chunking import ChunkSet
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.retrieval.index import VectorIndex, load_embedder
from ragbench.testset.assemble import EvalSet, build_eval_set
from ragbench.testset.critique import (
    CritiqueSet,
    critique_candidates,
    reads_search,
    search_whole_knowledge_base,
)
from ragbench.testset.generate import CandidateSet, generate_candidates
from ragbench.testset.labels import CandidateLabel
from ragbench.testset.plan import plan_for
from ragbench.testset.roundtrip import RoundtripSet, roundtrip_filter
from ragbench.testset.rubrics import thresholds_with_defaults
from ragbench.testset.settings import TestsetConfig
from steps.caching import OPERATIONS, Operations, cached_step, never_reuse_this_step_run
from steps.identity import SectionIdentity
from steps.spend import step_spending

EVAL_SET_NAME = "eval_set_name"  # the substitution that names the eval set artifact


class GivenLabels(BaseModel):
    """A person's verdicts on candidates (testset.labels): data the assembled set reports on."""

    labels: list[CandidateLabel]


def _operated(llm: LLMSettings, operations: Operations) -> LLMSettings:
    """`llm` with its concurrency, timeouts and retries put back."""
    return llm.model_copy(update=operations.llm.get(llm.result_key, {}))


@cached_step(ignored_inputs=(OPERATIONS,))
def generate_eval_candidates(
    chunks: ChunkSet, index: VectorIndex, operations: Operations, testset: SectionIdentity
) -> Annotated[CandidateSet, "candidates"]:
    """Sample chunks, plan each one's kind, and have the generator write the questions and answers."""
    settings = testset.section(TestsetConfig)
    index.check_matches(chunks)
    seeds = plan_for(settings, chunks.chunks, index.vectors())
    with (
        step_spending(operations),
        LLMClient(
            _operated(settings.generator_settings(), operations), cache_location=operations.llm_cache
        ) as client,
    ):
        candidates = generate_candidates(
            client, seeds, audience=settings.audience, questions=settings.questions_per_chunk
        )
    log_metadata({"seeds": len(seeds), "generator_failures": candidates.failures})
    if candidates.failures:
        never_reuse_this_step_run()
    return candidates


@cached_step(ignored_inputs=(OPERATIONS,))
def critique_eval_candidates(
    candidates: CandidateSet,
    chunks: ChunkSet,
    index: VectorIndex,
    operations: Operations,
    testset: SectionIdentity,
) -> Annotated[CritiqueSet, "critiques"]:
    """Every critic that applies rates every candidate; unanswerable ones against a whole-KB search."""
    settings = testset.section(TestsetConfig)
    embedder = load_embedder(index.manifest.embedding_model, operations.device)
    searched = [candidate for candidate in candidates.candidates if reads_search(candidate)]
    retrieved = search_whole_knowledge_base(index, chunks, embedder, searched, settings.retrieved_passages)
    with (
        step_spending(operations),
        LLMClient(
            _operated(settings.critic_settings(), operations), cache_location=operations.llm_cache
        ) as client,
    ):
        critiques = critique_candidates(client, candidates, retrieved, audience=settings.audience)
    log_metadata({"critic_failures": critiques.failures})
    if critiques.failures:
        never_reuse_this_step_run()
    return critiques


@cached_step(ignored_inputs=(OPERATIONS,))
def roundtrip_eval_candidates(
    candidates: CandidateSet,
    chunks: ChunkSet,
    index: VectorIndex,
    operations: Operations,
    testset: SectionIdentity,
) -> Annotated[RoundtripSet, "roundtrip"]:
    """The critic model answers every question back as a reader, from its source and from a search of
    the whole knowledge base; a case is kept when both answers agree with the proposed one."""
    settings = testset.section(TestsetConfig)
    embedder = load_embedder(index.manifest.embedding_model, operations.device)
    retrieved = search_whole_knowledge_base(
        index, chunks, embedder, candidates.candidates, settings.retrieved_passages
    )
    with (
        step_spending(operations),
        LLMClient(
            _operated(settings.critic_settings(), operations), cache_location=operations.llm_cache
        ) as client,
    ):
        checked = roundtrip_filter(
            client,
            candidates,
            retrieved,
            f1_threshold=settings.roundtrip_f1,
            short_answer_tokens=settings.roundtrip_short_answer_tokens,
        )
    log_metadata({"roundtrip_failures": checked.failures})
    if checked.failures:
        never_reuse_this_step_run()
    return checked


@cached_step(ignored_inputs=(OPERATIONS,), output_materializers=EvalSetMaterializer)
def assemble_eval_set(
    candidates: CandidateSet,
    critiques: CritiqueSet | None,
    roundtrip: RoundtripSet | None,
    chunks: ChunkSet,
    index: VectorIndex,
    operations: Operations,
    testset: SectionIdentity,
    name: str,
    labels: GivenLabels,
) -> Annotated[EvalSet, ArtifactConfig(name=f"{{{EVAL_SET_NAME}}}")]:
    """Keep what passes every filter, drop near-duplicates; a new version of the named eval set artifact.
    `labels`: a person's verdicts on candidates (testset.labels), to measure the filters against."""
    settings = testset.section(TestsetConfig)
    embedder = load_embedder(index.manifest.embedding_model, operations.device)
    eval_set = build_eval_set(
        name,
        candidates,
        critiques,
        roundtrip,
        thresholds=thresholds_with_defaults(settings.thresholds),
        corpus_texts=chunks.texts,
        embed=embedder.encode_queries,
        duplicate_similarity=settings.duplicate_similarity,
        max_good_words=settings.max_good_words,
        labels={label.id: label for label in labels.labels},
    )
    log_metadata(eval_set.summary, infer_artifact=True)
    return eval_set
