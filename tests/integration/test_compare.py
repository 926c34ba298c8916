"""Runs over time: `run.py compare` flags metrics that moved the wrong way, `promote` names a champion."""

from junitparser import JUnitXml

import ragbench
import run
from ragbench.runs.compare import compare_runs, comparison_text
from ragbench.runs.gate import RegressionConfig, judge_run
from ragbench.runs.record import RunRecord
from ragbench.stats.inference import StatisticsConfig, smallest_attainable_p
from tests.projects import write_project

# Each fact sits in its own document; the edit moves most of them into one FAQ page, so retrieval
# finds the FAQ first for those questions: a regression on enough cases to stand out of the noise.
FACTS = {
    "bread": (
        "Bread dough rises because yeast ferments sugar into carbon dioxide gas.",
        "Why does dough get bigger?",
    ),
    "mars": (
        "Olympus Mons on Mars is the tallest volcano in the solar system.",
        "Where is the highest volcano?",
    ),
    "moon": (
        "The Moon's gravity pulls the oceans and causes the tides.",
        "What makes the sea rise and fall?",
    ),
    "pasta": (
        "Dried pasta cooks in eight to twelve minutes in salted boiling water.",
        "How long do dried noodles cook?",
    ),
    "bees": ("Honey bees dance to tell other bees where flowers are.", "How do bees share where food is?"),
    "ice": (
        "Ice floats because frozen water is less dense than liquid water.",
        "Why does frozen water float?",
    ),
    "rust": ("Iron rusts when oxygen and water turn it into iron oxide.", "Why does iron corrode?"),
    "tea": (
        "Green tea is best steeped at about eighty degrees Celsius.",
        "How hot should water be for green tea?",
    ),
}
DOCUMENTS = {f"{topic}.md": f"# {topic.title()}\n{fact}" for topic, (fact, _) in FACTS.items()}
CASES = [
    {"id": topic, "question": question, "expected_sources": [f"{topic}.md"]}
    for topic, (_, question) in FACTS.items()
]
MOVED = ["bread", "mars", "moon", "pasta", "bees", "ice", "rust"]


def record(
    name: str,
    values: dict,
    fingerprint: str = "e1",
    case_values: dict | None = None,
    bounds: dict | None = None,
) -> RunRecord:
    metadata = {
        "metric_directions": {"mrr": "higher", "latency_p95_s": "lower"},
        "eval_fingerprint": fingerprint,
    }
    metadata |= {f"{metric}__{cell}": value for (metric, cell), value in values.items()}
    for (metric, cell), (low, high) in (bounds or {}).items():
        metadata |= {f"{metric}_low__{cell}": low, f"{metric}_high__{cell}": high}
    return RunRecord.from_metadata(name, "now", metadata, case_values or {})


def test_a_change_within_the_noise_is_not_a_regression_and_the_rule_is_named():
    cases = [f"q{i}" for i in range(8)]

    def run_with(hits: list[float], fingerprint: str = "e1") -> RunRecord:
        mean = sum(hits) / len(hits)
        per_case = {"c1": {"mrr": dict(zip(cases, hits, strict=True))}}
        return record(
            "r", {("mrr", "c1"): mean}, fingerprint, per_case, {("mrr", "c1"): (mean - 0.2, mean + 0.1)}
        )

    before = run_with([1.0] * 8)
    one_worse = compare_runs(run_with([0.0] + [1.0] * 7), before, {}, 0.0)
    (row,) = one_worse.rows
    assert row["worse_by"] > 0 and not row["regression"]  # past the threshold, but one case of eight
    assert row["rule"] == "paired permutation test on 8 cases" and row["p_value"] == 1.0
    assert row["baseline_interval"].startswith("[0.8") and row["current_interval"].startswith("[0.67")
    many_worse = compare_runs(run_with([0.0] * 7 + [1.0]), before, {}, 0.0)
    assert many_worse.regressions and many_worse.rows[0]["p_value"] < 0.05
    other_set = compare_runs(run_with([0.0] * 7 + [1.0], fingerprint="e2"), before, {}, 0.0)
    assert other_set.rows[0]["rule"] == "intervals do not overlap" and other_set.regressions
    overlapping = compare_runs(run_with([0.0] + [1.0] * 7, fingerprint="e2"), before, {}, 0.0)
    assert overlapping.rows[0]["rule"] == "intervals overlap" and not overlapping.regressions


