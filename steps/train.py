"""The reranker-training pipeline's own steps; ingest, chunk, both indexes and the eval suite are the
benchmark's (the same cache). Each gets the `reranker_training` section as its cache-keyed identity and the
`operations` (LLM concurrency, timeouts, retries, LLM cache, device) outside the key."""

import shutil
from pathlib import Path
from tempfile import mkdtemp
from typing import Annotated

from zenml import ArtifactConfig, log_metadata

from materializers.trained_reranker import HANDOVER_PREFIX, TrainedRerankerMaterializer
from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.llm.client import LLMClient
from ragbench.models.devices import torch_device
from ragbench.models.provision import resolve_model
from ragbench.models.registry import COLBERT_STANDIN_NAME
from ragbench.models.trained import TrainedReranker
from ragbench.retrieval.index import VectorIndex, load_embedder
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.training.colbert import train_colbert
from ragbench.training.pairs import TrainingPairs
from ragbench.training.prepare import training_pairs, training_questions
from ragbench.training.questions import TrainingQuestions
from ragbench.training.settings import RerankerTrainingConfig
from steps.caching import OPERATIONS, Operations, cached_step, never_reuse_this_step_run
from steps.identity import SectionIdentity
from steps.spend import step_spending

RERANKER_ARTIFACT = "reranker_artifact"  # the substitution that names the checkpoint artifact


@cached_step(ignored_inputs=(OPERATIONS,))
def write_training_questions(
    chunks: ChunkSet, operations: Operations, training: SectionIdentity
) -> Annotated[TrainingQuestions, "training_questions"]:
    """One generator question per sampled chunk (cached per call in the LLM cache), and the inverse-cloze
    pseudo-questions of every chunk."""
    settings = training.section(RerankerTrainingConfig)
    llm = settings.generator_settings()
    llm = llm.model_copy(update=operations.llm.get(llm.result_key, {}))
    with step_spending(operations):
        written = training_questions(
            chunks, settings, lambda: LLMClient(llm, cache_location=operations.llm_cache)
        )
    failures = len(written.errors)
    log_metadata(
        {
            "generator_calls": written.calls,
            "questions": len(written.questions),
            "generator_failures": failures,
        }
    )
    if failures:
        never_reuse_this_step_run()
    return written


@cached_step(ignored_inputs=(OPERATIONS,))
def mine_training_pairs(
    questions: TrainingQuestions,
    chunks: ChunkSet,
    index: VectorIndex,
    bm25: LexicalIndex,
    eval_suite: EvalSuite,
    operations: Operations,
    training: SectionIdentity,
    knowledge_base: str,
) -> Annotated[TrainingPairs, "training_pairs"]:
    """Drop questions resembling an eval case, keep those retrieval finds again, mine negatives, split."""
    settings = training.section(RerankerTrainingConfig)
    pairs = training_pairs(
        questions,
        chunks,
        index,
        bm25,
        load_embedder(index.manifest.embedding_model, device=operations.device),
        cases=eval_suite.cases,
        settings=settings,
        knowledge_base=knowledge_base,
    )
    log_metadata(pairs.summary())
    return pairs


@cached_step(ignored_inputs=(OPERATIONS,), output_materializers=TrainedRerankerMaterializer)
def train_reranker_checkpoint(
    pairs: TrainingPairs, chunks: ChunkSet, operations: Operations, training: SectionIdentity, name: str
) -> Annotated[TrainedReranker, ArtifactConfig(name=f"{{{RERANKER_ARTIFACT}}}")]:
    """Fine-tune from the shipped MiniLM weights (the stand-in's layout); a new version of the named
    checkpoint artifact, with its training data's fingerprint, steps, curves and time."""
    settings = training.section(RerankerTrainingConfig)
    if pairs.generator_errors:
        raise RuntimeError(
            f"{len(pairs.generator_errors)} generator call(s) failed ({pairs.generator_errors[0]}); run "
            "train-reranker again (only the failed calls are made) before training on a partial set"
        )
    recipe = settings.recipe()
    dest = Path(mkdtemp(prefix=HANDOVER_PREFIX)) / "checkpoint"  # moved into the artifact store on return
    log = train_colbert(
        pairs,
        chunks,
        start_location=resolve_model(COLBERT_STANDIN_NAME).location,
        dest=dest,
        recipe=recipe,
        device=torch_device(settings.device, "reranker_training.device"),
    )
    summary = pairs.summary()
    log_metadata({key: value for key, value in log.model_dump().items() if "curve" not in key})
    if log.beat_the_start is False:
        shutil.rmtree(dest.parent, ignore_errors=True)
        raise RuntimeError(
            f"training never beat the untrained start on its {log.validation_questions} validation questions "
            f"(MRR {log.validation_mrr_before} at the start; {log.validation_curve[1:]} after (step, MRR)); "
            "no checkpoint is stored. Try more generator questions (reranker_training.chunks), a lower "
            "learning_rate, or see docs/how-to/train-reranker.md"
        )
    return TrainedReranker(
        name=name,
        knowledge_base=pairs.knowledge_base,
        training_pairs=len(pairs.training),
        generator_questions=int(summary["generator_questions"]),
        cloze_questions=int(summary["cloze_questions"]),
        training_data_fingerprint=pairs.fingerprint,
        chunk_set_fingerprint=pairs.chunk_set_fingerprint,
        held_out_cases=pairs.held_out_cases,
        validation_sources=pairs.validation_sources,
        recipe=recipe.model_dump(),
        log=log.model_dump(),
        location=str(dest),
    )
