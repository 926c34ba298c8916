"""pyproject.toml's `[project]` agrees with what `make` installs: the same packages as requirements.txt (and
requirements-dev.txt for the `dev` extra), each pinned version inside its declared range; the version is
ragbench.__version__; the console command is run.py's `main`; and the build backend builds an editable
install only."""

from __future__ import annotations

import importlib
import importlib.util
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import cli.main
import run

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pinned(file: str) -> dict[str, Requirement]:
    """A requirements file's pins by canonical name, each `name[extras]==version`."""
    lines = (line.split("#")[0].strip() for line in (ROOT / file).read_text(encoding="utf-8").splitlines())
    requirements = [Requirement(line) for line in lines if line]
    for requirement in requirements:
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{file}: {requirement} is not an exact pin"
    return {canonicalize_name(requirement.name): requirement for requirement in requirements}


def declared(requirements: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(req.name): req for req in map(Requirement, requirements)}


@pytest.mark.parametrize(
    ("file", "requirements"),
    [
        ("requirements.txt", PYPROJECT["project"]["dependencies"]),
        ("requirements-dev.txt", PYPROJECT["project"]["optional-dependencies"]["dev"]),
    ],
)
def test_the_declared_dependencies_are_the_pinned_ones(file, requirements):
    pins, ranges = pinned(file), declared(requirements)
    assert sorted(pins) == sorted(ranges), f"{file} and pyproject.toml name different packages"
    for name, pin in pins.items():
        (exact,) = pin.specifier
        declared_range = ranges[name]
        assert declared_range.extras == pin.extras, name
        assert declared_range.specifier.contains(exact.version), f"{name}: {exact.version} not in range"
        assert str(declared_range.specifier) == f"~={exact.version}", f"{name}: the pin's release series"


def test_the_version_is_the_packages_and_the_command_is_run_pys():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ragbench.__version__"}
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    module, function = PYPROJECT["project"]["scripts"]["ragbench"].split(":")
    assert getattr(importlib.import_module(module), function) is run.main is cli.main.main


def test_the_backend_builds_editable_installs_and_refuses_a_wheel(tmp_path):
    system = PYPROJECT["build-system"]
    spec = importlib.util.spec_from_file_location(
        system["build-backend"], ROOT / system["backend-path"][0] / f"{system['build-backend']}.py"
    )
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    assert callable(backend.build_editable) and callable(backend.prepare_metadata_for_build_editable)
    for hook in (backend.build_wheel, backend.prepare_metadata_for_build_wheel):
        with pytest.raises(SystemExit, match=r"pip install -e <clone>"):
            hook(str(tmp_path))
    assert not list(tmp_path.iterdir())
