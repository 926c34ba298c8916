"""The committed reference pages under docs/ are what the code generates now: a page that differs (a config
key, an option, a metric or a docstring changed without `make reference`) fails, naming the page with a
short diff; and the comparison does catch a planted change."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "generate_reference.py"
DIFF_LINES = 40


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return load_generator()


@pytest.fixture(scope="module")
def pages(generator) -> dict[str, str]:
    """Every page as the code generates it now, by its path under docs/."""
    return generator.generate_pages()


def short(diff: str) -> str:
    lines = diff.splitlines()
    return "\n".join(
        lines[:DIFF_LINES] + ([f"... ({len(lines) - DIFF_LINES} more lines)"] * (len(lines) > DIFF_LINES))
    )


def test_every_committed_page_is_what_the_code_generates(generator, pages):
    assert set(pages) == {
        "reference/config.md",
        "reference/cli.md",
        "reference/metrics.md",
        "reference/python-api.md",
        "reference/models.md",
        "reference/config.schema.json",
        "how-to/container-image.md",
    }
    stale = generator.stale_pages(pages)
    report = "\n\n".join(f"docs/{path} is stale:\n{short(diff)}" for path, diff in stale.items())
    assert not stale, f"{report}\n\nrun `make reference` and commit the pages"


def test_a_planted_change_is_caught(generator, pages, tmp_path, capsys):
    docs = tmp_path / "docs"
    assert generator.write_pages(pages, docs) == list(pages)
    assert generator.stale_pages(pages, docs) == {}
    assert generator.main(["--check", "--docs-dir", str(docs)]) == 0

    page = docs / "reference" / "cli.md"
    text = page.read_text(encoding="utf-8")
    assert "--config" in text
    page.write_text(text.replace("--config", "--konfig", 1), encoding="utf-8")
    (docs / "how-to" / "container-image.md").unlink()
    stale = generator.stale_pages(pages, docs)
    assert set(stale) == {"reference/cli.md", "how-to/container-image.md"}
    assert re.search(r"^-.*--konfig", stale["reference/cli.md"], re.M)
    assert re.search(r"^\+.*--config", stale["reference/cli.md"], re.M)
    assert "missing" in stale["how-to/container-image.md"]

    capsys.readouterr()
    assert generator.main(["--check", "--docs-dir", str(docs)]) == 1
    err = capsys.readouterr().err
    assert "stale: docs/reference/cli.md" in err and "stale: docs/how-to/container-image.md" in err
    assert "--konfig" in err
    assert generator.write_pages(pages, docs) == ["reference/cli.md", "how-to/container-image.md"]
    assert generator.stale_pages(pages, docs) == {}


def test_every_page_says_it_is_generated_on_its_first_line(pages):
    for path, text in pages.items():
        if path.endswith(".json"):  # JSON has no comments: the schema says it in its `$comment`, first
            comment = next(iter(json.loads(text).items()))
            assert comment[0] == "$comment" and "`make reference`" in comment[1], path
            assert "do not edit by hand" in comment[1], path
            continue
        first = text.splitlines()[0]
        assert first.startswith("<!--") and first.endswith("-->"), path
        assert "`make reference`" in first and "do not edit by hand" in first, path


def test_anchors_are_html_anchors_that_the_code_host_resolves_too(pages):
    """GitHub ignores attr_list's `{#id}`: every anchor a page links to within itself is an `<a id>` line
    of the page, or the id of a heading of plain words (which the site and GitHub derive alike)."""
    for path, text in pages.items():
        assert not re.search(r"\{#[\w-]+\}", text), f"{path} uses an attr_list heading id"
        ids = set(re.findall(r'^<a id="([\w-]+)"></a>$', text, re.M))
        ids |= {"-".join(words.lower().split()) for words in re.findall(r"^#+ ([A-Za-z ]+)$", text, re.M)}
        for anchor in re.findall(r"\]\(#([\w-]+)\)", text):
            assert anchor in ids, f"{path} links to #{anchor}, which is no <a id> line or plain heading"
    cli = pages["reference/cli.md"]
    assert '<a id="run-py-run"></a>\n\n## `run.py run`' in cli


def test_the_python_api_page_shows_each_entry_point(pages):
    page = pages["reference/python-api.md"]
    for line in (
        "from run import main",
        "from ragbench.config.model import load_config",
        "from ragbench.retrieval.retrievers import Retriever",
        "from ragbench.scoring.scorer import Scorer",
    ):
        assert f"`{line}`" in page
    assert (
        "def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]" in page
    )
    assert "def load_config(path: str | Path | None = None, overrides: list[str] | None = None)" in page
    signatures = "\n".join(re.findall(r"^(?:def |class |\w+\().*$", page, re.M))
    assert not re.search(r"(: |-> )'", signatures), "an annotation is shown as a quoted string"
