"""Which code made a run: the ragbench release, the git commit and whether the tree was modified (where
ragbench runs from a git checkout), and the versions of the packages that shape its numbers.

Two halves, read in two places. The checkout is read on the client when the run is planned and handed to
the pipeline as data: a step on another machine has no checkout (its image was built from the client's),
and a ZenML schedule's runs run the code it was compiled from. The package versions are read where the
steps run, since an image may pin other versions than the client's virtual environment. Both are read
without importing the packages (importlib.metadata, the `git` command): torch alone takes seconds.

Imports nothing of ragbench but its release number, so every module may import it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragbench import __version__

# The packages whose version can move a run's numbers or its running (the orchestration, the LLM client,
# the local LLM, the embedding and reranking models, the vector index), by their distribution names.
KEY_PACKAGES = (
    "zenml",
    "litellm",
    "llama-cpp-python",
    "torch",
    "sentence-transformers",
    "faiss-cpu",
    "ragatouille",
)
# The folder holding the ragbench package: a checkout's top level when ragbench runs from one.
SOURCE_ROOT = Path(__file__).resolve().parent.parent
READ_AT_MOST = 1 << 20  # bytes of an untracked file whose content the modified tree's digest reads
COMMIT_SHOWN = 12  # characters of a commit a line shows (the metadata keeps all 40)

# Run-level metadata keys (flat and ':'-free, as `ragbench.runs.record` writes every key).
VERSION_KEY = "ragbench_version"
COMMIT_KEY = "git_commit"
DIRTY_KEY = "git_dirty"
CHANGES_KEY = "git_changes_sha256"
PACKAGES_KEY = "package_versions"


class Checkout(BaseModel, frozen=True):
    """The client's git checkout of ragbench when the run was planned: its commit, and whether tracked
    files were changed or untracked ones added (`dirty`: the commit alone does not name the code), with a
    digest of those changes (`changes`: two runs on one commit with the same edits ran the same code). All
    None when ragbench does not run from a checkout (an installed package, no `git`)."""

    commit: str | None = None
    dirty: bool | None = None
    changes: str | None = None


def read_checkout(root: Path | None = None) -> Checkout:
    """The checkout `root` (default: the folder holding this ragbench, `SOURCE_ROOT`) is the top of, read
    with `git`; none when `root` is not a checkout's top (a ragbench installed into site-packages inside
    some other project's repository is not that project's code), when `git` is missing or fails."""
    root = SOURCE_ROOT if root is None else root
    environment = os.environ | {
        "GIT_OPTIONAL_LOCKS": "0"
    }  # `status` must not write the index of a tree in use

    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *arguments],
                capture_output=True,
                text=True,
                timeout=30,
                env=environment,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != root.resolve():
        return Checkout()
    commit, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    if commit is None or status is None:  # a repository without a commit yet
        return Checkout()
    if not status.strip():
        return Checkout(commit=commit.strip(), dirty=False)
    digest = hashlib.sha256((git("diff", "HEAD", "--binary") or "").encode())
    untracked = git("ls-files", "--others", "--exclude-standard", "-z") or ""
    for name in sorted(filter(None, untracked.split("\0"))):
        digest.update(b"\0" + name.encode())
        with contextlib.suppress(OSError):  # a file removed since git listed it
            path = root / name
            stat = path.stat()
            # a large file (documents copied into the clone, say) by its size and time, not read every run
            digest.update(
                b"\0"
                + (
                    path.read_bytes()
                    if stat.st_size <= READ_AT_MOST
                    else f"{stat.st_size}:{stat.st_mtime_ns}".encode()
                )
            )
    return Checkout(commit=commit.strip(), dirty=True, changes=digest.hexdigest())


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    """The installed version of each of `names` (a distribution not installed is left out)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


class CodeVersion(BaseModel, frozen=True):
    """The code a run ran: the ragbench release and the packages where its steps ran, the client's checkout
    it was planned from."""

    ragbench_version: str
    checkout: Checkout = Checkout()
    packages: dict[str, str] = {}

    @classmethod
    def here(cls, checkout: Checkout) -> CodeVersion:
        """This process's release and packages (read where the steps run) with the client's `checkout`."""
        return cls(ragbench_version=__version__, checkout=checkout, packages=package_versions())

    def metadata(self) -> dict[str, Any]:
        """Flat run metadata: the release, the commit and the modified flag where there was a checkout,
        and the packages' versions (the key that says a run recorded its code at all)."""
        flat: dict[str, Any] = {VERSION_KEY: self.ragbench_version, PACKAGES_KEY: dict(self.packages)}
        if self.checkout.commit is not None:
            flat[COMMIT_KEY] = self.checkout.commit
            flat[DIRTY_KEY] = bool(self.checkout.dirty)
            if self.checkout.changes is not None:
                flat[CHANGES_KEY] = self.checkout.changes
        return flat

    @classmethod
    def from_metadata(cls, flat: Mapping[str, Any]) -> CodeVersion | None:
        """As `metadata` wrote it; None for a run made before runs recorded their code (no packages key)."""
        if not isinstance(packages := flat.get(PACKAGES_KEY), Mapping):
            return None
        commit = flat.get(COMMIT_KEY)
        return cls(
            ragbench_version=str(flat.get(VERSION_KEY) or "unknown"),
            checkout=Checkout(commit=commit, dirty=bool(flat.get(DIRTY_KEY)), changes=flat.get(CHANGES_KEY))
            if isinstance(commit, str)
            else Checkout(),
            packages={str(name): str(version) for name, version in packages.items()},
        )

    def commit_text(self) -> str:
        """The commit as a line names it: short, with its modified flag; or that there was no checkout."""
        commit = self.checkout.commit
        if commit is None:
            return "no git checkout"
        return f"commit {commit[:COMMIT_SHOWN]}" + (" (modified tree)" if self.checkout.dirty else "")

    def line(self) -> str:
        """The report's and the summary's line on the code."""
        packages = ", ".join(f"{name} {version}" for name, version in sorted(self.packages.items()))
        return (
            f"Code: ragbench {self.ragbench_version}, {self.commit_text()}; {packages or 'no key package'}."
        )

    def changes_from(self, baseline: CodeVersion | None) -> list[str]:
        """How the code of `baseline` differs from this run's, one phrase per difference; empty when both
        ran the same commit with the same uncommitted changes (or none) and the same packages. A baseline
        that recorded nothing is a difference: nothing says it ran this code."""
        if baseline is None:
            return [
                "the baseline recorded no code (a run from before runs recorded their commit and packages)"
            ]
        changes = []
        if baseline.ragbench_version != self.ragbench_version:
            changes.append(f"ragbench {baseline.ragbench_version} -> {self.ragbench_version}")
        before, now = baseline.checkout, self.checkout
        if before.commit != now.commit:
            changes.append(f"{baseline.commit_text()} -> {self.commit_text()}")
        elif before.changes != now.changes:
            at = f"commit {str(now.commit)[:COMMIT_SHOWN]}"
            if before.dirty and now.dirty:
                changes.append(f"both runs ran a modified tree at {at}, with other uncommitted changes")
            else:
                changes.append(
                    f"{'the baseline' if before.dirty else 'this run'} ran a modified tree at {at}"
                )
        for name in sorted(set(baseline.packages) | set(self.packages)):
            old, new = baseline.packages.get(name), self.packages.get(name)
            if old != new:
                changes.append(f"{name} {old or 'not installed'} -> {new or 'not installed'}")
        return changes
