"""ColBERT reranking from document token embeddings computed once per (checkpoint, chunk set).

`ColbertReranker` (RAGatouille's in-memory ``rerank``) encodes every candidate passage again for every
question; here each chunk is encoded once (`encode_chunk_set`), and a question costs one query encoding
plus MaxSim over its candidates' stored tokens (`PrecomputedColbertReranker`).

The rankings are those of RAGatouille's ``rerank`` on the same candidates, which (ragatouille 0.0.9,
colbert-ai 0.2.22) does this per call:

- documents are truncated at ``base_model_max_tokens`` (the encoder's positions minus 4: 508 for BERT),
  every call: its ``_set_inference_max_tokens(max_tokens="auto")`` never reaches the branch that would
  size it from the documents. The chunks are encoded with that same limit.
- the question is padded with [MASK] to max(32, int(1.35 x its words)) tokens: the question is encoded
  by RAGatouille's own query encoder, so this holds by construction.
- the candidates are stacked into one zero-padded tensor, and punctuation tokens are zero vectors too
  (colbert-ai's skiplist); the score, sum over query tokens of the max dot product over the document's
  rows, takes that max over the zero rows as well (its document mask is never applied). So a query token
  whose dot products with every real token of a chunk are negative scores 0, not the negative best,
  for every chunk that has a zero row: one with masked tokens, or shorter than the longest candidate.
  The zero rows are not stored; `encoded_lengths` keeps each chunk's length with them, from which
  `maxsim_scores` knows exactly which chunks had one.

A token's embedding does not depend on the padding around it (BERT's attention mask), so only float
rounding differs between the two paths (scores within 1e-5). Vectors are stored as float32: float16
storage reordered near-tied candidates of 2 of the 50 default eval questions (stand-in, chunk size 128,
top_k 30), where float32 kept all 50 rankings identical.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ragbench.inputs.chunking import ChunkSet
from ragbench.retrieval.rerank import (
    ColbertReranker,
    RerankerChoice,
    _load,
    _with_score,
    checkpoint_location,
)
from ragbench.retrieval.search import RetrievedChunk

__all__ = ["ColbertEncodings", "PrecomputedColbertReranker", "encode_chunk_set", "maxsim_scores"]

ENCODE_BATCH_SIZE = 32  # RAGatouille's own batch size for in-memory reranking


@dataclass(frozen=True)
class ColbertEncodings:
    """Every chunk's ColBERT document token embeddings, one chunk set under one checkpoint.

    Chunk i's tokens are rows ``offsets[i]:offsets[i + 1]`` of `vectors` (L2-normalised, the tokens
    ColBERT scores: punctuation dropped); `encoded_lengths[i]` is its length as encoded, the dropped
    tokens included ([CLS], [D] and [SEP] too), truncated at `doc_maxlen`. Arrays only, so memory grows
    with the vectors, not with a Python object per chunk.
    """

    choice: RerankerChoice
    chunk_set_fingerprint: str
    doc_maxlen: int
    vectors: np.ndarray  # (tokens, dim)
    offsets: np.ndarray  # (chunks + 1,) int64
    encoded_lengths: np.ndarray  # (chunks,) int64

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2:
            raise ValueError(f"vectors must be (tokens, dim), got shape {self.vectors.shape}")
        if self.offsets.ndim != 1 or len(self.offsets) < 2 or self.offsets[0] != 0:
            raise ValueError("offsets must start at 0 and hold one entry per chunk plus one")
        if self.offsets[-1] != len(self.vectors):
            raise ValueError(f"offsets end at {self.offsets[-1]}, but there are {len(self.vectors)} vectors")
        rows = np.diff(self.offsets)
        if (rows < 1).any():
            raise ValueError("every chunk needs at least one token vector")
        if self.encoded_lengths.shape != rows.shape or (self.encoded_lengths < rows).any():
            raise ValueError("encoded_lengths must give each chunk's length, at least its stored tokens")

    @property
    def chunk_count(self) -> int:
        return len(self.offsets) - 1

    @property
    def token_count(self) -> int:
        return len(self.vectors)

    @property
    def nbytes(self) -> int:
        return self.vectors.nbytes + self.offsets.nbytes + self.encoded_lengths.nbytes

    def summary(self) -> dict[str, Any]:
        """What the dashboard and the step's metadata show."""
        return {
            "checkpoint": self.choice.used,
            "label": self.choice.label,
            "is_standin": self.choice.is_standin,
            "chunk_set_fingerprint": self.chunk_set_fingerprint,
            "chunks": self.chunk_count,
            "tokens": self.token_count,
            "dimension": int(self.vectors.shape[1]),
            "dtype": str(self.vectors.dtype),
            "doc_maxlen": self.doc_maxlen,
            "bytes": self.nbytes,
        }


