"""The environment-variable page lists every `RAGBENCH_*` variable the code, the tests, the benches and the
build read, and every other variable the product reads or sets by name: a variable nobody can find is a
setting nobody can use."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "environment.md"
SOURCES = ("ragbench", "cli", "steps", "pipelines", "materializers", "tests", "bench", "docker")
OWN = re.compile(r"\bRAGBENCH_[A-Z_]+\b")
# another package's variable the product reads or sets by a literal name
READ_OR_SET = re.compile(r"os\.environ(?:\.get|\.setdefault)?[\[(]\s*\"([A-Z][A-Z0-9_]+)\"")


def source_files() -> list[Path]:
    found = [ROOT / "Makefile", ROOT / "run.py"]
    for folder in SOURCES:
        found += [
            path
            for path in (ROOT / folder).rglob("*")
            if path.is_file() and (path.suffix in {".py", ".sh"} or path.name == "Dockerfile")
        ]
    return found


def test_every_variable_the_code_names_is_on_the_page() -> None:
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", PAGE.read_text(encoding="utf-8")))
    named: dict[str, str] = {}
    for path in source_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in OWN.findall(text):
            named.setdefault(name, str(path.relative_to(ROOT)))
        if "tests" not in path.relative_to(ROOT).parts:
            for name in READ_OR_SET.findall(text):
                named.setdefault(name, str(path.relative_to(ROOT)))
    missing = {name: where for name, where in named.items() if name not in listed}
    assert not missing, f"docs/reference/environment.md does not list {missing}"
    assert {"RAGBENCH_CACHE_DIR", "HF_HUB_OFFLINE", "OMP_WAIT_POLICY"} <= set(named)  # the scan finds them
