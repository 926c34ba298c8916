"""Inputs named by URI (``s3://``, ``gs://``, ``file://``...) are read through fsspec where the step runs,
so a pod needs nothing from the client's disk. The loaders stay path-based: a URI's file or folder is
copied to a temporary folder first. A URI scheme needs its fsspec package where it is read (s3fs for
``s3://``, gcsfs for ``gs://``); ``file://`` needs none."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class SourceError(ValueError):
    """A URI that cannot be read: unknown scheme, missing fsspec package, nothing there."""


def is_uri(value: str) -> bool:
    return bool(_URI.match(value))


@contextmanager
def local_copy(location: str) -> Iterator[Path]:
    """`location` as a local path: a URI's file or folder (recursively) copied into a temporary folder that
    is removed afterwards, under the same base name; a plain path as it is."""
    if not is_uri(location):
        yield Path(location)
        return
    import fsspec

    try:
        filesystem, path = fsspec.core.url_to_fs(location)
    except (ImportError, ValueError) as error:  # an unknown scheme, or its package is not installed
        raise SourceError(f"cannot read {location}: {error}") from None
    if not filesystem.exists(path):
        raise SourceError(f"{location} does not exist")
    with tempfile.TemporaryDirectory(prefix="ragbench-input-") as folder:
        target = Path(folder) / (PurePosixPath(path.rstrip("/")).name or "input")
        if filesystem.isdir(path):
            filesystem.get(path.rstrip("/") + "/", str(target) + "/", recursive=True)
            target.mkdir(exist_ok=True)  # an empty folder copies to nothing
        else:
            filesystem.get(path, str(target))
        yield target
