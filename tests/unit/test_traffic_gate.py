"""The gate between two nights of the deployed system's traces: other traces each night by design, so
each metric is compared as two independent samples (no failure for a changed eval set), and a night that
scored too few traces is inconclusive, never a pass."""

import numpy as np

from ragbench.runs.gate import RegressionConfig, judge_run
from ragbench.runs.gate_formats import gate_checks, junit_xml
from ragbench.runs.record import RunRecord
from ragbench.stats.inference import StatisticsConfig, two_sample_p_value

CELL = "prod-rag"


def night(
    name: str, scores: list[float], *, traffic: bool = True, strata: list[str] | None = None, mean=None
) -> RunRecord:
    """A night's run: the judge's 0-1 score of each trace, its mean (`mean`, else the plain one), the traces
    it scored, and each trace's stratum (`strata`) for a stratified sample."""
    cases = {f"{name}-trace-{n}": score for n, score in enumerate(scores)}
    metadata = {
        "metric_directions": {"faithfulness_0to1": "higher"},
        "eval_fingerprint": f"fingerprint-{name}",
        "cell_ids": [CELL],
        f"faithfulness_0to1__{CELL}": float(np.mean(scores)) if mean is None else mean,
    }
    if traffic:
        metadata["traffic_sample"] = {
            "origin": "spans.jsonl",
            "window": "window 2026-12-02 to 2026-12-03",
            "usable": len(scores),
            "sampled": len(scores),
        }
        if strata is not None:
            metadata["traffic_sample"]["stratum_of"] = dict(zip(cases, strata, strict=True))
    return RunRecord.from_metadata(name, "now", metadata, {CELL: {"faithfulness_0to1": cases}})


def verdict(current: RunRecord, baseline: RunRecord | None, **regression):
    return judge_run(
        current,
        baseline,
        config="nightly",
        baseline_mode="previous",
        regression=RegressionConfig(**regression),
        statistics=StatisticsConfig(),
    )


def test_two_sample_p_value_tells_a_drop_from_noise():
    good = [1.0] * 20 + [0.75] * 10
    assert two_sample_p_value(good, [0.0] * 15 + [0.25] * 15) < 0.001
    assert two_sample_p_value(good, list(reversed(good))) == 1.0  # the same values: no difference at all
    assert two_sample_p_value(good, [1.0] * 19 + [0.75] * 11) > 0.5
    assert two_sample_p_value([1.0], [0.0]) == 1.0  # one value a side: nothing to shuffle


def test_a_night_whose_scores_dropped_regresses_against_the_baseline_night():
    baseline = night("monday", [1.0] * 20 + [0.75] * 10)
    broken = night("tuesday", [0.0] * 20 + [0.25] * 10)
    gate = verdict(broken, baseline)
    assert gate.status == "regressed" and gate.exit_code == 1
    (row,) = gate.comparison.regressions
    assert row["rule"] == "permutation test of two independent samples (30 and 30 traces)"
    assert row["p_value"] < 0.001
    assert any("two samples of the deployed system's traces" in reason for reason in gate.reasons)
    assert not any("eval set changed" in reason for reason in gate.reasons)  # other traces by design


def test_a_night_like_the_baseline_passes_though_its_traces_are_others():
    baseline = night("monday", [1.0] * 20 + [0.75] * 10)
    gate = verdict(night("tuesday", [1.0] * 19 + [0.75] * 11), baseline)
    assert gate.passed, gate.reasons
    assert gate.comparison.independent_samples and not gate.comparison.same_eval_set


def test_a_night_with_too_few_traces_says_so_and_does_not_pass():
    baseline = night("monday", [1.0] * 30)
    quiet = night("tuesday", [1.0, 1.0, 1.0])
    gate = verdict(quiet, baseline)
    assert gate.status == "inconclusive" and gate.exit_code == 1
    assert "too few traces to tell: 3 scored" in gate.too_small
    assert "regression.min_traces = 20" in gate.too_small and gate.too_small in gate.reasons
    assert gate_checks(gate)[0].outcome == "error" and "sample size" in junit_xml(gate)
    assert "INCONCLUSIVE" in gate.text()
    # also on the first night, with nothing to compare against
    assert verdict(quiet, None).status == "inconclusive"
    # a lower bar set by the config lets the same night through
    assert verdict(quiet, baseline, min_traces=3).passed
    # a drop that stands out even on few traces is a regression first
    assert verdict(night("wednesday", [0.0] * 8), baseline, min_traces=20).status == "regressed"


def test_runs_on_written_cases_keep_the_eval_change_rule():
    before, after = night("a", [1.0] * 30, traffic=False), night("b", [1.0] * 30, traffic=False)
    gate = verdict(after, before)
    assert gate.status == "regressed" and any("eval set changed" in reason for reason in gate.reasons)
    assert gate.too_small is None


def test_two_stratified_nights_are_compared_stratum_by_stratum():
    """Tonight drew more of the hard stratum: its weighted mean fell with its mix, and the plain two-sample
    test would call that a regression; compared within strata it passes. A real drop within a stratum
    regresses."""
    hard, easy = [0.0, 0.25] * 5, [1.0, 0.75] * 15
    baseline = night("monday", hard + easy, strata=["hard"] * 10 + ["easy"] * 30, mean=0.7)
    mix = night("tuesday", [0.0, 0.25] * 15 + [1.0, 0.75] * 5, strata=["hard"] * 30 + ["easy"] * 10, mean=0.4)
    gate = verdict(mix, baseline)
    assert gate.passed, gate.reasons
    (row,) = gate.comparison.rows
    assert row["rule"].startswith("permutation test within strata of two independent samples (40 and 40")
    assert row["p_value"] > 0.5
    worse = night("wednesday", hard + [0.25, 0.0] * 15, strata=["hard"] * 10 + ["easy"] * 30, mean=0.13)
    gate = verdict(worse, baseline)
    assert gate.status == "regressed" and gate.comparison.regressions[0]["p_value"] < 0.01
