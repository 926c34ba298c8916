"""Short content hashes: the fingerprints, cache keys and ids the project derives from text.

Every one is sha256 over the UTF-8 of its parts, in order, as hex, cut to a length (16 characters unless the
site says otherwise). The parts are hashed one after another, as if joined, so a chunk set's fingerprint
never builds the whole text twice; the values are the ones every site produced before this helper, and
must stay so: they are persisted (cache folders, artifact fingerprints, step cache keys).

Imports nothing of ragbench, so every module may import it.
"""

from __future__ import annotations

import hashlib


def short_hash(*parts: str, length: int = 16) -> str:
    """sha256 of the parts' UTF-8, in order, as hex, the first `length` characters."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()[:length]
