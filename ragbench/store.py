"""The artifact store as the core sees it: a protocol, never ZenML itself.

A few core functions read what earlier runs stored (an eval set `run.py testset` made, a trained reranker's
checkpoint, a run to review) or store a version (the review labels). They ask `given_store()`; the process
that runs them gives the store once with `use_store`: the steps package (so every step process and every
pipeline definition) gives the ZenML adapter, `steps.store.ZenMLStore`, and tests give a fake. The core
stays importable, and testable, without ZenML.

Imports nothing of ragbench, so every sub-package may import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class StoredArtifact(Protocol):
    """One version of a stored artifact."""

    @property
    def id(self) -> Any: ...

    @property
    def version(self) -> str: ...

    @property
    def run_metadata(self) -> Mapping[str, Any]: ...

    def load(self) -> Any: ...


class ArtifactStore(Protocol):
    """What the core reads from, and writes to, the store of runs and artifacts."""

    def artifact(self, name: str, version: str | None = None) -> StoredArtifact:
        """The named version of artifact `name`, or its newest; KeyError when there is none."""
        ...

    def artifact_by_id(self, artifact_id: str) -> StoredArtifact:
        """The artifact version with this id; KeyError when there is none."""
        ...

    def keep(
        self, name: str, value: Any, digest_key: str, digest: str, metadata: Mapping[str, Any] | None = None
    ) -> StoredArtifact:
        """The newest version of `name` when its metadata's `digest_key` is `digest` (the same content),
        else a new version holding `value`, with `{digest_key: digest, **metadata}` as its metadata."""
        ...

    def runs(self, pipeline: str | None, tags: Sequence[str] = (), size: int = 50) -> list[Any]:
        """Runs of `pipeline` (of any pipeline when None) holding every tag, newest first; none when the
        pipeline never ran."""
        ...

    def run(self, name_or_id: str) -> Any:
        """The run with this name or id; KeyError when there is none."""
        ...


class StoreNotGiven(RuntimeError):
    """A core function needed the store, and the process gave none."""


_given: ArtifactStore | None = None


def use_store(store: ArtifactStore | None) -> ArtifactStore | None:
    """Give the core its store; returns the one it replaces, so a test can give that back."""
    global _given
    replaced, _given = _given, store
    return replaced


def given_store() -> ArtifactStore:
    """The store the process was given: by importing `steps` (a step's process) or by the command line's
    `cli.launch.open_store`."""
    if _given is None:
        raise StoreNotGiven(
            "no artifact store was given: a step's process gets it from `steps`, the command line from "
            "`cli.launch.open_store`"
        )
    return _given
