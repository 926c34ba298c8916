"""HTML pages and tables, CSV and terminal text: the shared, escaped building blocks of every page we write
(the run report and the artifact pages in the dashboard).

Every value is escaped because it may come from documents, questions, answers, judges or config.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape

from ragbench.inputs.tables import is_number, table_columns
from ragbench.stats.formatting import interval_text, number_text

PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 80rem; padding: 0 1rem;
  color: #1d1d1f; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: 0.5rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #e3e3ea; padding-bottom: 0.2rem; }
h3 { font-size: 1rem; margin: 0.2rem 0 0.5rem; }
h4 { font-size: 0.9rem; margin: 0 0 0.3rem; }
nav a { margin-right: 0.8rem; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #d0d0d7; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f7; }
td.number { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.best { background: #dff0dc; font-weight: 600; }
.note { color: #555; max-width: 60rem; }
.warning { color: #8a1c1c; font-weight: 600; }
.warnings { border: 2px solid #c9423f; background: #fdeeee; border-radius: 6px; padding: 0 1rem; }
.tag { font-size: 0.7rem; font-weight: 600; border: 1px solid #c8a640; background: #fff5d6;
  border-radius: 3px; padding: 0 0.25rem; margin-left: 0.3rem; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
.sortable th { cursor: pointer; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
figure { margin: 0; max-width: 38rem; }
.wide th, .wide td, td.label { white-space: nowrap; }
svg { max-width: 100%; height: auto; }
.controls { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; margin: 0.5rem 0; }
.case { border: 1px solid #e3e3ea; border-radius: 6px; padding: 0.5rem 0.8rem; margin: 0.8rem 0; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.answer-text, .passage-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.passage-text { font-size: 0.8rem; background: #f7f7fa; padding: 0.3rem 0.5rem; }
.meta { font-size: 0.85rem; color: #444; margin: 0.2rem 0; }
.error { color: #8a1c1c; }
@media (max-width: 50rem) { .pair { grid-template-columns: 1fr; } }
"""


def format_value(value: object) -> str:
    """A table's value: a float to 4 significant figures (`ragbench.stats.formatting.number_text`)."""
    if isinstance(value, float):
        return number_text(value, digits=4, significant=True)
    return "" if value is None else str(value)


def interval_cell(low: float | None, high: float | None, decimals: int = 4) -> str:
    """An interval in a table, rounded to the `decimals` the values beside it are rounded to and written as
    `format_value` writes them: ``[0.5, 0.75]``; empty when there is none."""
    if low is None or high is None:
        return ""
    return interval_text(round(low, decimals), round(high, decimals), digits=4, significant=True)


def rows_to_html_table(rows: list[dict]) -> str:
    if not rows:
        return "<p>(no rows)</p>"
    columns = table_columns(rows)
    header = "".join(f"<th>{escape(str(column))}</th>" for column in columns)
    body = []
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            css = ' class="number"' if is_number(value) else ""
            cells.append(f"<td{css}>{escape(format_value(value))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_section(title: str, rows: list[dict], empty: str = "(none)") -> str:
    """A titled table for `html_page`; an empty list shows `empty` instead of a table."""
    body = rows_to_html_table(rows) if rows else f'<p class="note">{escape(empty)}</p>'
    return f"<h2>{escape(title)}</h2>{body}"


def page_header(title: str, notes: Sequence[str], warnings: Sequence[str]) -> str:
    parts = [f"<h1>{escape(title)}</h1>"]
    if warnings:
        lines = "".join(f'<p class="warning">{escape(text)}</p>' for text in warnings)
        parts.append(f'<div class="warnings" role="alert">{lines}</div>')
    parts += [f'<p class="note">{escape(text)}</p>' for text in notes]
    return "".join(parts)


def document(title: str, body: str, scripts: Sequence[str] = ()) -> str:
    """A standalone page whose Content-Security-Policy forbids every network request and every script
    but `scripts` (allowed by hash): defence in depth should some text ever escape unescaped."""
    hashes = [base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() for script in scripts]
    allowed_scripts = " ".join(f"'sha256-{digest}'" for digest in hashes) or "'none'"
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src {allowed_scripts}"
    script_tags = "".join(f"<script>{script}</script>" for script in scripts)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{PAGE_STYLE}</style></head>"
        f"<body>{body}{script_tags}</body></html>"
    )


def html_page(title: str, sections: list[str], notes: list[str] = (), warnings: list[str] = ()) -> str:
    """A standalone page; `sections` must already be escaped HTML, `notes`/`warnings` are plain text."""
    return document(title, page_header(title, notes, warnings) + "".join(sections))


def rows_to_text(rows: list[dict]) -> str:
    """A fixed-width table for the terminal."""
    if not rows:
        return "(no rows)"
    columns = table_columns(rows)
    cells = [[format_value(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(widths[i]) for i, column in enumerate(columns))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(value.ljust(widths[i]) for i, value in enumerate(line)) for line in cells]
    return "\n".join(lines)


# Characters that start Markdown syntax (emphasis, code, links and images, headings, lists, tables,
# strikethrough) where they stand: each is backslash-escaped, which CommonMark allows for any punctuation.
MARKDOWN_SYNTAX = frozenset("\\`*_{}[]()#+-.!|~")


def markdown_text(value: object) -> str:
    """A value as Markdown text that renders as exactly that text: no link, image, code, emphasis, raw
    HTML (`<`, `>` and `&` as entities) or table cell break, on one line (a newline would end a table row
    or a list item) and without control characters. Every value of a Markdown page goes through it: it
    may quote documents, answers, judges or config."""
    out = []
    for char in " ".join(format_value(value).splitlines()):
        if ord(char) < 32 or 127 <= ord(char) < 160:  # a terminal's escape codes, quoted from an error
            out.append("\ufffd")
        elif char in MARKDOWN_SYNTAX:
            out.append("\\" + char)
        else:
            out.append({"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(char, char))
    return "".join(out)


def rows_to_markdown_table(rows: list[dict], columns: Sequence[str]) -> str:
    """A GitHub-flavoured Markdown table of `columns` (each a key of the rows and the header), every value
    escaped (`markdown_text`)."""
    lines = [
        "| " + " | ".join(markdown_text(column) for column in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(markdown_text(row.get(column)) for column in columns) + " |" for row in rows]
    return "\n".join(lines)
