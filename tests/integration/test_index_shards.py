"""Index builds embed in shards checkpointed until the index is done: a build that was killed resumes
and re-embeds at most the shard it was in, and the vectors are those of an uninterrupted build."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ragbench.inputs.chunking import Chunk, ChunkSet
from ragbench.retrieval.index import Embedder, ShardCheckpoints, build_index, embed_in_shards, load_embedder
from tests.conftest import MINILM


class CountingEmbedder(Embedder):
    """Deterministic vectors from the text alone; dies after `fail_after` shards, as a killed pod would."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(name="fake-embedder", model=None)
        self.fail_after = fail_after
        self.calls = 0

    def encode_documents(self, texts: list[str], show_progress: bool = True) -> np.ndarray:
        if self.fail_after is not None and self.calls == self.fail_after:
            raise KeyboardInterrupt("killed")
        self.calls += 1
        self.encoded_texts += len(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts]
        return np.asarray(rows, dtype=np.float32)


def chunk_set(count: int) -> ChunkSet:
    chunks = [Chunk(text=f"passage number {i}", source=f"doc{i % 7}.md", start_index=i) for i in range(count)]
    return ChunkSet(chunk_size=64, chunk_overlap=0, tokenizer="t", corpus_fingerprint="c", chunks=chunks)


def test_a_killed_build_resumes_and_re_embeds_at_most_one_shard(tmp_path):
    chunks = chunk_set(23)
    whole, _ = embed_in_shards(chunks.texts, CountingEmbedder(), shard_size=100)
    checkpoints = ShardCheckpoints(str(tmp_path), chunks, "fake-embedder", shard_size=5)
    with pytest.raises(KeyboardInterrupt):
        embed_in_shards(chunks.texts, CountingEmbedder(fail_after=3), 5, checkpoints)  # dies in shard 4 of 5
    resumed = CountingEmbedder()
    vectors, reused = embed_in_shards(chunks.texts, resumed, 5, checkpoints)
    assert reused == 3 and resumed.encoded_texts == 5 + 3  # shards 4 (5 texts) and 5 (3 texts) only
    assert np.array_equal(vectors, whole)
    # another chunk set, model or shard size never reads these checkpoints
    other = ShardCheckpoints(str(tmp_path), chunk_set(24), "fake-embedder", shard_size=5)
    assert other.folder != checkpoints.folder
    assert ShardCheckpoints(str(tmp_path), chunks, "fake-embedder", shard_size=6).folder != checkpoints.folder


def test_a_damaged_or_half_written_shard_is_embedded_again(tmp_path):
    chunks = chunk_set(10)
    checkpoints = ShardCheckpoints(tmp_path.as_uri(), chunks, "fake-embedder", shard_size=4)  # a URI works
    embed_in_shards(chunks.texts, CountingEmbedder(), 4, checkpoints)
    shards = sorted(tmp_path.rglob("shard-*.npy"))
    assert len(shards) == 3 and not list(tmp_path.rglob("*.partial"))
    shards[0].write_bytes(shards[0].read_bytes()[:40])  # truncated
    np.save(shards[1], np.zeros((2, 16), dtype=np.float32))  # wrong shape
    again = CountingEmbedder()
    vectors, reused = embed_in_shards(chunks.texts, again, 4, checkpoints)
    assert reused == 1 and again.encoded_texts == 8
    assert np.array_equal(vectors, embed_in_shards(chunks.texts, CountingEmbedder(), 10)[0])


def test_a_sharded_build_with_the_real_model_matches_one_batch_and_leaves_no_checkpoints(tmp_path):
    chunks = chunk_set(9)
    embedder = load_embedder(MINILM)
    one_batch = build_index(chunks, embedder, show_progress=False, shard_size=100)
    sharded = build_index(
        chunks, embedder, show_progress=False, shard_size=2, checkpoint_location=str(tmp_path / "ckpt")
    )
    assert np.allclose(sharded.vectors(), one_batch.vectors(), atol=1e-5)
    assert sharded.manifest.encoded_texts == 9 == sharded.manifest.chunk_count
    assert not list((tmp_path / "ckpt").rglob("*.npy"))  # the index artifact holds the vectors now
