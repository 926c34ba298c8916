"""What the results table and the report make of a staged search's artifacts (no ZenML, no model): where
each cell was left, the decisions' table, the Search section, and the headline verdict on the search's
metric made on the held-out cases with the search's winner as the best."""

from ragbench.analysis.holdout import confirm, split_order
from ragbench.analysis.search_findings import SearchFindings
from ragbench.analysis.staged import keep_tie_set
from ragbench.analysis.uncertainty import compare_cells
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.report.search import search_section
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig

CASES = [f"c{n:02d}" for n in range(20)]


def findings():
    cells = expand_grid(load_config(overrides=["grid.chunk_size=[128]", "grid.retriever=[dense, bm25]"]))
    dense, bm25 = (cell.upto("retrieve").id for cell in cells)
    split = split_order(CASES, 0.3)
    retrieval = {dense: dict.fromkeys(split.search, 1.0), bm25: dict.fromkeys(split.search, 0.0)}
    decision = keep_tie_set(
        retrieval,
        stage="retrieve",
        metric="hit_rate@5",
        higher_is_better=True,
        alpha=0.05,
        seed=0,
        resamples=200,
    )
    winner = cells[0].id
    confirmation = confirm(
        {winner: dict.fromkeys(split.held_out, 1.0)},
        {winner: 1.0},
        winner,
        metric="correctness_0to1",
        higher_is_better=True,
        confidence=0.95,
        seed=0,
        resamples=200,
    )
    return cells, split, SearchFindings.of(split, [decision], confirmation, cells)


def test_each_cell_says_where_the_search_left_it_and_the_report_shows_the_stages():
    cells, _, search = findings()
    kept, dropped = cells
    assert search.status(dropped, None, {}).startswith(
        "dropped at the retrieve stage: hit_rate@5 0, -1 against "
    )
    assert search.status(kept, None, {}) == "answered; winner, confirmed 1 on 6 held-out case(s)"
    rows = search.decision_rows()
    assert [(row["outcome"], row["p"] is not None) for row in rows] == [("best", False), ("dropped", True)]
    assert rows[0]["key"] == "dense" and rows[1]["key"] == "bm25"  # named by the axes that vary
    html = search_section(search, {})
    assert '<h2 id="search">Search</h2>' in html and "retrieve stage on hit_rate@5 over 14 case(s)" in html
    assert "confirmed on 6 held-out case(s)" in html and "flattered by +0" in html


def test_the_headline_verdict_on_the_search_metric_is_the_held_out_one_with_the_searchs_winner_best():
    _, split, search = findings()
    metric = MetricInfo(column="correctness_0to1", label="correctness", higher_is_better=True)
    # on every case the other cell looks better; on the held-out cases the two are equal
    values = {
        "winner": {"correctness_0to1": {case: 1.0 for case in CASES}},
        "other": {"correctness_0to1": {case: 1.0 if case in split.held_out else 2.0 for case in CASES}},
    }
    confirmation = search.confirmation.model_copy(
        update={"winner": "winner", "finalists": ["winner", "other"]}
    )
    search = search.model_copy(update={"confirmation": confirmation})
    statistics = StatisticsConfig(resamples=200)
    every_case = compare_cells([metric], values, statistics)
    assert every_case[0].best == "other"
    (held_out,) = search.confirmed_verdicts(every_case, [metric], values, statistics, {})
    assert held_out.best == "winner" and [c.n for c in held_out.comparisons if not c.identical] in ([], [6])
