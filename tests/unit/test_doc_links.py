"""Every link in README.md, docker/README.md and docs/ resolves where people read it: on the code host
the repository, the anchor is a heading of the target as GitHub names it, or an `<a id>`), and, for the
docs pages, on the site too (the target is a page of the site, the anchor a heading as MkDocs names it).
The strict site build (tests/system/test_docs.py) checks the site alone; this checks both, in seconds."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "docker" / "README.md", *sorted(DOCS.rglob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_INDENTED = re.compile(r"(?:^(?: {4}|\t).*\n?)+", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"")
_ANCHOR = re.compile(r"<a\s[^>]*(?:id|name)=\"([^\"]+)\"")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The page without its code (fenced and indented blocks, code spans), where links are not links."""
    text = _FENCE.sub("", text)
    text = "\n".join(line for line in _without_indented_code(text.splitlines()))
    return text


def _without_indented_code(lines: list[str]):
    """Indented code follows a blank line; an indented line inside a list item is prose."""
    in_code, previous_blank = False, True
    for line in lines:
        indented = line.startswith(("    ", "\t"))
        if indented and (in_code or previous_blank) and not line.lstrip().startswith(("- ", "* ", "1. ")):
            in_code = True
        elif line.strip():
            in_code = False
        if not in_code:
            yield line
        previous_blank = not line.strip()


def heading_texts(text: str) -> list[str]:
    """Each heading as it reads: code span marks, emphasis and link targets gone."""
    texts = []
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        heading = re.sub(r"\s*\{[#.][^}]*\}\s*$", "", match[2])  # attr_list ids are not GitHub's
        texts.append(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading))
    return texts


def github_slug(heading: str) -> str:
    heading = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """Python-Markdown's toc slugify."""
    value = unicodedata.normalize("NFKD", re.sub(r"[`*]", "", heading)).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def anchors(page: Path, slug) -> set[str]:
    text = page.read_text(encoding="utf-8")
    explicit = set(_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    slugs = set()
    for heading in heading_texts(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        slugs.add(base if count == 0 else f"{base}-{count}" if slug is github_slug else f"{base}_{count}")
    return explicit | slugs


def links(page: Path) -> list[str]:
    text = _CODE_SPAN.sub("", prose(page.read_text(encoding="utf-8")))
    return _LINK.findall(text) + _HREF.findall(text)


def problems(page: Path, root: Path = ROOT, docs: Path = DOCS) -> list[str]:
    """What is wrong with the page's links; `root` and `docs`: the repository and its site's folder."""
    found = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: (not checked offline)
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            found.append(
                f"{target}: no {resolved.relative_to(root) if root in resolved.parents else resolved}"
            )
            continue
        in_site = page.is_relative_to(docs)
        if in_site and not resolved.is_relative_to(docs):
            found.append(f"{target}: outside docs/, so not a page of the site")
            continue
        if not anchor:
            continue
        if resolved.suffix != ".md":
            found.append(f"{target}: an anchor into a file that is not a page")
            continue
        if anchor not in anchors(resolved, github_slug):
            found.append(f"{target}: no heading or <a id> `{anchor}` there as the code host names them")
        if in_site and anchor not in anchors(resolved, mkdocs_slug):
            found.append(f"{target}: no heading or <a id> `{anchor}` there as the site names them")
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves_on_the_code_host_and_the_site(page):
    assert not problems(page), "\n".join(problems(page))


def test_the_checker_finds_a_broken_path_and_a_missing_anchor(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text('# A\n\n## Some `code` heading\n\n<a id="kept"></a>\n')
    (docs / "b.md").write_text(
        "# B\n\n[ok](a.md#some-code-heading) [ok](a.md#kept) [bad](a.md#gone) [bad](missing.md)\n\n"
        "    [in code](nowhere.md)\n\n`[span](nowhere.md)`\n"
    )
    (tmp_path / "code.py").write_text("")
    (docs / "c.md").write_text("[outside the site](../code.py)\n")
    found = problems(docs / "b.md", root=tmp_path, docs=docs)
    assert len([f for f in found if f.startswith("a.md#gone")]) == 2
    assert [f for f in found if f.startswith("missing.md")]
    assert not [f for f in found if "nowhere" in f or "some-code-heading" in f or "kept" in f]
    assert problems(docs / "c.md", root=tmp_path, docs=docs) == [
        "../code.py: outside docs/, so not a page of the site"
    ]


def test_github_and_mkdocs_slugs_differ_where_they_do():
    assert github_slug("Racing cells (2026-11-28)") == "racing-cells-2026-11-28"
    assert mkdocs_slug("Racing cells (2026-11-28)") == "racing-cells-2026-11-28"
    assert github_slug("A - B") == "a---b" and mkdocs_slug("A - B") == "a-b"