def test_each_metric_regresses_in_its_own_direction_past_its_threshold():
    before = record("a", {("mrr", "c1"): 0.8, ("latency_p95_s", "c1"): 2.0, ("mrr", "gone"): 0.5})
    after = record("b", {("mrr", "c1"): 0.7, ("latency_p95_s", "c1"): 2.5, ("mrr", "new"): 0.9})
    comparison = compare_runs(after, before, thresholds={"latency_p95_s": 1.0}, default_threshold=0.05)
    assert [(r["metric"], r["cell"]) for r in comparison.regressions] == [("mrr", "c1")]  # latency within 1 s
    assert comparison.added_cells == ["new"] and comparison.removed_cells == ["gone"]
    slower = record("c", {("mrr", "c1"): 0.9, ("latency_p95_s", "c1"): 3.5})
    assert [r["metric"] for r in compare_runs(slower, before, {"latency_p95_s": 1.0}, 0.0).regressions] == [
        "latency_p95_s"
    ]
    assert not compare_runs(before, before, {}, 0.0).regressions


def test_the_leaderboard_page_escapes_what_it_shows():
    planted = "<script>alert(1)</script>"
    before = record(planted, {("mrr", planted): 0.9})
    page = judge_run(
        record("b", {("mrr", planted): 0.1}),
        before,
        config=planted,
        baseline_mode="previous",
        regression=RegressionConfig(),
        statistics=StatisticsConfig(),
    ).html()
    assert planted not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_an_edited_document_is_a_regression_and_an_unchanged_rerun_is_not(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "name: compare-test\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 4,"
        " reader: []}\n"
        "retrieval: {metrics_k: 1}\n",
    )
    compare = ["compare", "--config", "config.yaml"]
    assert run.main(compare) == 2  # no runs yet: bad input
    assert run.main(["--config", "config.yaml"]) == 0
    from zenml.client import Client

    first = Client().get_pipeline("rag_benchmark").last_run.name
    assert run.main(compare) == 2  # one run: nothing to compare with
    # most facts move into one FAQ page: retrieval for their questions finds the FAQ first
    for number, topic in enumerate(MOVED):  # what stays behind says nothing about the topic
        (tmp_path / "kb" / f"{topic}.md").write_text(f"# Page {number}\nThis page has moved.")
    (tmp_path / "kb" / "faq.md").write_text("# FAQ\n" + "\n".join(FACTS[topic][0] for topic in MOVED))
    capsys.readouterr()
    assert run.main(["--config", "config.yaml"]) == 1  # the pipeline's own gate: regressed
    out = capsys.readouterr().out
    assert "Gate (previous baseline)" in out and "REGRESSED" in out and "REGRESSION mrr in cs64" in out
    assert run.main(compare) == 1  # compare by hand agrees
    out = capsys.readouterr().out
    assert "REGRESSION mrr in cs64" in out and "REGRESSION hit_rate_at_1 in cs64" in out
    assert "paired permutation test on 8 cases" in out
    assert list((tmp_path / "out" / "compare").glob("*.html")) and list(
        (tmp_path / "out" / "compare").glob("*.json")
    )
    edited = Client().get_pipeline("rag_benchmark").last_run
    assert edited.run_metadata["gate_status"] == "regressed" and edited.run_metadata["regressions"] >= 2
    # CI's formats, beside gate.html: one JUnit failure per regressed metric and cell, and the summary
    suite = next(iter(JUnitXml.fromstring((tmp_path / "out" / "latest" / "gate.xml").read_text())))
    assert suite.failures == edited.run_metadata["regressions"] and suite.errors == 0
    assert "| REGRESSION |" in (tmp_path / "out" / "latest" / "gate.md").read_text()
    # unchanged since the edit: still judged against the last run that passed, never the regressed one
    assert run.main(["--config", "config.yaml"]) == 1
    assert Client().get_pipeline("rag_benchmark").last_run.run_metadata["baseline_run"] == first
    assert run.main([*compare, "--against", "champion"]) == 2  # no champion yet
    assert run.main(["promote", edited.name]) == 0  # a person accepts the change
    assert run.main(["--config", "config.yaml"]) == 0  # judged against the promoted run
    assert Client().get_pipeline("rag_benchmark").last_run.run_metadata["baseline_run"] == edited.name
    assert run.main(compare) == 0
    # the champion: the first run; against it the latest is a regression; promoting moves the tag
    assert run.main(["promote", first]) == 0
    assert run.main([*compare, "--against", "champion"]) == 1
    latest = Client().get_pipeline("rag_benchmark").last_run.name
    assert run.main(["promote", latest]) == 0
    champions = Client().list_pipeline_runs(tags=["equals:champion-compare-test"]).items
    assert [r.name for r in champions] == [latest]
    # a second config keeps its own champion
    (tmp_path / "other.yaml").write_text(
        (tmp_path / "config.yaml").read_text().replace("name: compare-test", "name: compare-other")
    )
    assert run.main(["--config", "other.yaml"]) == 0
    other = Client().get_pipeline("rag_benchmark").last_run.name
    assert run.main(["promote", other]) == 0
    for champion_of, champion in (("compare-test", latest), ("compare-other", other)):
        holders = Client().list_pipeline_runs(tags=[f"equals:champion-{champion_of}"]).items
        assert [r.name for r in holders] == [champion]
    assert run.main([*compare, "--against", "no-such-run"]) == 2
    assert run.main(["promote", "no-such-run"]) == 2


