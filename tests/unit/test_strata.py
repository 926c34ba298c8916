"""A stratified sample of traces: how sample_size is shared between strata, the weighted mean of the strata
with an interval that keeps its level, and the two-night test within strata that a change in the traffic's
mix does not trip."""

import json

import numpy as np
import pytest

from ragbench.inputs.eval_cases import EvalCaseError, load_trace_cases
from ragbench.inputs.spans import read_span_file
from ragbench.inputs.trace_sampling import allocate
from ragbench.inputs.traces import TracesConfig, trace_cases
from ragbench.stats.inference import two_sample_p_value
from ragbench.stats.intervals import mean_interval
from ragbench.stats.ppi import ppi_mean
from ragbench.stats.strata import stratified_estimate, stratified_mean, stratified_p_value
from tests.otlp_traces import NOON_NS, export, rag_trace, write_jsonl
from tests.unit.test_traces import NOW


def exact(values, level):
    return mean_interval(values, confidence=level, binary=True)


@pytest.mark.parametrize(
    ("counts", "size", "allocation", "expected"),
    [
        ({"a": 90, "b": 10}, 20, "proportional", {"a": 18, "b": 2}),
        ({"a": 99, "b": 1}, 10, "proportional", {"a": 9, "b": 1}),
        ({"a": 98, "b": 2}, 10, "proportional", {"a": 8, "b": 2}),  # two, so its mean has a spread
        ({"a": 100, "b": 5}, 20, "equal", {"a": 15, "b": 5}),  # what b cannot take goes to a
        ({"a": 50, "b": 50, "c": 50}, 10, "equal", {"a": 4, "b": 3, "c": 3}),
        ({"a": 3, "b": 4}, 10, "equal", {"a": 3, "b": 4}),  # no more than there are: all
        ({"a": 10, "b": 0}, 4, "equal", {"a": 4, "b": 0}),
    ],
)
def test_the_sample_is_shared_between_strata(counts, size, allocation, expected):
    sizes = allocate(counts, size, allocation)
    assert sizes == expected and sum(sizes.values()) == min(size, sum(counts.values()))


def test_a_sample_smaller_than_its_strata_is_refused(tmp_path):
    with pytest.raises(ValueError, match="smaller than the 3 strata"):
        allocate({"a": 5, "b": 5, "c": 5}, 2, "equal")
    spans = [
        s
        for n, tag in ((1, "vip"), (2, "free"), (3, "free"))
        for s in rag_trace(n, "q?", "a", [], tags=[tag])
    ]
    write_jsonl(tmp_path / "t.jsonl", [spans])
    with pytest.raises(EvalCaseError, match=r"eval_cases.traces: sample_size 1 is smaller than the 2 strata"):
        load_trace_cases(TracesConfig(path=str(tmp_path / "t.jsonl"), sample_size=1, strata=["vip"]), now=NOW)


def test_traces_are_sampled_within_their_strata_with_known_probabilities():
    spans = [
        s
        for n in range(1, 41)
        for s in rag_trace(
            n,
            f"q{n}",
            f"a{n}",
            [("kb/a.md", "Alpha.", 0.9)],
            start_ns=NOON_NS - n * 60 * 10**9,
            tags=["vip", "prod"] if n <= 4 else ["prod"],
        )
    ]
    config = TracesConfig(path="t.json", sample_size=10, strata=["vip"], allocation="equal")
    cases, reading = trace_cases(
        read_span_file(json.dumps(export(spans)).encode(), "t.json"), config, "t", NOW
    )
    by_stratum = {}
    for case in cases:
        by_stratum.setdefault(case["logged"]["stratum"], []).append(case["logged"]["inclusion_probability"])
    assert {name: len(found) for name, found in by_stratum.items()} == {"vip": 4, "other": 6}
    assert set(by_stratum["vip"]) == {1.0} and set(by_stratum["other"]) == {6 / 36}
    assert reading.weighted and reading.shares() == {"vip": 4 / 40, "other": 36 / 40}
    assert reading.stratum_of == {case["id"]: case["logged"]["stratum"] for case in cases}
    assert (
        "vip 4 of 4 (inclusion probability 1), other 6 of 36 (inclusion probability 0.167)"
        in reading.summary()
    )
    assert "weighted by its share of the window" in reading.summary()
    with pytest.raises(ValueError, match="needs a sample_size"):
        TracesConfig(path="t.json", strata=["vip"])
    with pytest.raises(ValueError, match="distinct tags"):
        TracesConfig(path="t.json", sample_size=3, strata=["vip", "other"])
    _, even = trace_cases(
        read_span_file(json.dumps(export(spans)).encode(), "t.json"),
        TracesConfig(path="t.json", sample_size=20, strata=["vip"], allocation="proportional", since="48h"),
        "t",
        NOW,
    )
    assert [(s.name, s.sampled, s.usable) for s in even.strata] == [("vip", 2, 4), ("other", 18, 36)]
    assert not even.weighted  # 1 in 2 of each: the plain mean is the weighted one


