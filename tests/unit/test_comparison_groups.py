"""Cells with the same values on every case are compared with the best once: the Holm family counts
distinct comparisons, every cell still has its verdict, and each verdict sits beside the interval
adjusted for that family, the unadjusted one labelled as such."""

import math

import numpy as np
import pytest

from ragbench.analysis.uncertainty import compare_cells, difference_text
from ragbench.report.sections import significance_section
from ragbench.report.view import ReportInput
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import (
    PairedComparison,
    StatisticsConfig,
    compare_to_best,
    holm,
    holm_levels,
    paired_difference_test,
    sign_flip_tests,
    tie_set,
)

CASES = [f"q{i}" for i in range(24)]
RESAMPLES = 999


def cell(*worse: int, value: float = 0.0) -> dict[str, float]:
    """1.0 on every case but `worse`, which get `value`."""
    return {case: value if i in worse else 1.0 for i, case in enumerate(CASES)}


def grid() -> dict[str, dict[str, float]]:
    return {
        "best": cell(),
        "best_twin": cell(),
        "flat": cell(1, 5, 9, 13, 17, 21),
        "hnsw": cell(1, 5, 9, 13, 17, 21),  # the flat index's lists exactly
        "ivf": cell(1, 5, 9, 13, 17, 21),
        "weak": cell(*range(16)),
        "close": cell(3),
    }


def test_identical_cells_are_compared_once_and_the_family_counts_distinct_comparisons():
    best, comparisons = compare_to_best(grid(), higher_is_better=True, seed=1)
    assert best == "best"
    by_candidate = {c.candidate: c for c in comparisons}
    assert set(by_candidate) == {"best_twin", "close", "flat", "weak"}
    assert by_candidate["flat"].same == ["hnsw", "ivf"] and by_candidate["flat"].cells == [
        "flat",
        "hnsw",
        "ivf",
    ]
    tested = [c for c in comparisons if not c.identical]
    assert all(c.family == 3 for c in comparisons)
    assert [c.p_holm for c in tested] == pytest.approx(holm([c.p_value for c in tested]))
    alone = {name: grid()[name] for name in ("best", "flat", "weak", "close")}  # no twins at all
    _, without = compare_to_best(alone, higher_is_better=True, seed=1)
    assert [(c.candidate, c.p_holm, c.verdict) for c in without] == [
        (c.candidate, c.p_holm, c.verdict) for c in tested
    ]


def test_every_cell_has_a_verdict_and_the_best_s_twin_is_tied_untested():
    values = grid()
    best, comparisons = compare_to_best(values, higher_is_better=True, seed=1)
    verdicts = {cell: c.verdict for c in comparisons for cell in c.cells}
    assert set(verdicts) == set(values) - {best}
    (twin,) = [c for c in comparisons if c.identical]
    assert (twin.candidate, twin.same, twin.verdict, twin.difference, twin.p_holm) == (
        "best_twin",
        [],
        "tied",
        0.0,
        1.0,
    )
    assert (twin.n, twin.low, twin.high, twin.adjusted_low, twin.adjusted_high) == (24, 0.0, 0.0, 0.0, 0.0)
    assert verdicts["weak"] == "worse" and verdicts["close"] == "tied"
    assert verdicts["flat"] == verdicts["hnsw"] == verdicts["ivf"]
    tied = tie_set(best, comparisons)
    assert tied[0] == "best" and "best_twin" in tied and "close" in tied and "weak" not in tied
    assert ("hnsw" in tied) == ("flat" in tied) == (verdicts["flat"] == "tied")


def test_grouping_is_nan_aware_and_needs_the_same_cases_and_values():
    scored = cell(2)
    with_nan = scored | {"unscored": math.nan}  # a NaN is a case without a value
    fewer = {case: v for case, v in scored.items() if case != "q0"}  # one case fewer: not the same
    values = {"best": cell(), "scored": scored, "with_nan": with_nan, "fewer": fewer}
    _, comparisons = compare_to_best(values, higher_is_better=True)
    assert {c.candidate: c.same for c in comparisons} == {"fewer": [], "scored": ["with_nan"]}
    assert all(c.family == 2 for c in comparisons)


def test_the_adjusted_interval_is_the_test_inverted_at_holm_s_level_and_contains_the_unadjusted():
    values = grid()
    _, comparisons = compare_to_best(values, higher_is_better=True, alpha=0.05, seed=4, resamples=RESAMPLES)
    tested = [c for c in comparisons if not c.identical]
    levels = holm_levels([c.p_value for c in tested], 0.05)
    # weak (16 of 24 worse) is rejected at 0.05/3, flat (6 of 24, p about 2/64) fails at 0.05/2, where
    # Holm stops: close is held to that level too
    assert [(c.candidate, level) for c, level in zip(tested, levels, strict=True)] == [
        ("close", pytest.approx(0.05 / 2)),
        ("flat", pytest.approx(0.05 / 2)),
        ("weak", pytest.approx(0.05 / 3)),
    ]
    for c, level in zip(tested, levels, strict=True):
        assert c.adjusted_confidence == pytest.approx(1 - level) and c.adjustment == "holm"
        assert c.adjusted_low <= c.low <= c.difference <= c.high <= c.adjusted_high
        ((test, bound),) = sign_flip_tests(
            [([values["best"][case] for case in CASES], [values[c.candidate][case] for case in CASES])],
            seed=4,
            resamples=RESAMPLES,
        )
        assert (c.difference, c.p_value, bound) == (test.mean, test.p_value(), 1.0)
        assert (c.low, c.high) == test.interval(1 - 0.95, bound)
        assert (c.adjusted_low, c.adjusted_high) == test.interval(level, bound)
        assert (c.verdict == "tied") == (c.adjusted_low <= 0 <= c.adjusted_high)
    (twin,) = [c for c in comparisons if c.identical]
    assert (twin.low, twin.high, twin.adjusted_low, twin.adjusted_high) == (0.0, 0.0, 0.0, 0.0)
    weak = next(c for c in comparisons if c.candidate == "weak")
    assert weak.adjusted_high - weak.adjusted_low > weak.high - weak.low