def test_a_value_the_current_run_could_not_produce_is_a_missing_regression_not_a_skipped_row():
    before = record("a", {("mrr", "c1"): 0.8, ("mrr", "c2"): 0.7, ("mrr", "gone"): 0.5})
    after = RunRecord.from_metadata(
        "b",
        "now",
        {
            "metric_directions": {"mrr": "higher"},
            "eval_fingerprint": "e1",
            "mrr__c1": 0.8,
            "cell_ids": ["c1", "c2"],  # c2 is in the grid but has no value; "gone" left the grid
            "incomplete_cells": {"c2": "every reader call failed in cell c2; last error: 503"},
        },
        {},
    )
    comparison = compare_runs(after, before, {}, 0.0)
    (missing,) = comparison.missing
    assert missing["cell"] == "c2" and missing["current"] is None and missing["regression"]
    assert "every reader call failed" in missing["rule"]
    assert comparison.removed_cells == ["gone"] and [r["cell"] for r in comparison.regressions] == ["c2"]
    assert "MISSING mrr in c2: 0.7 -> none" in comparison_text(comparison)


def test_a_metric_the_config_no_longer_asks_for_is_dropped_but_one_it_asks_for_is_missing():
    before = RunRecord.from_metadata(
        "a",
        "now",
        {
            "metric_directions": {"mrr": "higher", "cites_source": "higher", "faithfulness_1to5": "higher"},
            "eval_fingerprint": "e1",
            "mrr__c1": 0.8,
            "cites_source__c1": 4.0,
            "faithfulness_1to5__c1": 4.5,
        },
        {},
    )
    metadata = {"metric_directions": {"mrr": "higher"}, "eval_fingerprint": "e1", "mrr__c1": 0.8}
    metadata |= {"cell_ids": ["c1"], "configured_metrics": ["mrr", "cites_source"]}
    comparison = compare_runs(RunRecord.from_metadata("b", "now", metadata, {}), before, {}, 0.0)
    # the custom rubric is still configured but scored nothing: missing, a regression (fails closed);
    # the context rubric was taken out of the config: listed, never a regression
    assert [(r["metric"], r["kind"]) for r in comparison.regressions] == [("cites_source", "missing")]
    assert comparison.dropped_metrics == ["faithfulness_1to5"]
    assert "metric no longer configured: faithfulness_1to5" in comparison_text(comparison)
    older = RunRecord.from_metadata("b", "now", metadata | {"configured_metrics": None}, {})
    assert {r["metric"] for r in compare_runs(older, before, {}, 0.0).missing} == {
        "cites_source",
        "faithfulness_1to5",
    }


