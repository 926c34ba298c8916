"""Report rendering: escaping of untrusted text, the terminal summary, and the one-page run report."""

import json
import re
from html.parser import HTMLParser

import pytest

from ragbench.analysis.axes import axis_means
from ragbench.inputs.tables import rows_to_csv
from ragbench.report.charts import bar_panels, pareto_front
from ragbench.report.page import render_report
from ragbench.report.pages import html_page, rows_to_html_table
from ragbench.report.view import CasePassage, CaseView, ReportInput
from ragbench.scoring.metrics import MetricInfo

HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'
PLANTED = "<script>alert(1)</script><img src=x onerror=alert(1)>"


def test_every_untrusted_value_is_escaped_in_html() -> None:
    rows = [{"cell": HOSTILE, "answer": HOSTILE, "score": 0.5}]
    page = html_page(HOSTILE, [rows_to_html_table(rows)], notes=[HOSTILE], warnings=[HOSTILE])
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page and "&amp;" in page
    assert page.count("&lt;script&gt;") == 6  # title, heading, warning, note and both table cells


def test_csv_round_trips_commas_and_quotes() -> None:
    text = rows_to_csv([{"cell": 'a,"b"', "mrr": 0.5}])
    assert text.splitlines() == ["cell,mrr", '"a,""b""",0.5']


# --- the one-page run report -----------------------------------------------------------------------

AXES = ["chunk_size", "embedding_model", "reranker", "reader", "judge"]
CORRECTNESS = MetricInfo(column="correctness_0to1", label="correctness (0-1)", higher_is_better=True)
FAIL_RATE = MetricInfo(column="fail_good_answers", label="keyword failures", higher_is_better=False)


def _row(cell: str, chunk_size: int, embedding: str, correctness: float | None, fail: float, **extra) -> dict:
    return {
        "cell": cell,
        "label": cell,
        "chunk_size": chunk_size,
        "embedding_model": embedding,
        "reranker": "off",
        "reader": "ollama/llama3",
        "judge": "openai/gpt-4o-mini",
        "correctness_0to1": correctness,
        "fail_good_answers": fail,
        "latency_p95_s": 1.0,
        "cost_usd": 0.01,
        "reused": False,
    } | extra


def _grid_report(**changes) -> ReportInput:
    """Four cells; on correctness A wins over B by 0.1, on keyword failures (lower is better) C wins
    over D by 0.05, so a direction mix-up names the wrong cell."""
    rows = [
        _row("A", 256, "org/minilm", 0.9, 0.40, latency_p95_s=2.5, cost_usd=0.04),
        _row("B", 256, "org/bge", 0.8, 0.30, latency_p95_s=1.5, cost_usd=0.02, reused=True),
        _row("C", 512, "org/minilm", 0.5, 0.10, latency_p95_s=0.5, cost_usd=None),
        _row("D", 512, "org/bge", None, 0.15, latency_p95_s=3.0, cost_usd=0.03),
    ]
    cases = [
        CaseView(
            cell=cell,
            case_id="q1",
            question="What is ZenML?",
            answer=f"answer of {cell}",
            passages=[
                CasePassage(source="docs/zenml.md", text="ZenML is an MLOps framework.", retrieval_rank=2)
            ],
            keyword_failures=["good_answers: pipeline"] if cell == "C" else [],
            correctness=4,
            judge_reasoning="Mostly right.",
        )
        for cell in "ABCD"
    ]
    fields = {
        "title": "Run 1",
        "axes": AXES,
        "varying_axes": ["chunk_size", "embedding_model"],
        "rows": rows,
        "headline": [CORRECTNESS, FAIL_RATE],
        "latency_column": "latency_p95_s",
        "cost_column": "cost_usd",
        "cases": cases,
        "keyword_failures": [{"cell": "C", "case": "q1", "suite": "good_answers", "word": "pipeline"}],
    }
    return ReportInput(**(fields | changes))


