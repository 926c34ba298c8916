"""Answers the ZenML store gave the plan, remembered beside a local store for as long as it provably has not
changed, so the dry run of a config whose store holds earlier runs does not import ZenML to ask again.

Why a memo: importing any part of ZenML runs `zenml/__init__` (its pydantic models: about 2 s of CPU) and
opening its SQL store costs about 2 s more (docs/measured.md, "dry-run-start"); asking with one query
instead of one per run, or through the store's client alone, saves a fraction of a second of those 4, so
the dry run would stay near 8 s. The memo is trusted only while it is provably current:

- only for ZenML's local SQLite store as its global config names it: a server (other clients write to it
  unseen) and a store set by `ZENML_STORE_*` variables are always asked;
- under a stamp of everything that changes when the database does: the file's identity, size and
  modification time and SQLite's file change counter (header offset 24, which every committed write
  transaction increments in rollback-journal mode; a database in WAL mode, or with a journal beside it, a
  write in progress, has no stamp), with ZenML's global config file (the active stack and project) and the
  `ZENML_*` environment;
- an answer is filed only when the stamp was the same just before and just after it was asked (the store
  open), so it is never filed under a state other than the one it was read from.

A schedule or another client that ran since changed the stamp: the memo is then ignored, the store asked
and the answer remembered for the next dry run; a real run remembers, at its end, the answers its config's
next dry run asks (`cli.earlier_runs.remember_for_the_next_plan`)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from ragbench.hashing import sha256_hex

MEMO_NAME = "ragbench-store-memo.json"
# SQLite's database header: its first 16 bytes, the file format's read and write versions (1: rollback
# journal, 2: WAL) and the file change counter.
SQLITE_MAGIC = b"SQLite format 3\x00"
VERSION_BYTES = slice(18, 20)
CHANGE_COUNTER = slice(24, 28)

T = TypeVar("T")
logger = logging.getLogger("ragbench")


def local_database() -> Path | None:
    """The SQLite file of the store ZenML's global config names, or None when the store is not a local
    SQLite file whose secrets live in it too (a server, another database, a store set by variables)."""
    import yaml

    from pipelines.options import zenml_config_folder

    if any(name.startswith("ZENML_STORE_") for name in os.environ):
        return None
    try:
        store = (yaml.safe_load((zenml_config_folder() / "config.yaml").read_text()) or {}).get("store")
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(store, dict) or store.get("type") != "sql":
        return None
    url, secrets = str(store.get("url", "")), store.get("secrets_store") or {"type": "sql"}
    if not url.startswith("sqlite:///") or secrets.get("type") != "sql":
        return None
    return Path(url.removeprefix("sqlite:///"))


def store_stamp() -> dict[str, Any] | None:
    """What changes whenever the local store's database does, or None when no stamp proves it unchanged
    (not a local SQLite store, WAL mode, a journal beside it, an unreadable file)."""
    from pipelines.options import zenml_config_folder

    database = local_database()
    if database is None or any(Path(f"{database}{suffix}").exists() for suffix in ("-journal", "-wal")):
        return None
    try:
        with database.open("rb") as file:
            header = file.read(100)
        status = database.stat()
        global_config = (zenml_config_folder() / "config.yaml").read_text()
    except OSError:
        return None
    if not header.startswith(SQLITE_MAGIC) or header[VERSION_BYTES] != b"\x01\x01":
        return None
    return {
        "database": str(database),
        "file": [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns],
        "change_counter": int.from_bytes(header[CHANGE_COUNTER], "big"),
        "global_config": sha256_hex([global_config]),
        "environment": {name: os.environ[name] for name in sorted(os.environ) if name.startswith("ZENML_")},
    }


def _answers(stamp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The memo's answers when it was filed under `stamp`, else none."""
    try:
        memo = json.loads((Path(stamp["database"]).parent / MEMO_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return memo["answers"] if isinstance(memo, dict) and memo.get("stamp") == stamp else {}


def _file(stamp: dict[str, Any], question: str, key: str, answer: Any) -> None:
    """Add one answer to the memo of `stamp` (a memo of another stamp is replaced), atomically."""
    answers = _answers(stamp)
    answers.setdefault(question, {})[key] = answer
    path = Path(stamp["database"]).parent / MEMO_NAME
    scratch = path.with_name(f"{MEMO_NAME}.{os.getpid()}.tmp")
    try:
        scratch.write_text(json.dumps({"stamp": stamp, "answers": answers}))
        os.replace(scratch, path)
    except OSError as error:  # a read-only folder: the next dry run asks the store again
        logger.debug("store memo not written: %s", error)


def remembered(
    question: str,
    key: str,
    ask: Callable[[], T],
    dump: Callable[[T], Any] = lambda value: value,
    load: Callable[[Any], T] = lambda value: value,
) -> T:
    """The store's answer to `question` about `key`: the memo's while the store is provably unchanged since
    it was filed (`store_stamp`), else `ask()`ed of the opened store and filed when the store did not change
    while it answered. `dump` and `load` turn the answer into JSON and back; an answer this version cannot
    load (filed by another one) is asked again."""
    from cli.launch import open_store

    stamp = store_stamp()
    if stamp is not None and key in (filed := _answers(stamp).get(question, {})):
        try:
            return load(filed[key])
        except (ValidationError, TypeError, ValueError, KeyError):
            pass
    open_store()  # opening a new store writes its tables: the stamp is taken after
    before = store_stamp()
    answer = ask()
    if before is not None and store_stamp() == before:
        _file(before, question, key, dump(answer))
    return answer
