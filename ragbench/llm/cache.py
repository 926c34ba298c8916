"""Cache of successful LLM results, so a re-run (or a run resumed after a crash) calls nothing twice;
failed calls are remembered apart and never served.

Two backends behind one interface (`open_result_cache`): a SQLite file in a folder (one machine) and a
SQL database by URL (a team's stack, where every pod must see the same cache: PostgreSQL through
SQLAlchemy and psycopg). SQLite runs in WAL mode: readers never block, a writer waits for another (busy
timeout), and it is safe across threads and processes on one machine, not on a network file system.
Each thread keeps its own SQLite connection: opening and closing one per operation made SQLite
checkpoint and fsync the WAL every time (~15 ms per lookup).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from contextlib import closing
from pathlib import Path
from typing import Any

from ragbench.cache_home import cache_dir
from ragbench.hashing import canonical_json, sha256_hex
from ragbench.llm.redaction import refuse_url_credentials

# (calls, tokens, cost in USD): what one call is charged, or an account's caps (`ragbench.llm.budget`).
Charge = tuple[int, int, float]

# Bump when the way requests are built changes (e.g. the schema instruction), to invalidate old entries.
CACHE_KEY_VERSION = 1
_BUSY_TIMEOUT_S = 60.0


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that changes the output (never credentials)."""
    canonical = canonical_json(
        {"v": CACHE_KEY_VERSION, **payload}, compact=True, ascii_only=False, default=str
    )
    return sha256_hex([canonical])