class _Tables(HTMLParser):
    """The text of every table cell, per row, per table; enough to read a table as a user would."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("|")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _best_table(page: str) -> dict[str, dict[str, str]]:
    """The best-per-score table as {score label: {column header: cell text}}."""
    section = page[page.index('id="best"') : page.index('id="headline"')]
    parser = _Tables()
    parser.feed(section)
    header, *rows = parser.tables[0]
    return {row[0].split("|")[0]: dict(zip(header, row, strict=False)) for row in rows}


def test_best_table_names_winner_runner_up_and_margin_in_each_metrics_direction() -> None:
    best = _best_table(render_report(_grid_report()))
    correctness = best["correctness (0-1)"]
    assert (correctness["Best"], correctness["Best value"]) == ("A", "0.9")
    assert (correctness["Runner-up"], correctness["Runner-up value"]) == ("B", "0.8")
    assert correctness["Margin"] == "0.1"
    assert (correctness["latency_p95_s of best"], correctness["cost_usd of best"]) == ("2.5", "0.04")
    failures = best["keyword failures"]  # lower is better
    assert (failures["Best"], failures["Best value"], failures["Runner-up"]) == ("C", "0.1", "D")
    assert failures["Margin"] == "0.05"
    assert failures["cost_usd of best"] == "unknown"


def test_best_table_lists_tied_leaders_and_skips_metrics_without_values() -> None:
    report = _grid_report()
    report.rows[1]["correctness_0to1"] = 0.9  # B now ties A
    report.headline.append(MetricInfo(column="faithfulness", label="faithfulness", higher_is_better=True))
    best = _best_table(render_report(report))
    assert set(best) == {"correctness (0-1)", "keyword failures"}
    tied = best["correctness (0-1)"]
    assert tied["Best"] == "Atied|Btied"
    assert (tied["Runner-up"], tied["Margin"]) == ("C", "0.4")
    assert tied["latency_p95_s of best"] == "2.5|1.5"


def test_untrusted_text_is_escaped_everywhere_including_svg_and_json() -> None:
    report = _grid_report(
        title=PLANTED,
        notes=[PLANTED],
        warnings=[PLANTED],
        headline=[CORRECTNESS.model_copy(update={"label": PLANTED}), FAIL_RATE],
    )
    report.rows[0]["label"] = PLANTED
    report.rows[1]["embedding_model"] = PLANTED
    report.rows[1]["cell"] = PLANTED
    report.cases[1].cell = PLANTED
    view = report.cases[0]
    view.question = view.answer = view.judge_reasoning = view.error = PLANTED
    view.passages[0].text = view.passages[0].source = PLANTED
    view.keyword_failures = [PLANTED]
    report.weak_answers = [{"cell": PLANTED, "answer": PLANTED}]
    page = render_report(report)

    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.lower().count("<script") == 3  # the JSON data block, the sort and the answer-view scripts
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.DOTALL)
    assert any("&lt;script&gt;alert(1)" in svg for svg in svgs)  # the label made it into a chart, escaped
    data = re.search(r'<script type="application/json" id="case-data">(.*?)</script>', page, re.DOTALL)
    assert "\\u003cscript\\u003e" in data.group(1)
    (case,) = json.loads(data.group(1))
    assert case["question"] == PLANTED  # the escaping loses nothing
    assert {answer["cell"] for answer in case["answers"]} == {"A", PLANTED, "C", "D"}


def test_chart_text_is_escaped_by_the_svg_writer() -> None:
    svg = bar_panels([PLANTED, "$x$ & y"], [(PLANTED, [0.5, None], True)], chart_id="t")
    assert "<script" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg and "$x$ &amp; y" in svg  # and "$" is text, not TeX math
    assert svg.startswith("<svg") and "<?xml" not in svg and "DOCTYPE" not in svg


def test_page_is_self_contained_with_inline_svg_charts_and_deterministic() -> None:
    page = render_report(_grid_report())
    # bars, one chart per varying axis, quality against latency and against cost
    assert page.count("<svg") == 5
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:[a-z]+:)?//""", page, re.IGNORECASE)
    assert "@import" not in page and not re.search(r"url\(\s*['\"]?(?!#)", page)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # charts' ids are prefixed per chart, so inlined SVGs do not clash
    references = re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', page)
    assert {name for pair in references for name in pair if name} <= set(ids)
    assert "default-src 'none'" in page  # the page may not fetch anything even if some text slipped through
    assert page.count('cache">cached</span>') == 1  # B was reused
    assert render_report(_grid_report()) == page


def test_unknown_costs_skip_the_cost_chart_with_a_reason() -> None:
    report = _grid_report()
    for row in report.rows:
        row["cost_usd"] = None
    page = render_report(report)
    assert page.count("<svg") == 4
    assert "No quality-against-cost chart: no cell has both a known cost_usd" in page


def test_retrieval_only_report_renders_without_latency_cost_or_answers() -> None:
    rows = [
        {
            "cell": f"cs{size}_{model}",
            "label": f"cs{size} {model}",
            "chunk_size": size,
            "embedding_model": model,
        }
        | {"mrr": size / 1000 + len(model) / 100, "hit_rate@5": 0.8, "reused": False}
        for size in (128, 256)
        for model in ("minilm", "bge")
    ]
    report = ReportInput(
        title="Retrieval only",
        axes=["chunk_size", "embedding_model"],
        varying_axes=["chunk_size", "embedding_model"],
        rows=rows,
        headline=[MetricInfo(column="mrr", label="MRR", higher_is_better=True)],
    )
    page = render_report(report)
    assert page.lower().count("<script") == 1  # only the table sorter: no answers to show
    assert 'id="cases"' not in page and "Keyword test failures" not in page
    assert "this run reports no latency" in page and "this run reports no cost" in page
    assert page.count("<svg") == 3
    assert _best_table(page)["MRR"]["Best"] == "cs256 minilm"


def test_axis_means_average_each_setting_per_line() -> None:
    rows = [
        {"size": 256, "model": "a", "score": 0.2},
        {"size": 128, "model": "a", "score": 0.4},
        {"size": 128, "model": "a", "score": 0.6},
        {"size": 128, "model": "b", "score": None},
    ]
    x_values, series = axis_means(rows, "size", "score", "model")
    assert x_values == [128, 256]
    assert series == {"a": [pytest.approx(0.5), 0.2], "b": [None, None]}


@pytest.mark.parametrize(
    ("points", "higher_is_better", "front"),
    [
        # (cost, quality): 1 is beaten by 0 (cheaper, better); 3 is beaten by 2; 4 is the cheapest
        ([(1.0, 0.8), (2.0, 0.7), (3.0, 0.9), (3.5, 0.9), (0.5, 0.1)], True, [4, 0, 2]),
        # lower quality is better: the cheapest point with the lowest error rate dominates the rest
        ([(1.0, 0.2), (2.0, 0.1), (0.5, 0.3), (2.0, 0.4)], False, [2, 0, 1]),
        # identical points are both kept; a single point is its own front
        ([(1.0, 0.5), (1.0, 0.5), (2.0, 0.4)], True, [0, 1]),
        ([(1.0, 0.5)], True, [0]),
        ([], True, []),
    ],
)
def test_pareto_front(points: list, higher_is_better: bool, front: list[int]) -> None:
    assert pareto_front(points, higher_is_better) == front
