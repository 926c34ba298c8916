"""Scores by case type (the evolution of generated eval cases), the `declines` headline score and the
eval set's label in the run notes: computed from hand-made per-case values, no models."""

import pytest

from ragbench.analysis.case_types import UNTYPED, case_type_rows
from ragbench.analysis.notes import run_notes
from ragbench.analysis.results import CellResults, ResultsTable, build_results
from ragbench.analysis.results_inputs import ResultsInputs
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import CaseProvenance, EvalCase, EvalSuite, SourceChunk
from ragbench.report.page import render_report
from ragbench.report.run_page import run_report
from ragbench.report.view import ReportInput
from ragbench.retrieval.index import IndexManifest
from ragbench.retrieval.measures import RETRIEVAL_MEASURES
from ragbench.retrieval.search import (
    CaseRetrieval,
    RetrievalMetrics,
    RetrievalReport,
    RetrievalResult,
    SearchStats,
)
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.registry import present
from ragbench.stats.inference import StatisticsConfig

STATS = StatisticsConfig(resamples=999)
CORRECTNESS = MetricInfo(
    column="correctness_0to1", label="correctness (0-1)", higher_is_better=True, bounds=(0.0, 1.0)
)
FAIL_GOOD = MetricInfo(
    column="fail_good_answers",
    label="missing good words (rate)",
    higher_is_better=False,
    bounds=(0.0, 1.0),
    binary=True,
)
HEADLINE = [CORRECTNESS, FAIL_GOOD]
LABELS = {"cell-1": "cs128", "cell-2": "cs256"}
HOSTILE_TYPE = "<script>x</script>"


def provenance(evolution: str) -> CaseProvenance:
    chunk = SourceChunk(source="doc.md", start_index=0, text="text")
    return CaseProvenance(generator="gen", critic="critic", evolution=evolution, source_chunks=[chunk])


def case(case_id: str, evolution: str | None, **fields) -> EvalCase:
    kept = provenance(evolution) if evolution is not None else None
    return EvalCase(id=case_id, question=f"question {case_id}?", provenance=kept, **fields)


# a1, a2 simple; b1, b2, b3 reasoning; h1 hand-written
TYPES = {"a1": "simple", "b1": "reasoning", "a2": "simple", "b2": "reasoning", "b3": "reasoning", "h1": None}
VALUES = {
    "cell-1": {
        "correctness_0to1": {"a1": 1.0, "a2": 0.5, "b1": 0.0, "b2": 0.25, "b3": 0.5, "h1": 1.0},
        "fail_good_answers": {"a1": 1.0, "b1": 0.0, "b2": 1.0},  # only the keyword-tested cases
        "latency_s": {"a1": 9.0, "b1": 9.0},  # not a headline score: not broken down
    },
    "cell-2": {
        "correctness_0to1": {"b1": 1.0, "b2": 1.0},  # answered only reasoning cases (its sample)
    },
}


def by_key(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(row["cell"], row["case_type"]): row for row in rows}


def test_breakdown_values_are_the_per_type_means_of_the_case_values():
    rows = case_type_rows(HEADLINE, VALUES, LABELS, TYPES, STATS)
    assert [(r["label"], r["case_type"]) for r in rows] == [
        ("cs128", "simple"),
        ("cs128", "reasoning"),
        ("cs128", UNTYPED),  # cases without a type come last
        ("cs256", "reasoning"),  # no row for a type the cell has no values for
    ]
    found = by_key(rows)
    simple, reasoning = found["cell-1", "simple"], found["cell-1", "reasoning"]
    assert simple["correctness_0to1"] == 0.75 and simple["correctness_0to1_cases"] == 2
    assert reasoning["correctness_0to1"] == 0.25 and reasoning["correctness_0to1_cases"] == 3
    assert simple["fail_good_answers"] == 1.0 and simple["fail_good_answers_cases"] == 1
    assert reasoning["fail_good_answers"] == 0.5 and reasoning["fail_good_answers_cases"] == 2
    # three cases on a known scale: an interval, wider than the values; under three: none (too few)
    assert reasoning["correctness_0to1_low"] <= 0.25 <= reasoning["correctness_0to1_high"]
    assert reasoning["correctness_0to1_high"] > 0.5
    for row, column in (
        (simple, "correctness_0to1"),
        (simple, "fail_good_answers"),
        (reasoning, "fail_good_answers"),
    ):
        assert row[f"{column}_low"] is None and row[f"{column}_high"] is None
    untyped = found["cell-1", UNTYPED]
    assert untyped["correctness_0to1"] == 1.0 and untyped["correctness_0to1_cases"] == 1
    assert "fail_good_answers" not in untyped  # h1 was not keyword-tested
    other = found["cell-2", "reasoning"]
    assert other["correctness_0to1"] == 1.0 and other["correctness_0to1_cases"] == 2
    assert not any(key.startswith("latency_s") for row in rows for key in row)


