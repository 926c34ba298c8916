"""Results tables as CSV, HTML and plain text; every value is escaped because it may come from documents."""

from __future__ import annotations

import csv
import io
from html import escape

PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border: 1px solid #d0d0d7; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f7; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #555; max-width: 60rem; }
.warning { color: #8a1c1c; font-weight: 600; }
"""


def _format(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
    return "" if value is None else str(value)


def rows_to_csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def rows_to_html_table(rows: list[dict]) -> str:
    if not rows:
        return "<p>(no rows)</p>"
    header = "".join(f"<th>{escape(str(column))}</th>" for column in rows[0])
    body = []
    for row in rows:
        cells = []
        for value in row.values():
            css = ' class="number"' if isinstance(value, int | float) and not isinstance(value, bool) else ""
            cells.append(f"<td{css}>{escape(_format(value))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_section(title: str, rows: list[dict], empty: str = "(none)") -> str:
    """A titled table for `html_page`; an empty list shows `empty` instead of a table."""
    body = rows_to_html_table(rows) if rows else f'<p class="note">{escape(empty)}</p>'
    return f"<h2>{escape(title)}</h2>{body}"


def html_page(title: str, sections: list[str], notes: list[str] = (), warnings: list[str] = ()) -> str:
    """A standalone page; `sections` must already be escaped HTML, `notes`/`warnings` are plain text."""
    parts = [f"<h1>{escape(title)}</h1>"]
    parts += [f'<p class="warning">{escape(text)}</p>' for text in warnings]
    parts += [f'<p class="note">{escape(text)}</p>' for text in notes]
    parts += sections
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{PAGE_STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )


def rows_to_text(rows: list[dict]) -> str:
    """A fixed-width table for the terminal."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    cells = [[_format(row[column]) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(widths[i]) for i, column in enumerate(columns))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(value.ljust(widths[i]) for i, value in enumerate(line)) for line in cells]
    return "\n".join(lines)


# The columns `summary_rows` keeps for the terminal; the CSV and HTML keep every column.
SUMMARY_COLUMNS = (
    "cell",
    "reranker",
    "failure_rate@",  # prefix: the column name carries retrieval.metrics_k
    "mrr",
    "e2e_cases",
    "fail_bad_answers",
    "fail_bad_first_words",
    "fail_good_answers",
    "correctness_0to1",
    "faithfulness_1to5",
    "judge_parse_failures",
    "latency_mean_s",
    "latency_p95_s",
)


def _number_or_text(value: object) -> object:
    if isinstance(value, str) and value:
        try:
            return float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return value
    return value


def summary_rows(rows: list[dict]) -> list[dict]:
    """The terminal's view of the results table (values may be CSV strings).

    A keyword failure rate shows the number of cases behind it, e.g. ``0.33 (n=3)``, because with a
    small sample a rate of 1.00 may rest on a single case.
    """
    out = []
    for row in rows:
        kept: dict = {}
        for wanted in SUMMARY_COLUMNS:
            for column in (c for c in row if c == wanted or (wanted.endswith("@") and c.startswith(wanted))):
                value = _number_or_text(row[column])
                tested = _number_or_text(row.get(f"{column}_cases"))
                if column.startswith("fail_") and isinstance(value, int | float) and tested is not None:
                    value = f"{value:.2f} (n={tested})"
                kept[column] = value
        out.append(kept)
    return out