class ResultCache:
    """Key -> JSON text store in ``<directory>/llm-cache.sqlite3``."""

    location_kind = "folder"

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
            # What a run's calls were charged against its cap (`ragbench.llm.budget`): one row per run, read
            # and written by every step of the run, wherever it runs.
            conn.execute(
                "CREATE TABLE IF NOT EXISTS spend (account TEXT PRIMARY KEY, calls INTEGER NOT NULL,"
                " tokens INTEGER NOT NULL, cost REAL NOT NULL, refused INTEGER NOT NULL,"
                " created REAL NOT NULL)"
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

    def charge(self, account: str, charge: Charge, caps: Charge) -> bool:
        """Add `charge` to the account unless that would take it past any of `caps`, in one statement (so
        two processes charging at once can never both pass the last unit); False, and one more refusal
        counted, when it would."""
        conn = self._conn()
        conn.execute(
            "INSERT OR IGNORE INTO spend (account, calls, tokens, cost, refused, created)"
            " VALUES (?, 0, 0, 0, 0, ?)",
            (account, time.time()),
        )
        charged = conn.execute(
            "UPDATE spend SET calls = calls + ?, tokens = tokens + ?, cost = cost + ? WHERE account = ?"
            " AND calls + ? <= ? AND tokens + ? <= ? AND cost + ? <= ?",
            (*charge, account, charge[0], caps[0], charge[1], caps[1], charge[2], caps[2]),
        ).rowcount
        if not charged:
            conn.execute("UPDATE spend SET refused = refused + 1 WHERE account = ?", (account,))
        return bool(charged)

    def settle(self, account: str, tokens: int, cost: float) -> None:
        """Correct a charge made in advance by what the call really used (a difference, often negative)."""
        self._conn().execute(
            "UPDATE spend SET tokens = tokens + ?, cost = cost + ? WHERE account = ?", (tokens, cost, account)
        )

    def spent(self, account: str) -> tuple[int, int, float, int]:
        """(calls, tokens, cost, refused) charged to the account so far; zeros for an unknown one."""
        row = (
            self._conn()
            .execute("SELECT calls, tokens, cost, refused FROM spend WHERE account = ?", (account,))
            .fetchone()
        )
        return (0, 0, 0.0, 0) if row is None else (int(row[0]), int(row[1]), float(row[2]), int(row[3]))

    def describe(self) -> str:
        return str(self.path)


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


def remember_outcome(
    cache: ResultCache | SQLResultCache, key: str, label: str, value: str | None, error: str | None
) -> bool:
    """Store a success (`value`), forgetting an earlier failure of the same key; remember a failure apart,
    never as a result, so a later run makes the call again. True when the key had failed before: the call
    just made was the retry of an earlier failure."""
    retried = cache.failed_before(key)
    if value is not None:
        cache.put(key, label, value)
        if retried:
            cache.forget_failure(key)
    else:
        cache.record_failure(key, label, error or "failed")
    return retried


def is_database_url(location: str | Path) -> bool:
    """`postgresql+psycopg://...` and the like, as opposed to a folder for the SQLite file."""
    return isinstance(location, str) and "://" in location


def open_result_cache(location: str | Path | None) -> ResultCache | SQLResultCache:
    """The cache at `location`: a database URL, else a folder (default ``$RAGBENCH_CACHE_DIR/llm``)."""
    if location is not None and is_database_url(location):
        return SQLResultCache(str(location))
    return ResultCache(location if location is not None else cache_dir("llm"))


class SQLResultCache:
    """The same store in a SQL database every process and pod can reach. The URL carries no password
    (`check_cache_url`): libpq reads it from PGPASSWORD or ~/.pgpass where the step runs. Writes are
    upserts, so processes writing the same key at once keep one row and lose none."""

    location_kind = "database"

    def __init__(self, url: str) -> None:
        from sqlalchemy import BigInteger, Column, Float, MetaData, String, Table, Text, create_engine, text

        check_cache_url(url)
        self.url = url
        self._engine = create_engine(url, pool_pre_ping=True, future=True)
        self._pid = os.getpid()
        metadata = MetaData()

        def keyed_table(name: str, payload: str) -> Table:
            """key -> (model, payload, created): the same shape as the SQLite tables."""
            return Table(
                name,
                metadata,
                Column("key", String(64), primary_key=True),
                *(Column(column, Text, nullable=False) for column in ("model", payload)),
                Column("created", Float, nullable=False),
            )

        self.results = keyed_table("ragbench_llm_results", "value")
        self.failures = keyed_table("ragbench_llm_failures", "error")
        self.spend = Table(
            "ragbench_llm_spend",
            metadata,
            Column("account", String(64), primary_key=True),
            # 64-bit: an uncapped dimension is compared against 2^62 (`budget`), past PostgreSQL's INTEGER
            *(Column(column, BigInteger, nullable=False) for column in ("calls", "tokens", "refused")),
            Column("cost", Float, nullable=False),
            Column("created", Float, nullable=False),
        )
        with self._engine.begin() as conn:
            if self._engine.dialect.name == "postgresql":  # concurrent CREATE TABLE IF NOT EXISTS races
                conn.execute(text("SELECT pg_advisory_xact_lock(74031977)"))
            metadata.create_all(conn, checkfirst=True)

    def _connection(self) -> Any:
        """A transaction on a pooled connection (commits on leaving the `with`)."""
        if self._pid != os.getpid():  # a forked child must not share the parent's pooled connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        return self._engine.begin()

    def _insert(self, table: Any) -> Any:
        """The dialect's INSERT, which has ON CONFLICT."""
        dialect = self._engine.dialect.name
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            raise ValueError(f"LLM cache database {dialect!r} is not supported (PostgreSQL or SQLite)")
        return insert(table)

    def _upsert(self, table: Any, row: dict[str, Any], value_column: str) -> None:
        statement = self._insert(table).values(**row)
        statement = statement.on_conflict_do_update(
            index_elements=["key"],
            set_={value_column: statement.excluded[value_column], "created": statement.excluded.created},
        )
        with self._connection() as conn:
            conn.execute(statement)

    def get(self, key: str) -> str | None:
        from sqlalchemy import select

        with self._connection() as conn:
            row = conn.execute(select(self.results.c.value).where(self.results.c.key == key)).first()
        return None if row is None else str(row[0])

    def put(self, key: str, model: str, value: str) -> None:
        self._upsert(
            self.results, {"key": key, "model": model, "value": value, "created": time.time()}, "value"
        )

    def record_failure(self, key: str, model: str, error: str) -> None:
        self._upsert(
            self.failures, {"key": key, "model": model, "error": error, "created": time.time()}, "error"
        )

    def failed_before(self, key: str) -> bool:
        from sqlalchemy import select

        with self._connection() as conn:
            return (
                conn.execute(select(self.failures.c.key).where(self.failures.c.key == key)).first()
                is not None
            )

    def forget_failure(self, key: str) -> None:
        with self._connection() as conn:
            conn.execute(self.failures.delete().where(self.failures.c.key == key))

    def __len__(self) -> int:
        from sqlalchemy import func, select

        with self._connection() as conn:
            return int(conn.execute(select(func.count()).select_from(self.results)).scalar_one())

    def charge(self, account: str, charge: Charge, caps: Charge) -> bool:
        """As `ResultCache.charge`: one conditional UPDATE, which PostgreSQL re-checks on the row it locks,
        so concurrent steps in several pods never pass a cap together."""
        spend = self.spend.c
        row = {"account": account, "calls": 0, "tokens": 0, "cost": 0.0, "refused": 0, "created": time.time()}
        with self._connection() as conn:
            conn.execute(self._insert(self.spend).values(**row).on_conflict_do_nothing())
            charged = conn.execute(
                self.spend.update()
                .where(
                    (spend.account == account)
                    & (spend.calls + charge[0] <= caps[0])
                    & (spend.tokens + charge[1] <= caps[1])
                    & (spend.cost + charge[2] <= caps[2])
                )
                .values(
                    calls=spend.calls + charge[0],
                    tokens=spend.tokens + charge[1],
                    cost=spend.cost + charge[2],
                )
            ).rowcount
            if not charged:
                conn.execute(
                    self.spend.update().where(spend.account == account).values(refused=spend.refused + 1)
                )
        return bool(charged)

    def settle(self, account: str, tokens: int, cost: float) -> None:
        spend = self.spend.c
        with self._connection() as conn:
            conn.execute(
                self.spend.update()
                .where(spend.account == account)
                .values(tokens=spend.tokens + tokens, cost=spend.cost + cost)
            )

    def spent(self, account: str) -> tuple[int, int, float, int]:
        from sqlalchemy import select

        spend = self.spend.c
        with self._connection() as conn:
            row = conn.execute(
                select(spend.calls, spend.tokens, spend.cost, spend.refused).where(spend.account == account)
            ).first()
        return (0, 0, 0.0, 0) if row is None else (int(row[0]), int(row[1]), float(row[2]), int(row[3]))

    def describe(self) -> str:
        return redacted_url(self.url)

    def close(self) -> None:
        self._engine.dispose()


def check_cache_url(url: str) -> None:
    """A cache URL ends up in configs, step parameters and logs: it must not carry a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise ValueError(f"not a database URL: {redacted_url(url)} ({error})") from None
    if parsed.password is not None:
        raise ValueError(
            "the LLM cache URL must not contain a password (it is stored with the run): give the password "
            "to the database client where the steps run, e.g. PGPASSWORD or ~/.pgpass"
        )
    refuse_url_credentials(
        # a database user name is no secret here (the password is refused above); its query is
        url.replace(f"{parsed.username}@", "", 1) if parsed.username else url,
        "the LLM cache URL",
        "give the secret to the database client where the steps run (PGPASSWORD, ~/.pgpass, a ZenML "
        "secret in orchestration.secrets)",
    )


def redacted_url(url: str) -> str:
    """The URL with any password replaced, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is shown only by its scheme
        return url.split("://", 1)[0] + "://..."