def encode_chunk_set(
    choice: RerankerChoice,
    chunks: ChunkSet,
    *,
    batch_size: int = ENCODE_BATCH_SIZE,
    progress: bool | None = None,
) -> ColbertEncodings:
    """Encode every chunk once, in batches, exactly as RAGatouille's ``rerank`` encodes a candidate.

    `progress`: tqdm bar on/off; None shows it on a terminal only.
    """
    if not chunks.chunks:
        raise ValueError(f"chunk set (size {chunks.chunk_size}) is empty: nothing to encode")
    loaded = _load(checkpoint_location(choice))  # the same model object ColbertReranker uses
    colbert = loaded.model.model  # ragatouille.models.colbert.ColBERT
    checkpoint = colbert.inference_ckpt  # colbert.modeling.checkpoint.Checkpoint
    doc_maxlen = int(colbert.base_model_max_tokens)
    texts = chunks.texts
    parts, kept_counts, lengths = [], [], []
    with (
        loaded.lock,
        tqdm(
            total=len(texts),
            desc="ColBERT-encode chunks",
            unit="chunk",
            disable=None if progress is None else not progress,
        ) as bar,
    ):
        # The limit RAGatouille's rank() sets before every call (see the module docstring).
        checkpoint.doc_tokenizer.doc_maxlen = doc_maxlen
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            ids, attention = checkpoint.doc_tokenizer.tensorize(batch)
            vectors, kept = checkpoint.doc(ids, attention, keep_dims="return_mask", to_cpu=True)
            kept = kept.squeeze(-1)
            parts.append(vectors[kept].numpy())
            kept_counts.append(kept.sum(-1).numpy())
            lengths.append(attention.sum(-1).numpy())
            bar.update(len(batch))
    return ColbertEncodings(
        choice=choice,
        chunk_set_fingerprint=chunks.fingerprint,
        doc_maxlen=doc_maxlen,
        vectors=np.ascontiguousarray(np.concatenate(parts), dtype=np.float32),
        offsets=np.concatenate([[0], np.cumsum(np.concatenate(kept_counts))]).astype(np.int64),
        encoded_lengths=np.concatenate(lengths).astype(np.int64),
    )


def maxsim_scores(query: np.ndarray, encodings: ColbertEncodings, positions: Sequence[int]) -> np.ndarray:
    """ColBERT score of each chunk at `positions` for query token vectors `query` (query tokens, dim),
    as RAGatouille's ``rerank`` scores them together: per query token, the max dot product over the
    chunk's tokens, floored at 0 for a chunk that had a zero row in the padded stack; summed."""
    chosen = np.asarray(positions, dtype=np.int64)
    if chosen.size == 0:
        return np.zeros(0, dtype=np.float32)
    outside = chosen[(chosen < 0) | (chosen >= encodings.chunk_count)]
    if outside.size:
        raise ValueError(
            f"chunk position {outside[0]} is outside the encodings' {encodings.chunk_count} chunks"
        )
    starts, ends = encodings.offsets[chosen], encodings.offsets[chosen + 1]
    rows = np.concatenate([encodings.vectors[start:end] for start, end in zip(starts, ends, strict=True)])
    similarities = rows @ np.asarray(query, dtype=np.float32).T
    counts = ends - starts
    best = np.maximum.reduceat(similarities, np.cumsum(counts) - counts, axis=0)
    padded = counts < encodings.encoded_lengths[chosen].max()
    best[padded] = np.maximum(best[padded], 0.0)
    return best.sum(axis=1)


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Encode one question on one thread: its forward pass is ~100 small parallel ops, each waiting for
    both threads; on a busy 2-core machine that waiting cost 0.2-0.9 s per question, one thread 0.06-0.09 s
    (an idle machine: 14 ms on two). torch's thread count is restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class PrecomputedColbertReranker(ColbertReranker):
    """`ColbertReranker` with the same rankings, label and stand-in flag, from stored chunk encodings:
    a question costs one query encoding and a MaxSim, not one encoding of every candidate.

    Candidates are found in `encodings` by ``chunk.position`` (the chunk's row in its chunk set), so the
    encodings must be of the chunk set the candidates come from (`chunk_set_fingerprint`) and of the
    checkpoint `choice` uses; anything else is refused.
    """

    def __init__(
        self, encodings: ColbertEncodings, *, choice: RerankerChoice, chunk_set_fingerprint: str
    ) -> None:
        if encodings.choice.used != choice.used:
            raise ValueError(
                f"encodings were made with checkpoint {encodings.choice.used!r}, "
                f"reranking uses {choice.used!r}"
            )
        if encodings.chunk_set_fingerprint != chunk_set_fingerprint:
            raise ValueError(
                f"encodings are of chunk set {encodings.chunk_set_fingerprint}, the candidates come from "
                f"chunk set {chunk_set_fingerprint}"
            )
        super().__init__(choice=choice)
        self.encodings = encodings

    def encode_question(self, question: str) -> np.ndarray:
        """The question's token vectors (query tokens, dim), by RAGatouille's own query encoder."""
        loaded = self._loaded()
        # It rewrites the checkpoint's query length per call: not thread-safe.
        with loaded.lock, _one_torch_thread():
            (encoded,) = loaded.model.model._encode_index_free_queries(question)
        return encoded[0].numpy()

    def rerank(self, question: str, chunks: Sequence[RetrievedChunk], top_n: int) -> list[RetrievedChunk]:
        """The `top_n` best of `chunks` for `question` by ColBERT score, best first (exact ties keep the
        candidates' order)."""
        if top_n < 1:
            raise ValueError(f"top_n must be at least 1, got {top_n}")
        if not chunks:
            return []
        scores = maxsim_scores(self.encode_question(question), self.encodings, [c.position for c in chunks])
        order = np.argsort(-scores, kind="stable")[:top_n]
        return [_with_score(chunks[i], float(scores[i])) for i in order]
