"""Embedding and FAISS search: every chunk set is embedded once per embedding model into an exact (flat)
index; approximate indexes (`ragbench.retrieval.ann`) are built from its vectors, never by embedding again.
An index
holds vectors only: the chunk set is its own artifact, matched by fingerprint."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from pydantic import BaseModel

from ragbench.hashing import short_hash
from ragbench.inputs.chunking import ChunkSet
from ragbench.models.devices import torch_device
from ragbench.models.provision import resolve_model
from ragbench.retrieval.ann import FLAT_INDEX, IndexSpec, build_faiss_index, index_bytes

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
    build_seconds: float  # embedding and the exact index
    chunks_per_second: float
    device: str = "cpu"
    index_type: str = FLAT_INDEX
    index_build_seconds: float = 0.0  # the approximate index from the vectors (0 for flat)
    index_bytes: int = 0
    similarity: str = "cosine (inner product of L2-normalised vectors)"


@dataclass
class Embedder:
    """A sentence-transformers model plus a count of texts encoded, so the bench can prove no re-embedding."""

    name: str
    model: object  # sentence_transformers.SentenceTransformer
    encoded_texts: int = field(default=0)

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    def token_lengths(self, texts: list[str], batch_size: int = 1024) -> list[int]:
        """Lengths as the encoder sees them, special tokens included; in batches, without masks, because the
        tokenizer's output for 100k chunks at once took 2 GB (bench_scale.py)."""
        lengths: list[int] = []
        for start in range(0, len(texts), batch_size):
            encoded = self.model.tokenizer(
                texts[start : start + batch_size],
                add_special_tokens=True,
                truncation=False,
                return_attention_mask=False,
                return_token_type_ids=False,
            )["input_ids"]
            lengths += [len(ids) for ids in encoded]
        return lengths

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


def load_embedder(model_name: str, device: str = "auto") -> Embedder:
    """Loaded once per process and device (the local orchestrator runs every step in one process); `device`
    auto = a GPU where the step has one."""
    return _load_embedder(model_name, torch_device(device, "embedding.device"))


@lru_cache(maxsize=4)
def _load_embedder(model_name: str, device: str) -> Embedder:
    from sentence_transformers import SentenceTransformer

    location = resolve_model(model_name).location
    return Embedder(name=model_name, model=SentenceTransformer(location, device=device))


@dataclass
class VectorIndex:
    """A FAISS index over one chunk set's vectors; row i is `ChunkSet.chunks[i]` of the chunk set whose
    fingerprint the manifest names."""

    manifest: IndexManifest
    faiss_index: object  # faiss.Index

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, chunk positions) per query, -1 where fewer."""
        k = min(k, self.faiss_index.ntotal)
        return self.faiss_index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), k)

    def vectors(self) -> np.ndarray:
        """Every chunk's normalised vector in chunk order, from the exact index (no re-embedding)."""
        if self.manifest.index_type != FLAT_INDEX:
            raise ValueError(f"vectors come from the flat index, not from {self.manifest.index_type}")
        return self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)

    def check_matches(self, chunks: ChunkSet) -> None:
        """Refuse to read positions of this index as rows of another chunk set."""
        chunks.check_indexed_by(self.manifest.chunk_set_fingerprint, "index")


