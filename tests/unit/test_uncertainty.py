"""A run's verdicts in plain words: identical cells are not a runner-up, ties and wins are named."""

from ragbench.analysis.uncertainty import compare_cells, with_intervals
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig

MRR = MetricInfo(column="mrr", label="MRR", higher_is_better=True)
CASES = [f"q{i}" for i in range(20)]


def values(*hits: float) -> dict:
    return {"mrr": dict(zip(CASES, hits, strict=True))}


def verdict(**cells: dict):
    (found,) = compare_cells([MRR], cells, StatisticsConfig(resamples=999))
    return found


def test_a_cell_identical_to_the_best_is_not_the_runner_up():
    best = [1.0] * 20
    close = [1.0] * 19 + [0.0]  # one case worse: tied, and the runner-up
    found = verdict(rerank_on=values(*best), rerank_off=values(*best), other=values(*close))
    assert found.best == "rerank_off" and found.runner_up == "other"  # equal means: the first label
    assert found.tied == ["rerank_off", "other", "rerank_on"]
    sentence = found.sentence()
    assert sentence.startswith("MRR: rerank_off = rerank_on (same values on every case) tied with")
    assert "tied with 1 other cell(s) (other) on 20 case(s)" in sentence


def test_every_cell_the_same_and_a_clear_winner_are_said_as_such():
    same = verdict(a=values(*[1.0] * 20), b=values(*[1.0] * 20))
    assert (
        same.runner_up is None
        and same.sentence() == "MRR: a and 1 other cell(s) score the same on all 20 case(s)."
    )
    clear = verdict(good=values(*[1.0] * 20), bad=values(*[0.0] * 16 + [1.0] * 4))
    assert clear.sentence().startswith("MRR: good is better than every other cell (runner-up bad: -0.8")


def test_intervals_sit_beside_every_column_with_per_case_values():
    settings = StatisticsConfig(resamples=999)
    mrr = MetricInfo(column="mrr", label="MRR", higher_is_better=True, bounds=(0.0, 1.0))
    row = with_intervals({"mrr": 0.5}, values(*[0.0, 1.0] * 10), settings, {"mrr": mrr})
    assert row["mrr_low"] < 0.5 < row["mrr_high"]
    few = with_intervals(
        {"mrr": 0.5}, {"mrr": {"a": 0.0, "b": 1.0}}, settings, {"mrr": mrr}
    )  # two cases: none, said so
    assert "mrr_low" not in few and few["mrr_cases"] == 2


def test_a_long_tie_set_is_counted_in_the_sentence_and_listed_on_the_verdict():
    few = {f"c{i}": values(*([1.0] * (20 - i) + [0.0] * i)) for i in range(4)}
    few["c9"] = values(*([1.0] * 10 + [0.0] * 10))  # ten cases worse: told apart, even after Holm
    found = verdict(**few)
    assert found.tied == ["c0", "c1", "c2", "c3"]
    assert "tied with 3 other cell(s) (c1, c2, c3) on 20 case(s)" in found.sentence()
    many = verdict(**{f"c{i}": values(*([1.0] * (20 - i) + [0.0] * i)) for i in range(5)})
    assert len(many.tied) == 5 and "tied with 4 other cell(s) (listed in the report)" in many.sentence()


def test_the_verdict_says_what_its_comparison_could_detect_and_whether_it_detects_the_named_difference():
    close = [1.0] * 17 + [0.0] * 3
    best = [1.0] * 20
    (found,) = compare_cells(
        [MRR], {"a": values(*best), "b": values(*close)}, StatisticsConfig(resamples=999, detect=0.5)
    )
    planned = found.plan
    assert planned is not None and planned.binary and planned.cases == 20 and planned.comparisons == 1
    assert planned.detectable is not None and planned.can_detect  # 0.5 of 20 hits is a large difference
    assert found.sentence().endswith(f"Planned from the top two's differences: {planned.text()}.")
    assert "a difference of 0.5 needs about" in found.sentence()
    small = compare_cells([MRR], {"a": values(*best), "b": values(*close)}, StatisticsConfig(resamples=999))
    assert small[0].plan.detect is None and "needs" not in small[0].plan.text()