def test_a_paired_test_that_cannot_reach_alpha_leaves_the_decision_to_the_threshold():
    cases = ["q1", "q2", "q3"]

    def three(hits: list[float]) -> RunRecord:
        per_case = {"c1": {"mrr": dict(zip(cases, hits, strict=True))}}
        return record("r", {("mrr", "c1"): sum(hits) / 3}, "e1", per_case)

    assert smallest_attainable_p(3) == 0.25 and smallest_attainable_p(6) < 0.05
    all_lost = compare_runs(three([0.0, 0.0, 0.0]), three([1.0, 1.0, 1.0]), {}, 0.1)
    (row,) = all_lost.rows
    assert row["regression"] and "cannot decide at n = 3" in row["rule"] and "threshold rule" in row["rule"]
    within_threshold = compare_runs(three([1.0, 1.0, 0.0]), three([1.0, 1.0, 1.0]), {"mrr": 0.5}, 0.0)
    assert not within_threshold.regressions  # worse by 0.33, allowed 0.5


def test_the_gate_fails_closed():
    statistics, regression = StatisticsConfig(), RegressionConfig()

    def gate(current: RunRecord, baseline: RunRecord | None, failure: str | None = None):
        return judge_run(
            current,
            baseline,
            config="c",
            baseline_mode="previous",
            regression=regression,
            statistics=statistics,
            failure=failure,
        )

    good = record("good", {("mrr", "c1"): 0.8})
    assert gate(good, good).passed and gate(good, good).exit_code == 0
    first = gate(good, None)
    assert first.passed and "no previous baseline" in first.reasons[0]
    broken = gate(good, good, failure="status failed (step answer_x: provider down)")
    assert broken.status == "failed" and broken.exit_code == 1 and "provider down" in broken.reasons[0]
    renamed = gate(record("new", {("mrr", "other"): 0.8}), good)
    assert renamed.status == "regressed" and "nothing was compared" in renamed.reasons[0]
    worse = gate(record("worse", {("mrr", "c1"): 0.1}), good)
    assert worse.status == "regressed" and worse.metadata()["regressions"] == 1
    assert worse.metadata()["baseline_run"] == "good" and worse.metadata()["compared_metrics"] == 1
    page = gate(record("<b>x</b>", {("mrr", "c1"): 0.1}), good).html()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def gate_of(current: RunRecord, baseline: RunRecord | None, **regression):
    return judge_run(
        current,
        baseline,
        config="c",
        baseline_mode="previous",
        regression=RegressionConfig(**regression),
        statistics=StatisticsConfig(),
    )


