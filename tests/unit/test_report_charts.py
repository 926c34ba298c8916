"""The report's charts carry their uncertainty and n, and a chart with nothing to show is left out with a
note saying why."""

import re
from html import escape

import pytest

from ragbench.analysis.axes import AxisPoint, axis_points
from ragbench.report.charts import bar_panels
from ragbench.report.page import render_report
from ragbench.report.view import ReportInput
from ragbench.scoring.metrics import MetricInfo
from tests.unit.test_report import CORRECTNESS, FAIL_RATE, PLANTED, _grid_report


def _section(page: str, anchor: str) -> str:
    start = page.index(f'id="{anchor}"')
    end = page.find("<h2", start)
    return page[start : end if end != -1 else len(page)]


def _svg_texts(html: str) -> list[str]:
    return [
        text
        for svg in re.findall(r"<svg.*?</svg>", html, re.DOTALL)
        for text in re.findall(r">([^<>]+)</text>", svg)
    ]


def _with_cases(report: ReportInput) -> ReportInput:
    """Correctness with its interval and n (3 cases per cell) on every cell that has a value."""
    for row in report.rows:
        if row["correctness_0to1"] is not None:
            value = row["correctness_0to1"]
            row |= {
                "correctness_0to1_low": round(value - 0.2, 4),
                "correctness_0to1_high": round(min(1.0, value + 0.1), 4),
                "correctness_0to1_cases": 3,
            }
    return report


def test_effect_plots_label_each_point_with_its_n_and_explain_the_bars() -> None:
    section = _section(render_report(_with_cases(_grid_report())), "axes")
    assert section.count("<svg") == 2  # chunk_size, embedding_model
    texts = _svg_texts(section)
    assert texts.count("n=3") == 6  # per chart three points (D has no correctness), one cell each
    note = re.sub(r"<svg.*?</svg>", "", section, flags=re.DOTALL)
    assert "Bars: from the lowest to the highest bound of the 95% bootstrap intervals" in note
    assert "n = the cases behind each cell" in note
    assert "A mean over few cases says little" in note


def test_axis_points_pool_cells_into_mean_span_cells_and_cases() -> None:
    rows = [
        {"size": 128, "score": 0.4, "score_low": 0.1, "score_high": 0.6, "score_cases": 3},
        {"size": 128, "score": 0.6, "score_low": 0.3, "score_high": 0.9, "score_cases": 5},
        {"size": 256, "score": 0.2},  # no interval, no n
        {"size": 512, "score": None, "score_cases": 4},
    ]
    x_values, series = axis_points(rows, "size", "score", None)
    assert x_values == [128, 256, 512]
    pooled, bare, missing = series[None]
    assert pooled == AxisPoint(mean=pytest.approx(0.5), cells=2, cases=(3, 5), span=(0.1, 0.9))
    assert pooled.label() == "n=3–5, 2 cells"
    assert bare == AxisPoint(mean=0.2, cells=1)
    assert bare.label() == "1 cell"
    assert missing is None
    assert AxisPoint(mean=0.5, cells=1, cases=(4, 4)).label() == "n=4"


def test_retrieval_metrics_take_n_from_retrieval_cases() -> None:
    rows = [
        {"cell": f"c{size}", "label": f"c{size}", "size": size, "mrr": size / 1000, "retrieval_cases": 7}
        for size in (128, 256)
    ]
    report = ReportInput(
        title="r",
        axes=["size"],
        varying_axes=["size"],
        rows=rows,
        headline=[MetricInfo(column="mrr", label="MRR", higher_is_better=True)],
    )
    page = render_report(report)
    assert "n=7" in _svg_texts(_section(page, "axes"))
    assert any("n=7 cases each" in text for text in _svg_texts(_section(page, "charts")))


def test_effect_plot_is_left_out_when_every_cell_scores_zero() -> None:
    report = _grid_report(headline=[CORRECTNESS])
    for row in report.rows:
        row["correctness_0to1"] = 0.0
    section = _section(render_report(report), "axes")
    assert "<svg" not in section
    assert "correctness (0-1): every cell scores 0, so there is no effect to plot." in section