def test_the_test_s_interval_follows_its_confidence():
    rng = np.random.default_rng(2)
    reference, candidate = rng.normal(0, 1, 30).tolist(), rng.normal(0.3, 1, 30).tolist()
    narrow = paired_difference_test(reference, candidate, seed=2, confidence=0.9)
    wide = paired_difference_test(reference, candidate, seed=2, confidence=0.99)
    assert narrow[0] == wide[0] and narrow[3] == wide[3]  # same difference and p-value
    assert wide[1] < narrow[1] < narrow[2] < wide[2]


def test_a_comparison_stored_before_groups_still_loads_and_reads_as_unadjusted():
    old = PairedComparison.model_validate(
        {
            "candidate": "b",
            "reference": "a",
            "n": 20,
            "difference": -0.25,
            "low": -0.42,
            "high": -0.08,
            "p_value": 0.01,
            "p_holm": 0.24,
            "test": "wilcoxon",
            "verdict": "tied",
        }
    )
    assert old.cells == ["b"] and not old.identical and old.family is None
    assert difference_text(old) == "-0.25 [-0.42, -0.08] unadjusted"


def test_a_comparison_stored_with_a_bonferroni_interval_keeps_its_wording_and_a_new_one_names_holm():
    stored = {
        "candidate": "b",
        "reference": "a",
        "n": 20,
        "difference": -0.25,
        "low": -0.42,
        "high": -0.08,
        "p_value": 0.01,
        "p_holm": 0.03,
        "test": "wilcoxon",
        "verdict": "worse",
        "family": 3,
        "adjusted_confidence": 1 - 0.05 / 3,
        "adjusted_low": -0.5,
        "adjusted_high": -0.01,
    }
    old = PairedComparison.model_validate(stored)
    assert old.adjustment is None
    assert (
        difference_text(old) == "-0.25 [-0.5, -0.01] adjusted for 3 comparison(s); unadjusted [-0.42, -0.08]"
    )
    new = PairedComparison.model_validate(stored | {"test": "paired_permutation", "adjustment": "holm"})
    assert difference_text(new) == (
        "-0.25 [-0.5, -0.01] adjusted (Holm, 3 comparison(s)); unadjusted [-0.42, -0.08]"
    )


MRR = MetricInfo(column="mrr", label="MRR", higher_is_better=True)


def verdict_of(values: dict[str, dict[str, float]], names: dict[str, str] | None = None):
    by_cell = {cell: {"mrr": by_case} for cell, by_case in values.items()}
    (found,) = compare_cells([MRR], by_cell, StatisticsConfig(resamples=RESAMPLES), names)
    return found


def test_the_sentence_names_identical_cells_together_and_labels_both_intervals():
    values = {"best": cell(), "flat": cell(1, 7, value=0.5), "hnsw": cell(1, 7, value=0.5)}
    found = verdict_of(values, {"flat": "cs256 · flat", "hnsw": "cs256 · hnsw"})
    (versus,) = found.comparisons
    assert found.comparison_of("hnsw") is versus and found.comparison_of("best") is None
    assert found.tied == ["best", "flat", "hnsw"] and found.runner_up == "flat"
    sentence = found.sentence()
    assert "closest cs256 · flat = cs256 · hnsw (same values on every case): " in sentence
    adjusted = f"[{versus.adjusted_low:.3g}, {versus.adjusted_high:.3g}] adjusted (Holm, 1 comparison(s))"
    assert (
        f"{versus.difference:+.3g} {adjusted}; unadjusted [{versus.low:.3g}, {versus.high:.3g}]" in sentence
    )
    clear = verdict_of({"good": cell(), "bad": cell(*range(18)), "twin": cell(*range(18))})
    assert clear.sentence().startswith(
        "MRR: good is better than every other cell (runner-up bad = twin (same values on every case): -0.75 ["
    )
    assert "adjusted (Holm, 1 comparison(s)); unadjusted [" in clear.sentence()


def test_the_report_shows_the_adjusted_interval_labels_the_unadjusted_and_escapes_names():
    values = grid() | {"<b>hnsw</b>": grid()["hnsw"]}
    found = verdict_of(values, {"best_twin": "twin & co"})
    report = ReportInput(
        title="t", axes=[], varying_axes=[], rows=[], headline=[MRR], verdicts=[found], confidence=0.95
    )
    html = significance_section(report)
    assert "<th>adjusted interval</th>" in html and "<th>unadjusted interval</th>" in html
    # each comparison's adjusted interval is at its own Holm level (weak's 98.3%, the others' 97.5%)
    assert "3 distinct comparison(s): adjusted intervals at " in html
    assert "Same values as the best on every case: twin &amp; co" in html
    assert "&lt;b&gt;hnsw&lt;/b&gt; = flat = hnsw = ivf (same values on every case)" in html
    assert "<b>hnsw</b>" not in html
    weak = found.comparison_of("weak")
    assert f"[{weak.adjusted_low:.4g}, {weak.adjusted_high:.4g}]" in html
    assert html.count("<tr>") == 1 + 3  # header and one row per distinct comparison: no row for the twin