@pytest.mark.parametrize(
    "types",
    [
        {"a1": "simple", "a2": "simple", "b1": "simple"},  # a single type
        dict.fromkeys(TYPES),  # hand-written cases: no type at all
        {"a1": "simple", "a2": "simple", "b1": None, "zz": "reasoning"},  # the other type was not scored
    ],
)
def test_no_breakdown_and_no_section_without_two_case_types(types: dict):
    rows = case_type_rows(HEADLINE, VALUES, LABELS, types, STATS)
    assert rows == []
    page = render_report(report_input(rows))
    assert "Scores by case type" not in page and "case-types" not in page
    assert ResultsTable(**table_fields(rows)).case_type_csv() == ""


def report_input(case_type_rows: list[dict]) -> ReportInput:
    rows = [{"cell": cell, "label": label, "correctness_0to1": 0.5} for cell, label in LABELS.items()]
    return ReportInput(
        title="run",
        axes=["chunk_size"],
        varying_axes=[],
        rows=rows,
        headline=HEADLINE,
        case_type_rows=case_type_rows,
    )


def table_fields(case_type_rows: list[dict]) -> dict:
    return {
        "title": "run",
        "rows": [],
        "headline": HEADLINE,
        "notes": [],
        "warnings": [],
        "report_html": "",
        "case_type_rows": case_type_rows,
    }


def test_the_report_shows_value_interval_and_cases_per_cell_and_case_type():
    rows = case_type_rows(HEADLINE, VALUES, LABELS, TYPES, STATS)
    page = render_report(report_input(rows))
    assert '<h2 id="case-types">Scores by case type</h2>' in page
    assert '<a href="#case-types">By case type</a>' in page
    assert '<td class="number">1 n=1: too few for an interval</td>' in page  # h1: one case
    assert "0.75 n=2: too few for an interval" in page
    reasoning = by_key(rows)["cell-1", "reasoning"]
    low, high = reasoning["correctness_0to1_low"], reasoning["correctness_0to1_high"]
    assert f"0.25 [{low:.4g}, {high:.4g}] n=3" in page  # value [low, high] n=cases
    assert "<td>cs256</td><td>reasoning</td>" in page


def test_case_types_and_cell_labels_are_escaped_in_the_report():
    types = {case_id: HOSTILE_TYPE if kind == "simple" else kind for case_id, kind in TYPES.items()}
    labels = {"cell-1": '<img src=x onerror="alert(1)">', "cell-2": "cs256"}
    rows = case_type_rows(HEADLINE, VALUES, labels, types, STATS)
    assert HOSTILE_TYPE in {row["case_type"] for row in rows}
    page = render_report(report_input(rows))
    assert HOSTILE_TYPE not in page and "<img" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page


def test_the_breakdown_is_written_as_csv():
    rows = case_type_rows(HEADLINE, VALUES, LABELS, TYPES, STATS)
    lines = ResultsTable(**table_fields(rows)).case_type_csv().splitlines()
    assert lines[0].startswith("cell,label,case_type,correctness_0to1,correctness_0to1_low,")
    assert len(lines) == 1 + len(rows)
    assert lines[1].startswith("cell-1,cs128,simple,0.75,")


def test_the_declines_rate_is_a_headline_score_only_when_the_run_computed_it():
    row = {"correctness_0to1": 0.5, "fail_good_answers": 0.1, "fail_bad_answers": 0.0, "mrr": 0.3}
    headline = BenchmarkConfig().scoring().headline()
    columns = [m.column for m in present(headline, [row | {"fail_declines": 0.25}])]
    assert columns == ["correctness_0to1", "fail_good_answers", "fail_bad_answers", "fail_declines", "mrr"]
    (declines,) = [
        m for m in present(headline, [row | {"fail_declines": 0.25}]) if m.column == "fail_declines"
    ]
    assert not declines.higher_is_better and "declin" in declines.label
    assert "fail_declines" not in [m.column for m in present(headline, [row])]
    assert "fail_declines" not in [m.column for m in present(headline, [row | {"fail_declines": None}])]