def test_effect_plot_of_an_axis_with_one_scored_value_is_left_out() -> None:
    report = _grid_report(headline=[CORRECTNESS])
    for row in report.rows:
        if row["chunk_size"] == 512:
            row["correctness_0to1"] = None
    section = _section(render_report(report), "axes")
    assert section.count("<svg") == 1  # embedding_model still has two scored values
    assert (
        "chunk_size: only one of its values has a correctness (0-1) (the others have none), so no chart."
        in (section)
    )


def test_cost_chart_is_left_out_when_every_call_cost_nothing() -> None:
    report = _grid_report()
    for row in report.rows:
        row["cost_usd"] = 0.0
    page = render_report(report)
    section = _section(page, "tradeoffs")
    assert section.count("<svg") == 1  # latency only
    assert 'id="cost-' not in section and 'id="latency-' in section
    assert "Cost: every call cost $0 (local models), so no quality-against-cost chart." in section
    assert page.count("<svg") == 4


def test_cost_chart_with_zero_and_unknown_costs_says_both() -> None:
    report = _grid_report()
    for row in report.rows:
        row["cost_usd"] = None if row["cell"] == "C" else 0
    section = _section(render_report(report), "tradeoffs")
    assert 'id="cost-' not in section
    assert "Cost: every call cost $0 (local models) (1 cell(s) of unknown cost_usd)" in section


def test_cost_chart_stays_when_some_call_cost_money() -> None:
    section = _section(render_report(_grid_report()), "tradeoffs")
    assert 'id="cost-' in section and 'id="latency-' in section
    assert "every call cost $0" not in section


def test_latency_chart_is_left_out_when_every_latency_is_zero() -> None:
    report = _grid_report()
    for row in report.rows:
        row["latency_p95_s"] = 0
    section = _section(render_report(report), "tradeoffs")
    assert 'id="latency-' not in section and 'id="cost-' in section
    assert "Latency: every cell's latency_p95_s is 0, so no quality-against-latency chart." in section


def test_bar_panels_carry_n_in_the_title_or_beside_each_bar() -> None:
    page = render_report(_with_cases(_grid_report()))
    texts = _svg_texts(_section(page, "charts"))
    assert any("n=3 cases each" in text for text in texts)  # correctness: every bar rests on 3 cases
    assert "n: how many cases that is" in _section(page, "charts")

    svg = bar_panels(["a", "b"], [("score", [0.5, 0.7], True)], chart_id="t", cases=[[3, 5]])
    texts = re.findall(r">([^<>]+)</text>", svg)
    assert "0.5 n=3" in texts and "0.7 n=5" in texts
    assert not any("cases each" in text for text in texts)


def test_bar_panel_without_values_or_all_zero_is_left_out_with_a_note() -> None:
    empty = MetricInfo(column="faithfulness", label="faithfulness", higher_is_better=True)
    report = _grid_report(headline=[CORRECTNESS, FAIL_RATE, empty])
    for row in report.rows:
        row["fail_good_answers"] = 0.0
    section = _section(render_report(report), "charts")
    assert section.count("<svg") == 1
    texts = _svg_texts(section)
    assert any(text.startswith("correctness") for text in texts)
    assert not any(text.startswith(("keyword failures", "faithfulness")) for text in texts)
    assert "keyword failures: every cell scores 0, so no bars." in section
    assert "faithfulness: no cell has a value, so no bars." in section


def test_notes_of_left_out_charts_escape_labels_and_columns() -> None:
    hostile = CORRECTNESS.model_copy(update={"label": PLANTED})
    empty = MetricInfo(column="x", label=PLANTED, higher_is_better=True)
    report = _grid_report(headline=[hostile, empty], cost_column=PLANTED)
    for row in report.rows:
        row["correctness_0to1"] = 0.0
        row[PLANTED] = 0.0
    page = render_report(report)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "every cell scores 0, so there is no effect to plot" in _section(page, "axes")
    assert f"{escape(PLANTED)}: every cell scores 0, so no bars." in _section(page, "charts")
    assert f"{escape(PLANTED)}: no cell has a value, so no bars." in _section(page, "charts")
    assert "Cost: every call cost $0" in _section(page, "tradeoffs")