class ShardCheckpoints:
    """Finished shards of one index build, kept (as .npy files under `location`, a local folder or any fsspec
    URI: the artifact store where the step runs) until the build completes, so a build that was killed
    resumes and re-embeds at most the shard it was in. Keyed by chunk-set fingerprint, model and shard size:
    a shard is only ever reused for exactly the texts it was made from."""

    def __init__(self, location: str, chunks: ChunkSet, model_name: str, shard_size: int) -> None:
        key = short_hash(f"{chunks.fingerprint}\0{model_name}\0{shard_size}")
        self.folder = f"{location.rstrip('/')}/{key}"

    def _path(self, shard: int) -> str:
        return f"{self.folder}/shard-{shard:06d}.npy"

    def load(self, shard: int, rows: int, dimension: int | None) -> np.ndarray | None:
        """The shard's vectors if a complete, well-formed checkpoint exists; anything else is ignored."""
        import fsspec

        try:
            with fsspec.open(self._path(shard), "rb") as file:
                vectors = np.load(file, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            return None
        if vectors.ndim != 2 or vectors.shape[0] != rows or (dimension and vectors.shape[1] != dimension):
            return None
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def save(self, shard: int, vectors: np.ndarray) -> None:
        """Written under a temporary name and renamed, so a kill mid-write leaves no shard that loads."""
        import fsspec

        filesystem, path = fsspec.core.url_to_fs(self._path(shard))
        filesystem.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        partial = path + ".partial"
        with filesystem.open(partial, "wb") as file:
            np.save(file, vectors, allow_pickle=False)
        filesystem.mv(partial, path)

    def clear(self) -> None:
        import fsspec

        filesystem, path = fsspec.core.url_to_fs(self.folder)
        if filesystem.exists(path):
            filesystem.rm(path, recursive=True)


def embed_in_shards(
    texts: list[str],
    embedder: Embedder,
    shard_size: int,
    checkpoints: ShardCheckpoints | None = None,
    show_progress: bool = False,
) -> tuple[np.ndarray, int]:
    """Every text's vector, shard by shard; returns (vectors, shards reused from checkpoints)."""
    parts, reused, dimension = [], 0, None
    starts = range(0, len(texts), shard_size)
    for shard, start in enumerate(starts):
        batch = texts[start : start + shard_size]
        vectors = checkpoints.load(shard, len(batch), dimension) if checkpoints else None
        if vectors is None:
            vectors = embedder.encode_documents(batch, show_progress=show_progress)
            if checkpoints is not None and len(starts) > 1:  # one shard: nothing to resume
                checkpoints.save(shard, vectors)
        else:
            reused += 1
        dimension = vectors.shape[1]
        parts.append(vectors)
    return np.concatenate(parts), reused


def build_index(
    chunks: ChunkSet,
    embedder: Embedder,
    show_progress: bool | None = None,
    shard_size: int = 2048,
    checkpoint_location: str | None = None,
) -> VectorIndex:
    """Embed every chunk exactly once (in shards, checkpointed at `checkpoint_location` when given) and load
    the vectors into an exact cosine index."""
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
    checkpoints = (
        ShardCheckpoints(checkpoint_location, chunks, embedder.name, shard_size)
        if checkpoint_location
        else None
    )
    encoded_before = embedder.encoded_texts
    vectors, reused = embed_in_shards(chunks.texts, embedder, shard_size, checkpoints, on_terminal)
    if reused:
        logger.info("resumed %s's index build: %d shard(s) came from checkpoints", embedder.name, reused)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    seconds = time.perf_counter() - started
    del vectors  # the index holds them: peak memory is one copy of the vectors
    manifest = IndexManifest(
        embedding_model=embedder.name,
        dimension=int(index.d),
        chunk_size=chunks.chunk_size,
        chunk_overlap=chunks.chunk_overlap,
        chunk_count=len(chunks.chunks),
        chunk_set_fingerprint=chunks.fingerprint,
        max_seq_length=embedder.max_seq_length,
        chunks_over_max_length=too_long,
        longest_chunk_tokens=max(lengths),
        encoded_texts=embedder.encoded_texts - encoded_before,
        build_seconds=round(seconds, 3),
        chunks_per_second=round(len(chunks.chunks) / seconds, 2) if seconds > 0 else 0.0,
        device=str(embedder.model.device),
        index_bytes=index_bytes(index),
    )
    if checkpoints is not None:
        checkpoints.clear()  # the index artifact holds the vectors from here on
    return VectorIndex(manifest=manifest, faiss_index=index)


def build_approximate_index(exact: VectorIndex, index_type: str) -> VectorIndex:
    """An approximate index (`ragbench.retrieval.ann.IndexSpec` name) over the exact index's vectors:
    nothing is
    embedded again, and the exact index stays the reference its recall is measured against."""
    spec = IndexSpec.parse(index_type)
    started = time.perf_counter()
    index = build_faiss_index(exact.vectors(), spec)
    manifest = exact.manifest.model_copy(
        update={
            "index_type": spec.name,
            "index_build_seconds": round(time.perf_counter() - started, 3),
            "index_bytes": index_bytes(index),
        }
    )
    return VectorIndex(manifest=manifest, faiss_index=index)
