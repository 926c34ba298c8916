"""Content digests and the canonical JSON they are taken of: the fingerprints, cache keys and ids the project
derives from text.

Every one is sha256 over the parts, in order, as hex (`sha256_hex`); `short_hash` cuts it to a length (16
characters unless the site says otherwise). A text part is hashed as its UTF-8. The parts are hashed one
after another, as if joined, so a chunk set's fingerprint never builds the whole text twice. A structured
value is hashed as its `canonical_json`. The values are the ones every site produced before these helpers,
and must stay so: they are persisted (cache folders, artifact fingerprints, step cache keys, LLM cache keys).

Two sha256 uses are no content digest of the project's and keep hashlib: a downloaded file checked against
the checksum the Hub publishes (models/provision.py, streamed with a progress bar) and a page's script
hashes in its Content-Security-Policy (report/pages.py: base64 of the raw digest, as CSP spells it).

Imports nothing of ragbench, so every module may import it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any


def sha256_hex(parts: Iterable[str | bytes]) -> str:
    """sha256 of the parts (text as UTF-8, bytes as they are), in order, as hex. The parts are consumed one
    at a time, so a generator over a large corpus is never held whole."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
    return digest.hexdigest()


def short_hash(*parts: str, length: int = 16) -> str:
    """sha256 of the parts' UTF-8, in order, as hex, the first `length` characters."""
    return sha256_hex(parts)[:length]


def canonical_json(
    value: Any, *, compact: bool = False, ascii_only: bool = True, default: Callable[[Any], Any] | None = None
) -> str:
    """`value` as JSON with its keys sorted, so equal values always give the same text to hash.

    The options name the spellings the persisted digests were taken with, and each must stay with its site:
    `compact` drops the spaces after `,` and `:` (the cell id, the LLM cache key); `ascii_only=False` keeps
    non-ASCII characters as they are instead of `\\u` escapes (the LLM cache key); `default` turns a value
    JSON has no form for into one (the LLM cache key: `str`)."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":") if compact else (", ", ": "),
        ensure_ascii=ascii_only,
        default=default,
    )


def seeded_rank(seed: int, case_id: str) -> bytes:
    """A case's place in every seeded draw (the end-to-end case order, the judge card's sample, a sample of
    traces): its id and the seed alone decide it, never its position in the file or the set's size."""
    return bytes.fromhex(sha256_hex([f"{seed}:{case_id}"]))
