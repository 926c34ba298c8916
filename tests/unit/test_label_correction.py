"""Prediction-powered estimates (ragbench.stats.ppi), the review queue's sample plans
(ragbench.review.sampling) and a run's corrected metrics and verdicts (ragbench.analysis.labelled), on small
data made here. The reference-code conformance is tests/system/test_ppi_conformance.py; coverage by
simulation is bench/bench_ppi.py."""

import math

import numpy as np
import pytest

from ragbench.analysis.label_verdicts import corrected_comparisons, corrected_verdicts, paired_labels
from ragbench.analysis.labelled import CorrectedMetric, LabelCorrection
from ragbench.analysis.planning import labels_needed
from ragbench.review.labels import Label, LabelFileError, ReviewLabels, SampleDraw, check_labels, text_sha
from ragbench.review.queue import ReviewItem
from ragbench.review.sampling import (
    FLOOR,
    SamplePlan,
    case_draw,
    case_weights,
    drawn_sample,
    sample_order,
    sample_progress_sentence,
)
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import JudgeInput, select_rubrics
from ragbench.stats.inference import StatisticsConfig
from ragbench.stats.ppi import judge_ceiling, labels_for_width, ppi_mean, ppi_weighted


def scores(seed: int, n: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """True 0-1 labels of 1-5 scores and a judge's noisy copy of them."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n).astype(float)
    judge = np.clip(np.round(truth + rng.normal(0, noise, n)), 1, 5)
    return (truth - 1) / 4, (judge - 1) / 4


def test_a_good_judge_narrows_the_interval_and_a_useless_one_does_not_widen_it():
    truth, good = scores(0, 500, 0.5)
    rng = np.random.default_rng(1)
    labelled = np.full(500, np.nan)
    picked = rng.choice(500, 40, replace=False)
    labelled[picked] = truth[picked]
    estimate = ppi_mean(good, labelled)
    assert estimate.labels == 40 and estimate.answers == 500
    assert estimate.high - estimate.low < 0.7 * (estimate.labels_high - estimate.labels_low)
    assert estimate.effective_labels > 40 / 0.7**2
    assert estimate.low <= truth.mean() <= estimate.high
    useless = rng.random(500)  # scores unrelated to the truth: the tuned weight drops it
    alone = ppi_mean(useless, labelled)
    assert alone.judge_weight < 0.2
    assert alone.high - alone.low <= (alone.labels_high - alone.labels_low) * 1.02


def test_too_few_labels_give_no_interval_and_say_why():
    truth, judge = scores(2, 50, 0.5)
    labelled = np.where(np.arange(50) < 6, truth, np.nan)
    estimate = ppi_mean(judge, labelled, min_labels=10)
    assert estimate.estimate is None and estimate.low is None
    assert estimate.why_no_interval == "6 label(s): at least 10 are needed for an interval"
    assert estimate.text() == estimate.why_no_interval
    assert labels_for_width(estimate, 0.1) is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="equally long"):
        ppi_mean([0.5, 0.5], [0.5])
    with pytest.raises(ValueError, match="judge's score"):
        ppi_mean([math.nan, 0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="inclusion probabilities"):
        ppi_mean([0.5] * 12, [0.5] * 12, [0.0] * 12)


def test_weighted_labels_are_unbiased_and_cover():
    """Labels drawn with unequal probabilities, weighted by their inverse: the estimate centres on the
    truth and its 95% interval covers it about as often as it says (400 draws, seeded)."""
    truth, judge = scores(3, 400, 0.8)
    probability = np.where(np.abs(judge - 0.5) < 0.3, 0.2, 0.06)  # mid-scale answers drawn more often
    rng = np.random.default_rng(4)
    estimates, covered = [], 0
    for _ in range(400):
        drawn = rng.random(400) < probability
        estimate = ppi_mean(judge, np.where(drawn, truth, np.nan), probability)
        estimates.append(estimate.estimate)
        covered += estimate.low <= truth.mean() <= estimate.high
    assert abs(np.mean(estimates) - truth.mean()) < 0.01
    assert covered / 400 > 0.92


def test_planning_figures():
    truth, judge = scores(5, 300, 0.5)
    labelled = np.where(np.arange(300) < 30, truth, np.nan)
    estimate = ppi_mean(judge, labelled)
    width = estimate.high - estimate.low
    assert labels_for_width(estimate, width / 2) == pytest.approx(120, abs=2)  # half the width: 4x labels
    assert labels_for_width(estimate, width * 2) == 30  # never fewer than given
    rho = np.corrcoef(judge[:30], truth[:30])[0, 1]
    assert judge_ceiling(judge[:30], truth[:30]) == pytest.approx(1 / (1 - rho**2))
    assert judge_ceiling([0.5] * 5, truth[:5]) is None


def item(case: str, answer: str, verdict: int, samples: list[int] | None = None) -> ReviewItem:
    return ReviewItem(
        rubric="correctness",
        criterion="correctness",
        criterion_label="correctness",
        scale="1-5",
        input=JudgeInput(case_id=case, question=f"q {case}", answer=answer),
        verdicts={"judge": verdict},
        samples={"judge": samples or [verdict]},
    )


def test_a_sample_plan_asks_a_cases_answers_together_and_its_prefix_is_a_poisson_sample():
    items = [item(f"c{k}", f"answer {k} {cell}", 5 if k % 2 else 3) for k in range(30) for cell in "ab"]
    plan = SamplePlan(weighting="uniform", seed=7)
    queue = sample_order(items, plan)
    cases = [i.input.case_id for i in queue]
    assert all(cases[2 * k] == cases[2 * k + 1] for k in range(30))  # both cells' answers together
    order = list(dict.fromkeys(cases))
    assert order == sorted(order, key=lambda case: case_draw(7, case))  # uniform: by the draw alone
    weights = case_weights(items, "uniform")
    sample = drawn_sample(weights, order[:10], plan)
    threshold = case_draw(7, order[10])
    assert sample.probabilities == {case: pytest.approx(threshold) for case in order[:10]}
    assert sample.uniform and not sample.census and sample.left_out == []
    gap = drawn_sample(weights, order[:5] + order[6:12], plan)  # the sixth case skipped
    assert list(gap.probabilities) == order[:5] and gap.left_out == sorted(order[6:12])
    assert drawn_sample(weights, order, plan).census


def test_uncertain_weights_favour_mid_scale_and_spread_verdicts_and_keep_a_floor():
    items = [item("sure", "x", 5), item("middle", "y", 3), item("spread", "z", 5, [5, 1, 5])]
    weights = case_weights(items, "uncertain")
    assert weights["sure"] == pytest.approx(FLOOR)
    assert weights["middle"] == pytest.approx(1.0) and weights["spread"] == pytest.approx(1.0)
    plan = SamplePlan(weighting="uncertain", seed=0)
    assert SamplePlan.parse(plan.name) == plan
    with pytest.raises(ValueError, match="WEIGHTING:SEED"):
        SamplePlan.parse("often:1")


def label(case: str, answer: str, value: int, scale: str = "1-5", sample: SampleDraw | None = None) -> Label:
    return Label(
        case_id=case,
        answer_sha=text_sha(answer),
        rubric="correctness",
        criterion="correctness",
        scale=scale,
        value=value if scale == "1-5" else min(value, 1),
        item=JudgeInput(case_id=case, question="q", answer=answer),
        sample=sample,
    )


def test_labels_of_another_scale_or_eval_set_fail_before_any_work():
    rubrics = select_rubrics(["correctness"], [])
    good = ReviewLabels(labels=[label("c1", "a", 4)])
    check_labels(good, rubrics, {"c1"}, "labels.jsonl")
    with pytest.raises(
        LabelFileError,
        match="scale pass_fail of correctness/correctness is not the rubric's, which grades it 1-5",
    ):
        check_labels(ReviewLabels(labels=[label("c1", "a", 1, "pass_fail")]), rubrics, {"c1"}, "x")
    with pytest.raises(LabelFileError, match="another eval set"):
        check_labels(good, rubrics, {"other"}, "labels.jsonl")


def corrected_metric(truth_a, truth_b, judge_a, judge_b, sampled: list[int]) -> tuple[CorrectedMetric, dict]:
    cases = [f"c{k}" for k in range(len(truth_a))]
    judge = {"a": dict(zip(cases, judge_a, strict=True)), "b": dict(zip(cases, judge_b, strict=True))}
    estimates = {
        cell: ppi_mean(
            list(judge[cell].values()), [t if k in sampled else math.nan for k, t in enumerate(truth)]
        )
        for cell, truth in (("a", truth_a), ("b", truth_b))
    }
    metric = CorrectedMetric(
        column="correctness_0to1",
        label="correctness (0-1)",
        rubric="correctness",
        criterion="correctness",
        higher_is_better=True,
        plan="uniform:0",
        weighted=False,
        sampled_cases=len(sampled),
        cases=len(cases),
        estimates=estimates,
        label_values={
            "a": {cases[k]: truth_a[k] for k in sampled},
            "b": {cases[k]: truth_b[k] for k in sampled},
        },
    )
    return metric, judge


def test_corrected_comparison_catches_a_judge_that_flatters_one_cell():
    rng = np.random.default_rng(8)
    right_a, right_b = rng.random(300) < 0.72, rng.random(300) < 0.5
    truth_a, truth_b = right_a.astype(float), right_b.astype(float)
    judge_a, judge_b = truth_a, np.where(right_b, 1.0, 0.5)  # b's wrong answers scored 2 points too high
    assert judge_b.mean() > judge_a.mean()  # the judge alone picks b
    sampled = sorted(rng.choice(300, 60, replace=False).tolist())
    metric, judge = corrected_metric(truth_a, truth_b, judge_a, judge_b, sampled)
    settings = StatisticsConfig()
    found = corrected_comparisons(metric, judge, min_labels=10, settings=settings)
    assert found is not None
    (comparison,), (alone,) = found.comparisons, found.labels_alone
    assert found.best == "a" and comparison.candidate == "b" and comparison.verdict == "worse"
    assert comparison.adjusted_high < 0 and comparison.test == "prediction_powered"
    assert found.differences["b"].labels == 60
    # the labels alone's own comparison beside it: never narrower than the one the verdict uses
    assert alone.test == "labels_alone" and alone.candidate == "b"
    assert alone.high - alone.low >= comparison.high - comparison.low
    assert corrected_comparisons(metric, judge, min_labels=61, settings=settings) is None  # too few: none


@pytest.mark.parametrize("shaped", [False, True])
def test_corrected_verdicts_never_contradict_their_intervals(shaped: bool):
    """Over random paired data and families of cells, tied exactly when the Holm-level interval holds 0,
    for plain t intervals and for score intervals shaped by a 0-1 pass rate's range and step; and the
    labels alone's comparisons beside them the same."""
    rng = np.random.default_rng(9)
    settings = StatisticsConfig()
    for _ in range(40):
        n, cells = int(rng.integers(30, 120)), int(rng.integers(2, 5))
        truth = {f"cell{c}": (rng.random(n) < rng.uniform(0.3, 0.9)).astype(float) for c in range(cells)}
        judge = {c: np.clip(t + rng.normal(0, rng.uniform(0.1, 0.6), n), 0, 1) for c, t in truth.items()}
        sampled = sorted(rng.choice(n, int(rng.integers(12, n)), replace=False).tolist())
        cases = [f"c{k}" for k in range(n)]
        estimates = {
            c: ppi_mean(judge[c], [truth[c][k] if k in sampled else math.nan for k in range(n)])
            for c in truth
        }
        metric = CorrectedMetric(
            column="m",
            label="m",
            rubric="r",
            criterion="m",
            higher_is_better=True,
            plan="uniform:0",
            weighted=False,
            sampled_cases=len(sampled),
            cases=n,
            estimates=estimates,
            label_values={c: {cases[k]: truth[c][k] for k in sampled} for c in truth},
            value_range=(0.0, 1.0) if shaped else None,
            value_step=1.0 if shaped else None,
        )
        values = {c: dict(zip(cases, judge[c].tolist(), strict=True)) for c in judge}
        found = corrected_comparisons(metric, values, min_labels=10, settings=settings)
        assert found is not None
        for c in found.comparisons + found.labels_alone:
            assert (c.verdict == "tied") == (c.adjusted_low <= 0 <= c.adjusted_high), c


def test_a_label_given_in_a_sample_order_keeps_its_draw_and_the_page_plans(tmp_path):
    import json
    import urllib.request

    from ragbench.review.labels import LabelStore, load_labels_file
    from ragbench.review.server import ReviewServer, ReviewSession

    items = [item(f"c{k}", f"answer {k} {cell}", 5 if k % 3 else 2) for k in range(24) for cell in "ab"]
    store = LabelStore(tmp_path / "labels.jsonl")
    session = ReviewSession(items, store, title="t", seed=3, target_width=0.3)
    queue = session.state("sample_uncertain")["items"]
    first_case = queue[0]["key"].split("|")[0]
    assert queue[1]["key"].split("|")[0] == first_case  # the case's other answer next
    server = ReviewServer(session, port=0)
    server.start()
    try:

        def post(body: dict) -> tuple[int, dict]:
            request = urllib.request.Request(
                server.url + "api/label", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as reply:
                    return reply.status, json.load(reply)
            except urllib.error.HTTPError as error:
                return error.code, json.load(error)

        status, revealed = post({"key": queue[0]["key"], "value": 4, "order": "sample_uncertain"})
        assert status == 200 and revealed["progress"][0]["sampled_cases"] == 0  # one answer of two
        status, revealed = post({"key": queue[1]["key"], "value": 4, "order": "sample_uncertain"})
        assert revealed["progress"][0]["sampled_cases"] == 1
        assert "at least 10" in revealed["progress"][0]["estimate"]  # too few for an interval: said
        assert post({"key": queue[2]["key"], "value": 4, "order": "disagreement"})[0] == 200
        assert post({"key": queue[3]["key"], "value": 4, "order": 3})[0] == 400
        assert post({"key": queue[3]["key"], "value": 4, "order": "often"})[0] == 400
    finally:
        server.shutdown()
        server.server_close()
    labels = {label.case_id + label.answer_sha: label for label in load_labels_file(store.path).current()}
    drawn = [label for label in labels.values() if label.sample is not None]
    assert len(drawn) == 2 and {label.case_id for label in drawn} == {first_case}
    assert drawn[0].sample.plan == "uncertain:3" and drawn[0].sample.draw == case_draw(3, first_case)
    assert len(labels) == 3  # the disagreement-order label is kept, without a draw


def run_of(cases: int) -> tuple[list, list, dict, dict]:
    """A two-cell run's records, cases, judges and per-case judge values: cell b's answers to odd cases
    are wrong and scored 3 by the judge; cell a is right everywhere and scored 5."""
    from ragbench.analysis.results import CaseRecord
    from ragbench.generation.reader import ReaderAnswer
    from ragbench.inputs.eval_cases import EvalCase
    from ragbench.scoring.apply import Judgement

    eval_cases = [EvalCase(id=f"c{k:02d}", question=f"q{k}", reference_answer="r") for k in range(cases)]
    records, values = [], {"a": {}, "b": {}}
    for case in eval_cases:
        for cell in "ab":
            wrong = cell == "b" and int(case.id[1:]) % 2
            answer = f"{cell} {'wrong' if wrong else 'right'} {case.id}"
            score = 3 if wrong else 5
            records.append(
                CaseRecord(
                    cell=cell,
                    case_id=case.id,
                    question=case.question,
                    answer=ReaderAnswer(case_id=case.id, question=case.question, answer=answer),
                    reranker="off",
                    keyword_failures=[],
                    judgement=Judgement(case_id=case.id, scores={"correctness": score}),
                )
            )
            values[cell][case.id] = (score - 1) / 4
    return (
        records,
        eval_cases,
        {"a": "judge", "b": "judge"},
        {c: {"correctness_0to1": v} for c, v in values.items()},
    )


def test_a_runs_correction_uses_only_its_own_sample_and_says_what_it_left_out(tmp_path):
    from ragbench.analysis.labelled import correct_with_labels
    from ragbench.review.labels import LabelStore
    from ragbench.review.queue import answer_items
    from ragbench.review.server import ReviewSession
    from ragbench.scoring.registry import LabelCorrectionConfig

    records, cases, judges, values = run_of(30)
    rubric = select_rubrics(["correctness"], [])[0]
    items = answer_items(records, cases, judges, rubric)
    store = LabelStore(tmp_path / "labels.jsonl")
    session = ReviewSession(items, store, title="t", seed=0)
    queue = session.state("sample")["items"]
    for shown in queue[:24]:  # 12 cases, both cells' answers
        session.label(shown["key"], 1 if "wrong" in shown["answer"] else 5, order="sample")
    for shown in queue[30:32]:  # a whole case past a gap: left out
        session.label(shown["key"], 1 if "wrong" in shown["answer"] else 5, order="sample")
    session.label(queue[34]["key"], 5, order="sample")  # one answer of a case: left out
    session.label(queue[26]["key"], 5, order="disagreement")  # not a sample
    stranger = label(
        "c00", "an answer this run never gave", 5, sample=SampleDraw(plan="uniform:0", weight=1, draw=0.5)
    )
    last = queue[-1]  # a case no label of the plan reaches, labelled in another plan
    other_plan = label(
        last["key"].split("|")[0], last["answer"], 5, sample=SampleDraw(plan="uniform:9", weight=1, draw=0.5)
    )
    labels = ReviewLabels(labels=[*store.labels.labels, stranger, other_plan])
    correction = correct_with_labels(
        labels,
        records=records,
        cases=cases,
        judge_of_cell=judges,
        rubrics=[rubric],
        judge_values=values,
        config=LabelCorrectionConfig(),
        confidence=0.95,
    )
    (metric,) = correction.metrics
    assert metric.sampled_cases == 12 and metric.cases == 30 and not metric.weighted
    assert metric.plan == "uniform:0"
    assert any(
        "1 label(s) of correctness (0-1) were given in a non-random order" in n for n in correction.notes
    ), correction.notes
    left_out = " | ".join(metric.left_out)
    assert "another sample plan (uniform:9)" in left_out
    assert "1 label(s) of answers this run does not contain" in left_out
    assert "1 labelled case(s) after the first unlabelled case" in left_out
    assert "1 case(s) with some but not all of their answers labelled" in left_out
    a, b = metric.estimates["a"], metric.estimates["b"]
    # right on every labelled case: no spread in the labels, but the scale's step says how little twelve
    # 1-5 labels could vary, so the interval is honest, not a point
    assert a.estimate == 1.0 and a.labels == 12 and not a.judge_used
    assert 0.85 < a.low < 0.97 and a.high == 1.0
    assert b.judge_mean == pytest.approx(0.75) and b.estimate < 0.65  # b's flattered wrong answers
    assert correction.columns("b")["correctness_0to1_corrected"] == round(b.estimate, 4)


def test_bounded_values_give_a_score_interval_inside_their_range():
    """Near the top of a 0-1 scale a t interval reaches past 1 and is symmetric; the mean cannot pass 1, and
    labels piled at the top spread less than they would near the middle, so with the range the interval is
    a score interval (`Inference`): inside the range, leaning towards the middle, never narrower than the t
    interval below the estimate. The planning figure reads the width of the interval used."""
    judge = np.array([1.0] * 90 + [0.75] * 10)
    person = np.full(100, np.nan)
    person[:12] = [1.0] * 10 + [0.5, 0.75]
    shaped = ppi_mean(judge, person, bounds=(0.0, 1.0))
    plain = ppi_mean(judge, person)
    assert plain.high > 1.0 and shaped.high < 1.0
    assert shaped.low < plain.low and shaped.estimate - shaped.low > shaped.high - shaped.estimate
    assert shaped.labels_high <= 1.0 < plain.labels_high
    assert labels_for_width(shaped, 0.05) > 12 and labels_for_width(plain, 0.05) > 12


def test_labels_piled_at_the_bottom_of_the_scale_still_give_an_interval():
    """Twelve labels at the bottom of a 1-5 scale (0 on 0-1): no spread at all, but values on the scale's
    steps with a mean above 0 must vary at least as much as values on 0 and 0.25 do, so the interval is
    Wilson's for the first step: from 0 to about 0.06, not a point, and its test of 0 never rejects."""
    person = np.full(60, np.nan)
    person[:12] = 0.0
    estimate = ppi_mean(np.full(60, 0.25), person, bounds=(0.0, 1.0), step=0.25)
    assert estimate.estimate == 0.0 and estimate.low == 0.0 and 0.04 < estimate.high < 0.1
    assert not estimate.judge_used and "labels alone" in estimate.judge_note
    assert ppi_mean(np.full(60, 0.25), person, bounds=(0.0, 1.0)).estimate is None  # no step: no floor


def test_the_estimate_used_is_never_wider_than_the_labels_alone():
    """A judge unrelated to the labels, a dozen labels: PPI++'s tuned interval (t with n - 2, lam's own
    noise) comes out wider than the labels alone's, so the labels alone are used and named; a judge that
    agrees narrows it and is used."""
    for seed in range(30):
        rng = np.random.default_rng(seed)
        truth = rng.integers(1, 6, 80).astype(float)
        person = np.where(np.arange(80) < 12, (truth - 1) / 4, np.nan)
        noise = (rng.integers(1, 6, 80) - 1) / 4
        for judge in (noise, (truth - 1) / 4 * 0.9 + 0.05):
            e = ppi_mean(judge, person, bounds=(0.0, 1.0), step=0.25)
            assert e.high - e.low <= e.labels_high - e.labels_low + 1e-12
            fit = e.corrected_fit
            assert fit is not None
            low, high = fit.interval_at(1 - e.confidence)
            assert e.judge_used == (min(high, 1.0) - max(low, 0.0) < e.labels_high - e.labels_low)
            if not e.judge_used:
                assert e.estimate == e.labels_mean and e.text().endswith("(labels alone, 12)")
    agreeing = ppi_mean((truth - 1) / 4, person, bounds=(0.0, 1.0), step=0.25)
    assert agreeing.judge_used and agreeing.effective_labels > 12


def test_a_score_interval_and_its_test_are_one_statistic():
    """At every level the interval excludes a value exactly when the test of that value rejects at it."""
    rng = np.random.default_rng(5)
    person = np.where(np.arange(40) < 15, rng.choice([0.0, 0.0, 0.25, 0.5], 40), np.nan)
    estimate = ppi_mean(rng.random(40), person, bounds=(0.0, 1.0), step=0.25)
    used = estimate.used
    assert used is not None
    for level in (0.01, 0.05, 0.2):
        low, high = used.interval_at(level)
        for value in np.linspace(0.0, 0.6, 61):
            if abs(value - low) > 1e-6 and abs(value - high) > 1e-6:
                assert (low <= value <= high) == (used.p_value(value) >= level), (level, value)


def test_a_weighted_sample_counts_the_answers_its_two_parts_share():
    """The weighted form takes the judge's mean over every answer, labelled ones included, so the judge's
    part and the labels' correction share those answers: their covariance is in the standard error (without
    it, simulated 95 % intervals covered about 92.5 %). With equal weights it is zero only if lam is exactly
    the least-squares slope, which the tuned lam (shrunk by 1 + n/N) is not."""
    truth, judge = scores(6, 200, 0.5)
    labelled = np.where(np.arange(200) < 60, truth, np.nan)
    weighted = ppi_mean(judge, labelled, np.full(200, 0.3))
    assert weighted.judge_weight is not None and 0 < weighted.judge_weight < 1
    parts = ppi_weighted(judge, labelled, ~np.isnan(labelled), np.full(200, 0.3), None)
    assert parts.shared_variance > 0
    assert weighted.standard_error**2 > parts.imputed_variance + parts.rectifier_variance


def test_a_corrected_verdict_says_how_many_labels_the_named_difference_needs():
    rng = np.random.default_rng(8)
    right_a, right_b = rng.random(300) < 0.72, rng.random(300) < 0.66
    truth_a, truth_b = right_a.astype(float), right_b.astype(float)
    judge_a, judge_b = (np.clip(t + rng.normal(0, 0.3, 300), 0, 1) for t in (truth_a, truth_b))
    sampled = sorted(rng.choice(300, 40, replace=False).tolist())
    metric, judge = corrected_metric(truth_a, truth_b, judge_a, judge_b, sampled)
    correction = LabelCorrection(metrics=[metric])
    headline = [MetricInfo(column=metric.column, label=metric.label, higher_is_better=True)]
    values = {cell: {metric.column: by_case} for cell, by_case in judge.items()}

    def verdict(detect: float | None, weighted: bool = False):
        settings = StatisticsConfig(detect=detect)
        given = (
            LabelCorrection(metrics=[metric.model_copy(update={"weighted": weighted})])
            if weighted
            else correction
        )
        found, _ = corrected_verdicts(given, headline, values, {}, min_labels=10, settings=settings)
        return found[metric.column]

    large = verdict(0.25)
    _, judge_differences, person = paired_labels(metric, judge, "a", "b")
    assert large.labels_to_detect == labels_needed(judge_differences, person, answers=300, difference=0.25)
    assert 10 <= large.labels_to_detect < 300
    assert (
        f"About {large.labels_to_detect} labelled cases in all (a simple random sample)" in large.sentence()
    )
    assert "Even labelling every case would not detect a difference of 0.001" in verdict(0.001).sentence()
    assert "not planned for a weighted" in verdict(0.25, weighted=True).sentence()
    assert (
        verdict(None).labels_to_detect is None
        and "labelled cases in all (a simple" not in verdict(None).sentence()
    )


def test_a_small_run_whose_labels_alone_detect_a_difference_is_not_reported_tied():
    """A replay of what a new user met: 24 cases, two readers, a judge that agrees poorly, 20 cases
    labelled. The labels alone tell the readers apart (p < 0.05); PPI++ with its weight tuned on the same
    20 labels came out tied. Now each difference is the narrower of the two, so the verdict is not tied,
    and the sentence the terminal and the report print shows the labels alone's comparison beside it and
    names the procedure that decided."""
    rng = np.random.default_rng(12)
    better = rng.choice([1, 2, 3, 4], 24)  # 1-5 labels of reader a
    worse = np.clip(better - rng.choice([0, 0, 0, 1, 2], 24), 1, 5)  # reader b: now and then worse
    truth_a, truth_b = (better - 1) / 4, (worse - 1) / 4
    judge_a, judge_b = ((rng.choice([1, 3, 4, 4, 5], 24) - 1) / 4 for _ in range(2))  # blind to both
    sampled = list(range(20))
    metric, judge = corrected_metric(truth_a, truth_b, judge_a, judge_b, sampled)
    metric = metric.model_copy(update={"value_range": (0.0, 1.0), "value_step": 0.25})
    settings = StatisticsConfig()
    found = corrected_comparisons(metric, judge, min_labels=10, settings=settings)
    assert found is not None
    (alone,) = found.labels_alone
    assert alone.p_value < 0.05 and alone.verdict == "worse"  # the labels alone detect it
    tuned = found.differences["b"].corrected_fit
    assert tuned is not None and tuned.p_value(0.0) > 0.05  # PPI++ alone would have called it tied
    correction = LabelCorrection(metrics=[metric])
    headline = [MetricInfo(column="correctness_0to1", label="correctness (0-1)", higher_is_better=True)]
    values = {cell: {"correctness_0to1": judged} for cell, judged in judge.items()}
    verdicts, why = corrected_verdicts(
        correction, headline, values, {"a": "reader a", "b": "reader b"}, min_labels=10, settings=settings
    )
    verdict = verdicts["correctness_0to1"]
    assert not why and verdict.best == "a" and verdict.comparisons[0].verdict == "worse"
    sentence = verdict.sentence()
    assert "is better than every other cell" in sentence
    assert "Labels alone: reader b" in sentence and "worse" in sentence
    assert "The verdict is the" in sentence and "the narrower of the two" in sentence


def test_planning_figures_past_the_eval_set_say_to_add_cases():
    """109 labelled cases on a 24-case run cannot be labelled: the figure says the eval set is too small."""
    from ragbench.stats.ppi import labels_plan_text

    assert labels_plan_text(20, 24) == "about 20 labelled cases in all"
    past = labels_plan_text(109, 24)
    assert "more labelled cases than the eval set's 24" in past and past.endswith("add cases")
    progress = {
        "labels_plan": past,
        "width": 0.2,
        "ceiling": None,
        "judge": "j",
        "criterion": "c",
        "sampled_cases": 12,
        "cases": 24,
        "estimate": "0.40 [0.20, 0.60] (labels 12)",
    }
    assert "add cases for an interval narrower than 0.2" in sample_progress_sentence("sample", progress)


def test_a_stale_label_on_the_first_case_of_the_order_is_named_by_the_run_the_terminal_and_the_gate(
    tmp_path,
):
    """One label of an answer the run does not contain (an edited answer), on the first case of the plan's
    order, ends the sample there: the correction names that case and why, the terminal says what to do,
    the run's metadata carries the counts, the gate's reason says labels were left out, and the review
    page asks that case next."""
    from types import SimpleNamespace

    from ragbench.analysis.labelled import correct_with_labels
    from ragbench.report.corrected import label_correction_lines
    from ragbench.review.labels import LabelStore
    from ragbench.review.queue import answer_items
    from ragbench.review.server import ReviewSession
    from ragbench.runs.gate import RegressionConfig, judge_run
    from ragbench.runs.record import RunRecord, add_corrected_metadata
    from ragbench.scoring.registry import LabelCorrectionConfig

    records, cases, judges, values = run_of(24)
    rubric = select_rubrics(["correctness"], [])[0]
    items = answer_items(records, cases, judges, rubric)
    store = LabelStore(tmp_path / "labels.jsonl")
    session = ReviewSession(items, store, title="t", seed=0)
    queue = session.state("sample")["items"]
    first = queue[0]["key"].split("|")[0]
    for shown in queue[2:42]:  # the 20 cases after the first, both cells' answers
        session.label(shown["key"], 1 if "wrong" in shown["answer"] else 5, order="sample")
    stale = label(first, "an edited answer", 5, sample=SampleDraw(plan="uniform:0", weight=1, draw=0.5))
    store.add(stale)

    state = session.state("sample")  # the page asks the first case again: its label is of another answer
    assert state["next"] == 0 and state["items"][0]["key"].startswith(f"{first}|")
    assert state["items"][0]["label"] is None and not state["items"][0]["counts"]
    assert all(shown["counts"] for shown in state["items"][2:42])

    correction = correct_with_labels(
        ReviewLabels(labels=store.labels.labels),
        records=records,
        cases=cases,
        judge_of_cell=judges,
        rubrics=[rubric],
        judge_values=values,
        config=LabelCorrectionConfig(),
        confidence=0.95,
    )
    (metric,) = correction.metrics
    assert metric.sample_ended_at == first
    assert metric.sample_ended_because == "its label is of an answer this run does not contain"
    assert (metric.labels_used, metric.sampled_cases, metric.labelled_cases) == (0, 0, 21)
    assert metric.labelled_after_end == 20
    assert any(f"20 labelled case(s) after the first unlabelled case of the plan's order, {first}" in w
               for w in metric.left_out), metric.left_out  # fmt: skip
    told = (
        f"The sample ends at case {first}: its label is of an answer this run does not contain; label it "
        "again on the review page (it is asked next) to use the 20 labelled case(s) after it"
    )
    key = "correctness_0to1_corrected"
    lines = label_correction_lines(correction, [key], {"a": "cell A", "b": "cell B"})
    assert any("correctness (0-1) (sample plan uniform:0): 0 label(s) used, on 0 of 24 cases; 21 case(s)"
               in line for line in lines), lines  # fmt: skip
    assert f"    {told}" in lines
    assert any("No corrected value for cell A (0 label(s)" in line for line in lines)
    assert any("1 label(s) of answers this run does not contain" in line for line in lines)

    flat: dict = {"metric_directions": {}, "metric_tests": {}}
    headline = [SimpleNamespace(column="correctness_0to1")]
    add_corrected_metadata(SimpleNamespace(label_correction=correction, headline=headline), flat)
    use = flat["label_correction"][key]
    assert use["sample_ended_at"] == first and use["labelled_after_end"] == 20
    assert (
        use["labels_used"] == 0
        and use["labelled_cases"] == 21
        and use["what_to_do"] == told[0].lower() + told[1:]
    )
    assert not any(name.startswith(f"{key}__") for name in flat)  # no value: the gate finds it missing

    current = RunRecord.from_metadata("now", "", flat | {"cell_ids": ["a", "b"]}, {})
    baseline = RunRecord.from_metadata(
        "before",
        "",
        {"metric_directions": {key: "higher"}, "cell_ids": ["a", "b"], f"{key}__a": 0.9, f"{key}__b": 0.6},
        {},
    )
    gate = judge_run(
        current,
        baseline,
        config="c",
        baseline_mode="previous",
        regression=RegressionConfig(),
        statistics=StatisticsConfig(),
    )
    assert gate.status == "regressed"
    text = gate.text()
    assert "every call failed" not in text
    (reason,) = [r for r in gate.reasons if r.startswith(f"{key} has no label-corrected value")]
    assert "(2 cell(s): a, b)" in reason and "labels were left out" in reason
    assert f"the sample ends at case {first}: its label is of an answer this run does not contain" in reason
    assert all("labels were left out" in row["rule"] for row in gate.comparison.missing)


def test_a_case_labelled_in_a_non_random_order_ends_the_sample_and_is_asked_again_on_the_sample_order(
    tmp_path,
):
    from ragbench.analysis.labelled import correct_with_labels
    from ragbench.review.labels import LabelStore
    from ragbench.review.queue import answer_items
    from ragbench.review.server import ReviewSession
    from ragbench.scoring.registry import LabelCorrectionConfig

    records, cases, judges, values = run_of(12)
    rubric = select_rubrics(["correctness"], [])[0]
    items = answer_items(records, cases, judges, rubric)
    session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="t", seed=0)
    queue = session.state("sample")["items"]
    first = queue[0]["key"].split("|")[0]
    for shown in queue[:2]:
        session.label(shown["key"], 5, order="disagreement")  # the first case, outside the sample
    for shown in queue[2:8]:
        session.label(shown["key"], 5, order="sample")
    state = session.state("sample")
    assert state["items"][0]["label"] is not None and not state["items"][0]["counts"]
    assert state["next"] == 0  # asked again: only a label given in the sample order counts there
    assert session.state("disagreement")["items"][session.state("disagreement")["next"]]["label"] is None
    correction = correct_with_labels(
        session.store.labels,
        records=records,
        cases=cases,
        judge_of_cell=judges,
        rubrics=[rubric],
        judge_values=values,
        config=LabelCorrectionConfig(),
        confidence=0.95,
    )
    (metric,) = correction.metrics
    assert metric.sample_ended_at == first and metric.labelled_after_end == 3
    assert metric.sample_ended_because == "its label was given in a non-random order (no sample)"
    assert "label it again on the review page (it is asked next) to use the 3" in metric.ended_sentence()
    session.label(queue[0]["key"], 5, order="sample")
    assert session.state("sample")["next"] == 1  # its other answer next


def test_the_terminal_names_the_cells_whose_numbers_are_the_labels_alone():
    """A judge that says the same of every answer cannot narrow anything: the terminal's account of the
    correction names each such cell's estimate as the labels alone, and why."""
    rng = np.random.default_rng(3)
    truth_a, truth_b = rng.integers(0, 2, 40).astype(float), rng.integers(0, 2, 40).astype(float)
    metric, _ = corrected_metric(truth_a, truth_b, np.full(40, 0.5), np.full(40, 0.5), list(range(12)))
    assert not any(e.judge_used for e in metric.estimates.values())
    lines = metric.lines({"a": "reader a", "b": "reader b"})
    for name in ("reader a", "reader b"):
        (line,) = [line for line in lines if line.startswith(f"  {name}: ")]
        assert "(labels alone, 12); labels alone: at 12 labels the judge's verdicts would widen" in line
