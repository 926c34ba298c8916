"""Rows of a table, wherever it lives: a local .jsonl/.json/.csv/.parquet file or a Hugging Face dataset.

One reader for the knowledge base and the eval cases, both through `datasets`, so a Hub name, a local
dataset folder and a plain file behave the same way; and one CSV writer for every table a run exports.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

TABLE_SUFFIXES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class TableError(ValueError):
    """The table cannot be read; the message names it and says why."""


# What PyYAML raises for text it cannot load: besides YAMLError, its constructors let ValueError and
# friends escape for values such as `2001-02-30` or `!!int x`.
YAML_ERRORS = (yaml.YAMLError, ValueError, TypeError, AttributeError, IndexError, OverflowError)


def not_utf8(error: UnicodeDecodeError) -> str:
    """The message for a file that is not UTF-8 text."""
    return f"not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}); save it as UTF-8"


def read_utf8(path: Path) -> str:
    """A text file's content; TableError naming the file and the first bad byte if it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TableError(f"{path}: {not_utf8(error)}") from None


def load_yaml(text: str, origin: object) -> Any:
    """Parsed YAML (or JSON); every error PyYAML can raise becomes a TableError naming `origin`."""
    try:
        return yaml.safe_load(text)
    except YAML_ERRORS as error:
        raise TableError(f"{origin}: not valid YAML: {error}") from None


def read_table_file(file: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    import datasets

    file = Path(file)
    builder = TABLE_SUFFIXES.get(file.suffix.lower())
    if builder is None:
        raise TableError(f"{file}: unsupported table format (use {', '.join(TABLE_SUFFIXES)})")
    if not file.is_file():
        raise TableError(f"{file}: file not found")
    if builder != "parquet":
        read_utf8(file)  # a clear message before `datasets` gives a long traceback
    try:
        table = datasets.load_dataset(builder, data_files=str(file), split="train")
    except Exception as error:
        raise TableError(f"cannot read {file}: {error}") from error
    return _rows(table, limit)


def read_dataset(name: str, split: str, revision: str | None = None, limit: int | None = None) -> list[dict]:
    """A Hub dataset (``owner/name``) or a local dataset folder, one split."""
    import datasets

    try:
        table = datasets.load_dataset(name, split=split, revision=revision)
    except Exception as error:
        raise TableError(f"cannot load dataset {name} (split {split}): {error}") from error
    return _rows(table, limit)


def _rows(table: Any, limit: int | None) -> list[dict[str, Any]]:
    if limit:
        table = table.select(range(min(limit, len(table))))
    return table.to_list()


def table_columns(rows: list[dict]) -> list[str]:
    """Every column of any row, in first-seen order: rows of different cells may differ in columns."""
    return list(dict.fromkeys(column for row in rows for column in row))


def rows_to_csv(rows: list[dict]) -> str:
    """The project's one CSV writer (results, comparisons): every column of any row, a row without one
    leaves it empty; no rows is an empty text."""
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=table_columns(rows), lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class JsonLineError(TableError):
    """A line of a JSON Lines text that is not JSON. Its message names the file and the line; `line` and
    `error` (the decoder's) let a caller that words its refusals its own way (the labels file) say it."""

    def __init__(self, path: object, line: int, error: json.JSONDecodeError):
        super().__init__(f"{path}:{line}: invalid JSON: {error}")
        self.line = line
        self.error = error


def jsonl_records(text: str, path: object) -> Iterator[tuple[int, Any]]:
    """(line number, object) for every non-blank line of a JSON Lines text, read line by line rather than
    through `datasets` (which unifies the rows' schemas, so a missing or extra key could not be pointed at),
    one at a time, so a caller checking each record refuses the first bad line, whatever is wrong with it:
    JsonLineError naming `path` (the file) and the line of one that is not JSON."""
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise JsonLineError(path, line_number, error) from None
        yield line_number, record
