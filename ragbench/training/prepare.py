"""The training set as the `reranker_training` section asks for it: one place for the pipeline's steps and
the benchmark, so both train on exactly the same questions and pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.retrieval.index import Embedder, VectorIndex
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.testset.plan import sample_chunks
from ragbench.training.pairs import TrainingPairs, build_pairs
from ragbench.training.questions import TrainingQuestions, cloze_questions, without_leaks, write_questions
from ragbench.training.settings import RerankerTrainingConfig


def training_questions(
    chunks: ChunkSet, settings: RerankerTrainingConfig, open_client: Callable[[], LLMClient]
) -> TrainingQuestions:
    """The generator's question for each of `settings.chunks` chunks sampled evenly over the sources (the
    client is opened only when there is one to write), then the inverse-cloze questions."""
    positions = sample_chunks(
        chunks.chunks,
        settings.chunks,
        sampling="even",
        seed=settings.seed,
        min_chars=settings.min_chunk_chars,
    )
    questions, errors = [], []
    if positions:
        with open_client() as client:
            questions, errors = write_questions(client, chunks.chunks, positions, audience=settings.audience)
    if settings.cloze:
        questions += cloze_questions(chunks.chunks)
    return TrainingQuestions(
        generator=settings.generator_settings().model,
        calls=len(positions),
        questions=questions,
        errors=errors,
    )


def training_pairs(
    questions: TrainingQuestions,
    chunks: ChunkSet,
    index: VectorIndex,
    lexical: LexicalIndex,
    embedder: Embedder,
    *,
    cases: Sequence[EvalCase],
    settings: RerankerTrainingConfig,
    knowledge_base: str,
) -> TrainingPairs:
    """The questions resembling no eval case in `cases`, as training examples and validation questions."""
    kept, leaked = without_leaks(questions.questions, cases)
    return build_pairs(
        kept,
        chunks,
        index,
        lexical,
        embedder,
        knowledge_base=knowledge_base,
        held_out_cases=[case.id for case in cases],
        dropped_as_leaks=leaked,
        generator_errors=questions.errors,
        negatives=settings.negatives,
        roundtrip_top_k=settings.roundtrip_top_k,
        candidates_k=settings.candidates_k,
        validation_share=settings.validation_share,
        seed=settings.seed,
    )