def test_the_first_run_note_names_the_eval_set():
    suite = EvalSuite.of([case("a1", "simple"), case("h1", None)], "artifact my-eval-set version 3")
    empty = CellResults(cells=[], retrievals={}, answer_sets={}, judged={}, keyword={})
    notes = run_notes(empty, None, 0, suite)
    assert notes[0] == f"Eval set: artifact my-eval-set version 3 (2 cases, fingerprint {suite.fingerprint})."
    assert not run_notes(empty, None, 0)[0].startswith("Eval set")


# --- wired through build_results: a retrieval-only run over generated cases -------------------------


def retrieval_result(spec: CellSpec, hits: dict[str, float]) -> RetrievalResult:
    traces = [
        CaseRetrieval(
            case_id=case_id,
            expected_sources=["doc.md"],
            retrieved_sources=["doc.md"] if hit else [],
            first_relevant_rank=1 if hit else None,
            values={m.column_at(5): 1 - hit if m.complement else hit for m in RETRIEVAL_MEASURES},
        )
        for case_id, hit in hits.items()
    ]
    mean = sum(hits.values()) / len(hits)
    metrics = RetrievalMetrics(
        cases_used=len(hits),
        metrics_k=5,
        top_k=5,
        means={m.column_at(5): 1 - mean if m.complement else mean for m in RETRIEVAL_MEASURES},
    )
    index = IndexManifest(
        embedding_model="m",
        dimension=4,
        chunk_size=spec.chunk_size,
        chunk_overlap=spec.chunk_overlap,
        chunk_count=3,
        chunk_set_fingerprint="f",
        max_seq_length=256,
        chunks_over_max_length=0,
        longest_chunk_tokens=10,
        encoded_texts=3,
        build_seconds=0.1,
        chunks_per_second=30.0,
    )
    return RetrievalResult(
        spec=spec,
        chunk_count=3,
        index=index,
        lexical=None,
        search=SearchStats(queries=len(hits), ms_per_query=0.1),
        retrieval=RetrievalReport(metrics=metrics, cases=traces),
    )


def test_every_column_of_a_retrieval_row_is_a_results_column():
    """The row's retrieval metrics, index costs and counts all count as the row's own columns, derived from
    their declarations: a metric named like one of them is refused."""
    from ragbench.analysis.columns import is_results_column
    from ragbench.retrieval.measures import INDEX_COST_COLUMNS

    spec = CellSpec(chunk_size=128, chunk_overlap=13, embedding_model="m", top_k=5)
    row = retrieval_result(spec.upto("retrieve"), {"a1": 1.0, "a2": 0.0}).columns()
    assert {"mrr", "hit_rate@5", "failure_rate@5", "ndcg@10", *INDEX_COST_COLUMNS} <= set(row)
    assert [column for column in row if not is_results_column(column)] == []
    assert not is_results_column("tone")


def test_build_results_breaks_the_run_down_by_the_cases_types():
    cases = [
        case("a1", "simple", expected_sources=["doc.md"]),
        case("a2", "simple", expected_sources=["doc.md"]),
        case("b1", "multi_context", expected_sources=["doc.md"]),
    ]
    spec = CellSpec(chunk_size=128, chunk_overlap=13, embedding_model="m", top_k=5)
    retrieval = retrieval_result(spec.upto("retrieve"), {"a1": 1.0, "a2": 0.0, "b1": 1.0})
    results = CellResults(
        cells=[spec], retrievals={retrieval.spec.id: retrieval}, answer_sets={}, judged={}, keyword={}
    )
    label = "configs/eval_cases/generated.yaml"
    scoring = BenchmarkConfig().scoring()
    common = {"title": "t", "scoring": scoring, "notes": [], "warnings": [], "reused_cells": set()}
    suite = EvalSuite.of(cases, label)
    table, records = build_results(results, ResultsInputs(**common, statistics=STATS, eval_suite=suite))
    assert table.eval_fingerprint == suite.fingerprint
    assert table.eval_set == label
    found = {row["case_type"]: row for row in table.case_type_rows}
    assert list(found) == ["simple", "multi_context"]
    assert found["simple"]["mrr"] == 0.5 and found["simple"]["mrr_cases"] == 2
    assert found["multi_context"]["hit_rate@5"] == 1.0 and found["multi_context"]["hit_rate@5_cases"] == 1
    assert "Scores by case type" in run_report(table, records, scoring.rubrics)
    untyped, records = build_results(results, ResultsInputs(**common, statistics=STATS))  # no cases: none
    assert untyped.case_type_rows == []
    assert "Scores by case type" not in run_report(untyped, records, scoring.rubrics)
