"""From questions to training examples: keep a question when retrieval finds its chunk again, mine hard
negatives with BM25 and the dense index, and split by source into training and validation.

The retrieval roundtrip (Promptagator's consistency filter) drops questions so vague that no retriever
finds their chunk among its first `roundtrip_top_k`, which would otherwise teach the reranker noise. A
negative is a highly ranked chunk of another source: a chunk of the question's own source is never one,
since relevance in the eval set is judged by source. Validation holds out whole sources, so it measures
ranking on documents training never matched a question to.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from ragbench.hashing import canonical_json, short_hash
from ragbench.inputs.chunking import ChunkSet
from ragbench.retrieval.index import Embedder, VectorIndex
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.training.questions import TrainingQuestion


class TrainingExample(BaseModel):
    """One question, the text it should rank first, and mined chunks of other sources it should not."""

    question: str
    origin: str
    chunk: int
    source: str
    positive: str  # the chunk's text (an inverse-cloze question's sentence taken out of it)
    negatives: list[int]


class ValidationQuestion(BaseModel):
    """A held-out question with the dense index's candidates, in its order, for early stopping."""

    question: str
    origin: str
    source: str
    candidates: list[int]


class TrainingPairs(BaseModel):
    """What a reranker is trained on, with what was left out and why."""

    chunk_set_fingerprint: str
    knowledge_base: str
    training: list[TrainingExample]
    validation: list[ValidationQuestion]
    validation_sources: list[str]
    held_out_cases: list[str]  # eval case ids none of whose text may appear in training
    dropped_as_leaks: list[str]
    dropped_by_roundtrip: int
    generator_errors: list[str]

    @property
    def fingerprint(self) -> str:
        """The training data's identity: what the checkpoint is recorded with."""
        examples = [example.model_dump() for example in self.training]
        return short_hash(canonical_json([self.chunk_set_fingerprint, examples]))

    def summary(self) -> dict[str, int | str]:
        origins = [e.origin for e in self.training]
        return {
            "training_pairs": len(self.training),
            "generator_questions": origins.count("generator"),
            "cloze_questions": origins.count("cloze"),
            "validation_questions": len(self.validation),
            "validation_sources": len(self.validation_sources),
            "held_out_cases": len(self.held_out_cases),
            "dropped_as_leaks": len(self.dropped_as_leaks),
            "dropped_by_roundtrip": self.dropped_by_roundtrip,
            "generator_errors": len(self.generator_errors),
            "fingerprint": self.fingerprint,
        }


def _ranked(embedder: Embedder, index: VectorIndex, lexical: LexicalIndex, questions: list[str], k: int):
    _, dense = index.search(embedder.encode_queries(questions), k)
    _, bm25 = lexical.search(questions, k)
    return dense, bm25


def _without_sentence(text: str, sentence: str) -> str:
    return " ".join(text.replace(sentence, " ").split())


def build_pairs(
    questions: Sequence[TrainingQuestion],
    chunks: ChunkSet,
    index: VectorIndex,
    lexical: LexicalIndex,
    embedder: Embedder,
    *,
    knowledge_base: str,
    held_out_cases: Sequence[str],
    dropped_as_leaks: Sequence[str],
    generator_errors: Sequence[str],
    negatives: int,
    roundtrip_top_k: int,
    candidates_k: int,
    validation_share: float,
    seed: int,
) -> TrainingPairs:
    """Training examples and validation questions from `questions` (already cleared of eval-set leaks)."""
    index.check_matches(chunks)
    lexical.check_matches(chunks)
    texts = [q.question for q in questions]
    depth = max(roundtrip_top_k, candidates_k)
    dense, bm25 = _ranked(embedder, index, lexical, texts, depth) if texts else (np.empty((0, 0)),) * 2
    sources = sorted({chunk.source for chunk in chunks.chunks})
    rng = random.Random(seed)
    held = set(rng.sample(sources, round(len(sources) * validation_share))) if validation_share else set()
    training, validation, dropped = [], [], 0
    for row, question in enumerate(questions):
        chunk = chunks.chunks[question.chunk]
        found = {int(p) for p in dense[row, :roundtrip_top_k]} | {int(p) for p in bm25[row, :roundtrip_top_k]}
        if question.chunk not in found:
            dropped += 1
            continue
        if chunk.source in held:
            candidates = [int(p) for p in dense[row, :candidates_k] if p >= 0]
            validation.append(
                ValidationQuestion(
                    question=question.question,
                    origin=question.origin,
                    source=chunk.source,
                    candidates=candidates,
                )
            )
            continue
        mined: list[int] = []
        for ranking in zip(dense[row], bm25[row], strict=True):  # alternate dense and BM25, best first
            for position in (int(p) for p in ranking):
                if position >= 0 and chunks.chunks[position].source != chunk.source and position not in mined:
                    mined.append(position)
        positive = (
            chunk.text if question.origin != "cloze" else _without_sentence(chunk.text, question.question)
        )
        training.append(
            TrainingExample(
                question=question.question,
                origin=question.origin,
                chunk=question.chunk,
                source=chunk.source,
                positive=positive,
                negatives=mined[:negatives],
            )
        )
    if any(q.origin == "generator" for q in validation):  # what eval questions resemble, when there are some
        validation = [q for q in validation if q.origin == "generator"]
    return TrainingPairs(
        chunk_set_fingerprint=chunks.fingerprint,
        knowledge_base=knowledge_base,
        training=training,
        validation=validation,
        validation_sources=sorted(held),
        held_out_cases=list(held_out_cases),
        dropped_as_leaks=list(dropped_as_leaks),
        dropped_by_roundtrip=dropped,
        generator_errors=list(generator_errors),
    )
