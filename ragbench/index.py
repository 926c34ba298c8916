"""Embedding and FAISS search: one index per (chunk set, embedding model), built once and shared."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from pydantic import BaseModel

from ragbench.chunking import ChunkSet
from ragbench.models import resolve_model

logger = logging.getLogger(__name__)

ENCODE_BATCH_SIZE = 32


class IndexManifest(BaseModel):
    """What an index is and how it was built; shown in the dashboard and copied into the results."""

    embedding_model: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    chunk_count: int
    chunk_set_fingerprint: str
    max_seq_length: int
    chunks_over_max_length: int
    longest_chunk_tokens: int
    encoded_texts: int
    build_seconds: float
    chunks_per_second: float
    similarity: str = "cosine (inner product of L2-normalised vectors, exact FAISS IndexFlatIP)"


@dataclass
class Embedder:
    """A sentence-transformers model plus a count of texts encoded, so the bench can prove no re-embedding."""

    name: str
    model: object  # sentence_transformers.SentenceTransformer
    encoded_texts: int = field(default=0)

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Lengths as the encoder sees them, special tokens included."""
        encoded = self.model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def encode_documents(self, texts: list[str], show_progress: bool = True) -> np.ndarray:
        self.encoded_texts += len(texts)
        vectors = self.model.encode_document(
            texts,
            batch_size=ENCODE_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode_query(
            texts, batch_size=ENCODE_BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


@lru_cache(maxsize=4)
def load_embedder(model_name: str) -> Embedder:
    """Loaded once per process: the local orchestrator runs every step in one process."""
    from sentence_transformers import SentenceTransformer

    location = resolve_model(model_name).location
    return Embedder(name=model_name, model=SentenceTransformer(location, device="cpu"))


@dataclass
class VectorIndex:
    manifest: IndexManifest
    chunks: ChunkSet
    faiss_index: object  # faiss.Index

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, chunk positions) per query; positions index `chunks.chunks`."""
        k = min(k, self.faiss_index.ntotal)
        return self.faiss_index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), k)

    def vectors(self) -> np.ndarray:
        """Every chunk's normalised vector in chunk order, read back from the index (no re-embedding)."""
        return self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)


def build_index(chunks: ChunkSet, embedder: Embedder, show_progress: bool | None = None) -> VectorIndex:
    """Embed every chunk exactly once and load the vectors into an exact cosine index."""
    import faiss

    if not chunks.chunks:
        raise ValueError(f"chunk set (size {chunks.chunk_size}) is empty: nothing to index")
    lengths = embedder.token_lengths(chunks.texts)
    too_long = sum(length > embedder.max_seq_length for length in lengths)
    if too_long:
        logger.warning(
            "%d of %d chunks (size %d) exceed %s's maximum sequence length of %d tokens and will be "
            "TRUNCATED by the encoder; choose a smaller chunk size for this model",
            too_long,
            len(lengths),
            chunks.chunk_size,
            embedder.name,
            embedder.max_seq_length,
        )
    started = time.perf_counter()
    on_terminal = sys.stderr.isatty() if show_progress is None else show_progress
    vectors = embedder.encode_documents(chunks.texts, show_progress=on_terminal)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    seconds = time.perf_counter() - started
    manifest = IndexManifest(
        embedding_model=embedder.name,
        dimension=int(vectors.shape[1]),
        chunk_size=chunks.chunk_size,
        chunk_overlap=chunks.chunk_overlap,
        chunk_count=len(chunks.chunks),
        chunk_set_fingerprint=chunks.fingerprint,
        max_seq_length=embedder.max_seq_length,
        chunks_over_max_length=too_long,
        longest_chunk_tokens=max(lengths),
        encoded_texts=len(chunks.chunks),
        build_seconds=round(seconds, 3),
        chunks_per_second=round(len(chunks.chunks) / seconds, 2) if seconds > 0 else 0.0,
    )
    return VectorIndex(manifest=manifest, chunks=chunks, faiss_index=index)
