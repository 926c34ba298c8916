"""A figure the prose quotes from a recorded output is the recording's, not a retyped one: the paragraph that
quotes it ends in `<!-- quoted from NAME: figure; figure -->`, each figure stands in that paragraph, and
each (without its thousands separators and dollar sign) stands in the block of recording NAME, as
docs/record_outputs.py wrote it. Re-recording an output that changes a quoted figure fails here until the
prose quotes the new one."""

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("record_outputs", ROOT / "docs" / "record_outputs.py")
record = sys.modules.setdefault("record_outputs", importlib.util.module_from_spec(_spec))
if not hasattr(record, "shown_blocks"):
    _spec.loader.exec_module(record)

QUOTE = re.compile(r"<!-- quoted from (?P<name>[\w-]+): (?P<figures>[^>]*?) -->")


def quotes() -> list[tuple[Path, str, str, list[str]]]:
    """(page, recording name, the paragraph before the marker, its figures) for every marker."""
    found = []
    for page in record.PAGES:
        text = page.read_text(encoding="utf-8")
        for match in QUOTE.finditer(text):
            paragraph = text[: match.start()].rsplit("\n\n", 1)[-1]
            found.append((page, match["name"], paragraph, [f.strip() for f in match["figures"].split(";")]))
    return found


def test_every_quoted_figure_is_in_its_paragraph_and_in_the_recording():
    blocks: dict[str, list[str]] = {}
    for _, name, _, body in record.shown_blocks():
        blocks.setdefault(name, []).append("\n".join(record.shown_lines(body)))
    wrong = []
    for page, name, paragraph, figures in quotes():
        assert name in blocks, f"{page.name}: no page shows the recording {name}"
        for figure in figures:
            bare = figure.replace(",", "").replace("$", "")
            if figure not in " ".join(paragraph.split()):
                wrong.append(f"{page.name}: {figure} is not in the paragraph that says it quotes it")
            if not any(bare in block for block in blocks[name]):  # a summary part may cut it
                wrong.append(f"{page.name}: {figure} is not what the {name} recording shows")
    assert not wrong, "\n".join(wrong)


def test_the_pages_that_quote_a_recorded_cost_mark_it():
    """The hosted run's cost is quoted on two pages; the starter run's figures beside its measurement."""
    marked = {(page.relative_to(ROOT).as_posix(), name) for page, name, _, _ in quotes()}
    assert {
        ("docs/how-to/hosted-models.md", "hosted-dry-run"),
        ("docs/getting-started/faq.md", "hosted-dry-run"),
        ("docs/measured.md", "starter-run"),
    } <= marked
