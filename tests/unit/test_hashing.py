"""One sha256 (`ragbench.hashing.sha256_hex`, cut by `short_hash`) and one canonical JSON behind fingerprints,
cache keys and ids: the values are the ones each site computed before, since they are persisted (cache
folders, artifact fingerprints, generated case ids). tests/unit/test_digest_values.py pins each site's."""

import hashlib
import json
from datetime import date

from ragbench.hashing import canonical_json, sha256_hex, short_hash
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


def test_sha256_hex_hashes_text_as_utf8_and_bytes_as_they_are_one_part_at_a_time():
    assert sha256_hex(TEXTS) == hashlib.sha256("".join(TEXTS).encode("utf-8")).hexdigest()
    assert sha256_hex([b"\x00\xff", "é"]) == hashlib.sha256(b"\x00\xff" + "é".encode()).hexdigest()
    assert sha256_hex(part for part in ["a", "b"]) == hashlib.sha256(b"ab").hexdigest()
    assert sha256_hex([]) == hashlib.sha256().hexdigest()


def test_canonical_json_is_each_spelling_the_digests_were_taken_with():
    value = {"b": [1, "wörld", None], "a": {"y": 1.5, "x": True}}
    assert canonical_json(value) == json.dumps(value, sort_keys=True)
    assert canonical_json(value, compact=True) == json.dumps(value, sort_keys=True, separators=(",", ":"))
    with_date = {**value, "when": date(2026, 1, 2)}
    assert canonical_json(with_date, compact=True, ascii_only=False, default=str) == json.dumps(
        with_date, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    assert canonical_json({"z": 1, "a": 2}) == '{"a": 2, "z": 1}'
