"""A package whose entry point cannot be loaded is reported by name and left out; every other plugin of the
kind still loads (one broken install must not stop every lookup)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragbench.plugins import Plugin, Registry

GROUP = "ragbench.test_entry_points"


class Gadget(Plugin):
    """The kind of plugin this test registers."""


class GoodGadget(Gadget):
    name = "good"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two installed packages' metadata on the import path: one entry point whose module is missing, one
    naming `GoodGadget`."""
    for package, line in (
        ("broken_gadget", "broken = no_such_gadget_module:Gadget"),
        ("good_gadget", f"good = {__name__}:GoodGadget"),
    ):
        metadata = tmp_path / f"{package}-0.1.dist-info"
        metadata.mkdir()
        (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
        (metadata / "entry_points.txt").write_text(f"[{GROUP}]\n{line}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_broken_entry_point_is_named_and_skipped(installed: None, caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry("gadget", GROUP, Gadget, {})
    with caplog.at_level(logging.WARNING, logger="ragbench.plugins"):
        assert registry.classes(["good"]) == [GoodGadget]
    (warning,) = [record.getMessage() for record in caplog.records]
    assert "broken = no_such_gadget_module:Gadget" in warning and GROUP in warning
    assert "ModuleNotFoundError" in warning and "no_such_gadget_module" in warning
    with pytest.raises(ValueError, match=r"unknown gadget.*broken.*available: good"):
        registry.classes(["broken"])