def test_the_weighted_mean_weights_strata_by_their_share_and_a_census_is_exact():
    values = {"rare": [1.0] * 10, "common": [0.0, 1.0] * 5}
    shares = {"rare": 0.1, "common": 0.9}
    found = stratified_mean(values, shares, set(), exact, 0.95, (0.0, 1.0))
    assert found.mean == pytest.approx(0.1 * 1.0 + 0.9 * 0.5) and found.method == "stratified"
    assert found.low < found.mean < found.high
    census = stratified_mean(values, shares, {"rare"}, exact, 0.95, (0.0, 1.0))
    assert census.high - census.low < found.high - found.low  # the rare stratum is known: only common varies
    one = stratified_mean({"rare": [1.0], "common": [0.0, 1.0] * 5}, shares, set(), exact, 0.95, (0.0, 1.0))
    common = exact([0.0, 1.0] * 5, 0.975)  # two strata with intervals: each at 1 - 0.05 / 2
    assert one.low == pytest.approx(0.9 * common.low) and one.high == pytest.approx(0.1 + 0.9 * common.high)
    unbounded = stratified_mean({"rare": [1.0], "common": [0.0, 1.0] * 5}, shares, set(), exact, 0.95, None)
    assert unbounded.too_few
    assert stratified_mean({"rare": [float("nan")]}, shares, set(), exact, 0.95, None) is None


def test_the_weighted_interval_covers_the_population_mean_at_its_level():
    """Two strata of 0/1 outcomes sampled at very different rates: over 400 draws the interval holds the
    population's mean at least 95 % of the time (it is conservative by construction)."""
    rng = np.random.default_rng(7)
    rare, common = rng.random(60) < 0.9, rng.random(940) < 0.4
    truth = (rare.sum() + common.sum()) / 1000
    shares = {"rare": 0.06, "common": 0.94}
    covered = 0
    for _ in range(400):
        values = {
            "rare": rng.choice(rare, 15, replace=False).astype(float).tolist(),
            "common": rng.choice(common, 15, replace=False).astype(float).tolist(),
        }
        found = stratified_mean(values, shares, set(), exact, 0.95, (0.0, 1.0))
        covered += found.low <= truth <= found.high
    assert covered / 400 >= 0.95


def test_a_change_of_mix_between_nights_is_no_regression_but_a_drop_within_a_stratum_is():
    rng = np.random.default_rng(3)
    hard_before, easy_before = rng.normal(2.0, 0.5, 10), rng.normal(4.5, 0.5, 30)
    hard_now, easy_now = rng.normal(2.0, 0.5, 30), rng.normal(4.5, 0.5, 10)  # more hard questions tonight
    before, now = {"hard": hard_before, "easy": easy_before}, {"hard": hard_now, "easy": easy_now}
    plain = two_sample_p_value(
        np.concatenate([hard_before, easy_before]), np.concatenate([hard_now, easy_now])
    )
    assert plain < 0.01  # the plain means moved with the mix
    assert stratified_p_value(before, now) > 0.2
    dropped = {"hard": hard_now, "easy": easy_now - 1.0}
    assert stratified_p_value(before, dropped) < 0.01
    assert stratified_p_value({"a": [1.0, 1.0]}, {"a": [1.0, 1.0]}) == 1.0
    assert stratified_p_value({"a": [1.0]}, {"b": [0.0]}) == 1.0


def test_label_corrected_strata_are_weighted_like_the_means_and_a_stratum_without_labels_spans_the_range():
    rng = np.random.default_rng(11)
    shares = {"rare": 0.1, "common": 0.9}
    judge = {"rare": rng.integers(3, 6, 30).astype(float), "common": rng.integers(1, 6, 60).astype(float)}
    person = {name: np.clip(scores - 1, 1, 5) for name, scores in judge.items()}  # the judge flatters by 1
    level = 1 - 0.05 / 2

    def corrected(name, labelled):
        labels = np.where(np.arange(judge[name].size) < labelled, person[name], np.nan)
        return ppi_mean(judge[name], labels, confidence=level, min_labels=3, bounds=(1, 5), step=1)

    parts = {"rare": corrected("rare", 12), "common": corrected("common", 20)}
    both = stratified_estimate(parts, shares, (1.0, 5.0), 0.95)
    assert both.estimate == pytest.approx(0.1 * parts["rare"].estimate + 0.9 * parts["common"].estimate)
    assert both.low == pytest.approx(0.1 * parts["rare"].low + 0.9 * parts["common"].low)
    assert both.labels == 32 and both.answers == 90 and both.weighted and both.confidence == 0.95
    labels_alone = 0.1 * parts["rare"].labels_mean + 0.9 * parts["common"].labels_mean
    assert both.labels_mean == pytest.approx(labels_alone)
    truth = 0.1 * person["rare"].mean() + 0.9 * person["common"].mean()
    assert both.low <= truth <= both.high
    unlabelled = {"rare": corrected("rare", 1), "common": parts["common"]}  # one label: no interval
    wide = stratified_estimate(unlabelled, shares, (1.0, 5.0), 0.95)
    assert wide.low == pytest.approx(0.1 * 1.0 + 0.9 * parts["common"].low)
    assert wide.high == pytest.approx(0.1 * 5.0 + 0.9 * parts["common"].high)
    assert wide.estimate == pytest.approx(0.1 * judge["rare"].mean() + 0.9 * parts["common"].estimate)
    none = stratified_estimate(unlabelled, shares, None, 0.95)
    assert none.estimate is None and none.why_no_interval.startswith("stratum rare: 1 label(s)")
