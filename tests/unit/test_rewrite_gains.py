"""What query rewriting changed: each rewriting cell against its `off` twin, the follow-ups and the single
questions apart (or all cases when the eval set has only one kind), and the report's section."""

from ragbench.analysis.rewriting import ALL_CASES, FOLLOW_UPS, SINGLE_QUESTIONS, rewrite_gains
from ragbench.grid.cell import CellSpec
from ragbench.report.rewriting import rewriting_section
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig

OFF = CellSpec(chunk_size=64, chunk_overlap=0, embedding_model="m", top_k=5)
CONDENSE = OFF.model_copy(update={"query_rewrite": "condense"})
HYDE = OFF.model_copy(update={"query_rewrite": "hyde", "top_k": 9})  # no off twin at top_k 9
MRR = MetricInfo(column="mrr", label="MRR", higher_is_better=True)
FIRST = MetricInfo(column="first_stage_mrr", label="MRR (first stage)", higher_is_better=True)
VALUES = {
    OFF.id: {"mrr": {"f1": 0.0, "f2": 0.5, "s1": 1.0, "s2": 1.0}},
    CONDENSE.id: {"mrr": {"f1": 1.0, "f2": 1.0, "s1": 1.0, "s2": 0.5}},
    HYDE.id: {"mrr": {"f1": 1.0, "f2": 1.0, "s1": 1.0, "s2": 1.0}},
}


def test_each_rewriting_cell_is_paired_with_its_off_twin_on_follow_ups_and_single_questions_apart():
    gains = rewrite_gains([OFF, CONDENSE, HYDE], VALUES, [MRR, FIRST], {"f1", "f2"}, StatisticsConfig())
    assert [(g.cell, g.against, g.cases_group, g.column) for g in gains] == [
        (CONDENSE.id, OFF.id, FOLLOW_UPS, "mrr"),
        (CONDENSE.id, OFF.id, SINGLE_QUESTIONS, "mrr"),
    ]  # hyde has no twin; a first stage's own column is not a rewrite's
    follow, single = gains
    assert (follow.searched_as_asked, follow.rewritten, follow.difference) == (0.25, 1.0, 0.75)
    assert follow.cases == 2
    assert (single.searched_as_asked, single.rewritten, single.difference) == (1.0, 0.75, -0.25)
    assert "MRR on follow-ups 0.250 -> 1.000 (+0.750" in follow.text()


def test_an_eval_set_of_one_kind_is_compared_over_all_its_cases():
    (gain,) = rewrite_gains([OFF, CONDENSE], VALUES, [MRR], set(), StatisticsConfig())
    assert gain.cases_group == ALL_CASES and gain.cases == 4


def test_the_section_escapes_names_and_says_which_way_it_went():
    gains = rewrite_gains([OFF, CONDENSE], VALUES, [MRR], {"f1", "f2"}, StatisticsConfig())
    html = rewriting_section(gains, {CONDENSE.id: "<condense>", OFF.id: "off"}, 0.95)
    assert "What query rewriting changed" in html and "&lt;condense&gt;" in html and "<condense>" not in html
    assert "follow-ups (2)" in html and "single questions (2)" in html
    assert rewriting_section([], {}, 0.95) == ""
