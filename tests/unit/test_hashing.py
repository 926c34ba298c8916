"""One truncated sha256 (`ragbench.hashing.short_hash`) behind fingerprints, cache keys and ids: the values
are the ones each site computed before, since they are persisted (cache folders, artifact fingerprints,
generated case ids)."""

import hashlib

from ragbench.hashing import short_hash
from ragbench.inputs.chunking import Chunk, ChunkSet
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.testset.plan import seed_id

TEXTS = ["héllo wörld", "zwei\0drei", ""]


def test_short_hash_is_truncated_sha256_of_the_utf8_of_the_parts_joined():
    for text in TEXTS:
        assert short_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    assert short_hash(*TEXTS, length=10) == hashlib.sha256("".join(TEXTS).encode()).hexdigest()[:10]
    assert short_hash("x", length=64) == hashlib.sha256(b"x").hexdigest()


def test_a_chunk_sets_fingerprint_and_a_generated_case_id_keep_their_values():
    chunks = [Chunk(text=text, source=f"doc-{i}.md", start_index=i * 7) for i, text in enumerate(TEXTS)]
    chunk_set = ChunkSet.model_construct(chunks=chunks)
    before = hashlib.sha256()
    for chunk in chunks:
        before.update(f"{chunk.source}\0{chunk.start_index}\0{chunk.text}\0".encode())
    assert chunk_set.fingerprint == before.hexdigest()[:16]

    sources = [SourceChunk(text=c.text, source=c.source, start_index=c.start_index) for c in chunks]
    before = hashlib.sha256(b"multi_hop")
    for chunk in sources:
        before.update(f"\0{chunk.source}\0{chunk.start_index}\0{chunk.text}".encode())
    assert seed_id(sources, "multi_hop") == f"gen-{before.hexdigest()[:10]}"