def test_a_metric_the_baseline_lacks_is_listed_as_not_comparable_never_passed_silently():
    # the baseline (a night whose judge scored nothing would never be one; a config that added a rubric
    # since is) has mrr only; the current run is also scored on correctness
    before = record("before", {("mrr", "c1"): 0.8})
    metadata = {
        "metric_directions": {"mrr": "higher", "correctness_0to1": "higher"},
        "eval_fingerprint": "e1",
        "mrr__c1": 0.8,
        "correctness_0to1__c1": 0.25,
        "cell_ids": ["c1"],
        "configured_metrics": ["mrr", "correctness_0to1"],
    }
    now = RunRecord.from_metadata("now", "now", metadata, {})
    comparison = compare_runs(now, before, {}, 0.0)
    (row,) = comparison.not_comparable
    assert row["metric"] == "correctness_0to1" and row["current"] == 0.25 and not row["regression"]
    assert len(comparison.compared) == 1
    assert "NOT COMPARABLE correctness_0to1 in c1" in comparison_text(comparison)
    verdict = gate_of(now, before)
    assert verdict.passed and any("not comparable" in reason for reason in verdict.reasons)
    assert verdict.metadata()["not_comparable_metrics"] == 1 and verdict.metadata()["compared_metrics"] == 1
    assert "Not comparable" in verdict.html()
    # only values the baseline lacks: nothing was compared, which is never a pass
    alone = RunRecord.from_metadata("alone", "now", metadata | {"mrr__c1": None}, {})
    assert gate_of(alone, record("old", {("hit_rate", "c1"): 1.0})).status == "regressed"


def test_a_changed_eval_set_fails_the_gate_unless_the_config_accepts_it():
    before = record("before", {("mrr", "c1"): 0.8}, fingerprint="e1")
    after = record("after", {("mrr", "c1"): 0.8}, fingerprint="e2")
    failed = gate_of(after, before)
    assert failed.status == "regressed" and failed.exit_code == 1
    (reason,) = failed.reasons
    assert "eval set changed since before (fingerprint e1 -> e2)" in reason
    assert "regression.on_eval_change=warn" in reason
    accepted = gate_of(after, before, on_eval_change="warn")
    assert accepted.passed and "accepted by regression.on_eval_change: warn" in accepted.reasons[0]
    assert gate_of(before, before).reasons == []  # the same eval set says nothing


def test_only_a_run_that_passed_its_gate_or_was_promoted_is_a_baseline():
    from ragbench.runs.record import is_baseline

    assert is_baseline("completed", {"gate_status": "passed"}, champion=False)
    for status in ("regressed", "incomplete", "failed", None):
        assert not is_baseline("completed", {"gate_status": status}, champion=False)
    assert is_baseline("completed", {"gate_status": "regressed"}, champion=True)  # accepted by a person
    assert not is_baseline("failed", {"gate_status": "passed"}, champion=True)


def test_a_baseline_table_this_version_cannot_load_falls_back_to_intervals(caplog):
    """A run made before the core package moved stored its table under the old import path."""
    from types import SimpleNamespace

    from steps.history import run_case_values

    class OldArtifact:
        def load(self):
            raise ModuleNotFoundError("No module named 'ragbench.results'")

    old_run = SimpleNamespace(
        name="old-night", steps={"build_results_table": SimpleNamespace(outputs={"results": [OldArtifact()]})}
    )
    assert run_case_values(old_run) == {}
    assert "old-night" in caplog.text and "compared by intervals" in caplog.text


def test_a_latency_that_rounds_to_zero_is_tracked_not_missing():
    """A fast system's p95 of 0.0 s (rounded) is a value: the next run must not find it missing."""
    from ragbench.analysis.results import ResultsTable
    from ragbench.runs.record import run_metadata

    table = ResultsTable(
        title="t", rows=[{"cell": "c1", "latency_p95_s": 0.0}], headline=[], notes=[], warnings=[]
    )
    flat = run_metadata(table)
    assert flat["latency_p95_s__c1"] == 0.0 and flat["metric_directions"]["latency_p95_s"] == "lower"
    assert flat["ragbench_version"] == ragbench.__version__  # every run says which release made it
    before = record("a", {("latency_p95_s", "c1"): 0.001})
    assert not compare_runs(RunRecord.from_metadata("b", "now", flat, {}), before, {}, 0.0).missing
