"""The report's reranking section: its table and its chart of each reranking cell's paired change."""

from ragbench.analysis.reranking import RerankGain
from ragbench.report.reranking import reranking_section


def gain(cell: str, label: str, difference: float, low: float, high: float) -> RerankGain:
    return RerankGain(
        cell=cell,
        column=label.lower(),
        label=label,
        higher_is_better=True,
        first_stage=0.8,
        reranked=0.8 + difference,
        difference=difference,
        low=low,
        high=high,
        p_value=0.5,
        cases=50,
    )


GAINS = [
    gain("trained", "MRR", -0.03, -0.116, 0.055),
    gain("standin", "MRR", -0.102, -0.172, -0.03),
    gain("standin", "nDCG@10", -0.059, -0.11, -0.009),
]
NAMES = {"trained": "rerank <trained>", "standin": "rerank colbert-standin (UNTRAINED)"}


def test_the_section_charts_each_cells_change_per_metric_with_its_interval_and_escapes_names():
    html = reranking_section(GAINS, NAMES, 0.95)
    assert html.count("<svg") == 1 and 'aria-label="Reranked minus first stage, per reranking cell"' in html
    assert "MRR change" in html and "nDCG@10 change" in html  # one panel per metric
    assert "n=50 cases each" in html  # every bar rests on the 50 cases
    assert "rerank &lt;trained&gt;" in html and "<trained>" not in html
    assert "-0.102" in html and "[-0.172, -0.030]" in html  # the table beside the chart
    assert 'id="rerank-gains-' in html  # ids prefixed: no clash with the page's other charts


def test_a_metric_a_cell_lacks_shows_no_bar_and_no_gains_no_section():
    html = reranking_section(GAINS, NAMES, 0.95)
    assert "n/a" in html  # the trained cell has no nDCG gain here
    assert reranking_section([], NAMES, 0.95) == ""


def test_verdicts_read_the_interval():
    verdicts = [g.verdict for g in GAINS]
    assert verdicts == ["not told apart", "worse", "worse"]


def test_a_shortened_chart_label_keeps_the_stand_ins_warning():
    from ragbench.report.charts import MAX_LABEL_CHARS, shorten

    label = "cs256 · all-MiniLM-L6-v2 · rerank colbert-standin (UNTRAINED)"
    short = shorten(label)
    assert len(short) == MAX_LABEL_CHARS and short.endswith("(UNTRAINED)") and short.startswith("cs256")
    assert shorten("rerank off") == "rerank off"
