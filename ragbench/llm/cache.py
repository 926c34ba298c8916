"""Disk cache of successful LLM results, so a re-run (or a run resumed after a crash) calls nothing twice.

SQLite in WAL mode: readers never block, a writer waits for another (busy timeout), and it is safe
across threads and processes. Each thread keeps its own connection: opening and closing one per
operation made SQLite checkpoint and fsync the WAL every time (~15 ms per lookup).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import weakref
from contextlib import closing
from pathlib import Path
from typing import Any

CACHE_ENV_VAR = "RAGBENCH_CACHE_DIR"
# Bump when the way requests are built changes (e.g. the schema instruction), to invalidate old entries.
CACHE_KEY_VERSION = 1
_BUSY_TIMEOUT_S = 60.0


def default_cache_dir() -> Path:
    """``$RAGBENCH_CACHE_DIR/llm``, else ``~/.cache/ragbench/llm`` (next to the model cache)."""
    base = os.environ.get(CACHE_ENV_VAR)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "ragbench"
    return root / "llm"


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that changes the output (never credentials)."""
    canonical = json.dumps(
        {"v": CACHE_KEY_VERSION, **payload},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResultCache:
    """Key -> JSON text store in ``<directory>/llm-cache.sqlite3``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "llm-cache.sqlite3"
        self._local = threading.local()
        self._opened: weakref.WeakSet[_Conn] = weakref.WeakSet()
        self._opened_lock = threading.Lock()
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS results ("
                " key TEXT PRIMARY KEY, model TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL)"
            )
            # Calls that failed: never served as results, only remembered, so that making one again
            # in a later run is counted as a retry of an earlier failure.
            conn.execute(
                "CREATE TABLE IF NOT EXISTS failures ("
                " key TEXT PRIMARY KEY, model TEXT NOT NULL, error TEXT NOT NULL, created REAL NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode: every statement is its own short transaction, so locks are held briefly.
        # check_same_thread=False only so that a connection may be closed from another thread.
        conn = sqlite3.connect(
            self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_S * 1000)}")
        # WAL + NORMAL: no fsync per commit; a power cut may lose the last entries, never corrupt the file.
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; a forked child opens its own instead of sharing the parent's."""
        holder: _Conn | None = getattr(self._local, "holder", None)
        if holder is None or holder.pid != os.getpid():
            holder = self._local.holder = _Conn(self._connect())
            with self._opened_lock:
                self._opened.add(holder)
        return holder.conn

    def close(self) -> None:
        """Close every connection still open (call when no thread is using the cache any more)."""
        with self._opened_lock:
            opened = list(self._opened)
            self._opened.clear()
        for holder in opened:
            holder.close()
        self._local = threading.local()

    def get(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, model: str, value: str) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO results (key, model, value, created) VALUES (?, ?, ?, ?)",
            (key, model, value, time.time()),
        )

    def record_failure(self, key: str, model: str, error: str) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO failures (key, model, error, created) VALUES (?, ?, ?, ?)",
            (key, model, error, time.time()),
        )

    def failed_before(self, key: str) -> bool:
        return self._conn().execute("SELECT 1 FROM failures WHERE key = ?", (key,)).fetchone() is not None

    def forget_failure(self, key: str) -> None:
        self._conn().execute("DELETE FROM failures WHERE key = ?", (key,))

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM results").fetchone()[0])


class _Conn:
    """A thread's connection, closed when the thread ends (its thread-local storage is dropped)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.pid = os.getpid()

    def close(self) -> None:
        if self.pid == os.getpid():  # never close a parent's connection from a forked child
            self.conn.close()

    def __del__(self) -> None:
        self.close()
