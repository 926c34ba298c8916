"""The judge card's arithmetic on hand-made verdicts: detection and false alarms with Wilson intervals,
parse failures counted apart, the reliable rule, the terminal lines; and the seeded sample of cases and
the judge inputs made from them."""

from __future__ import annotations

import pytest

from ragbench.analysis.judge_card import (
    CAVEAT,
    JudgeCard,
    PlantedVerdict,
    build_card,
    card_lines,
    planted_inputs,
    sample_cases,
)
from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.planted import UNCHANGED, plant_errors
from ragbench.scoring.rubrics import CORRECTNESS
from ragbench.stats.inference import wilson_interval


def verdict(kind: str, score: int | None, case: str = "c1", seconds: float | None = 1.0) -> PlantedVerdict:
    return PlantedVerdict(case_id=case, kind=kind, change="x -> y", score=score, seconds=seconds)


def card(verdicts: list[PlantedVerdict], **options) -> JudgeCard:
    settings = {"judge": "j", "rubric": "correctness", "criterion": "correctness", "min_detection": 0.8}
    return build_card(verdicts, **(settings | {"confidence": 0.95} | options))


def case(case_id: str, reference: str | None = "A TypeError is raised for 2 items.") -> EvalCase:
    return EvalCase(id=case_id, question=f"question {case_id}?", reference_answer=reference, tags=["t"])


def test_detection_per_kind_counts_low_scores_as_caught_with_wilson_intervals():
    # number: scores 1, 2, 3 caught, 4 and 5 passed (pass_at 4); negation: all caught
    verdicts = [verdict("number", score, f"c{score - 1}") for score in (1, 2, 3, 4, 5)]
    verdicts += [verdict("negation", 1, f"c{i}") for i in range(3)]
    verdicts += [verdict(UNCHANGED, 5, f"c{i}") for i in range(5)]
    result = card(verdicts)
    number, negation = result.detection
    assert (number.kind, number.n, number.detected, number.rate) == ("number", 5, 3, 0.6)
    assert (number.low, number.high) == pytest.approx(wilson_interval(3, 5, 0.95))
    assert (negation.n, negation.detected, negation.rate) == (3, 3, 1.0)
    assert (result.overall_detection.n, result.overall_detection.detected) == (8, 6)
    assert (result.overall_detection.low, result.overall_detection.high) == pytest.approx(
        wilson_interval(6, 8)
    )
    assert [v.passed for v in result.verdicts[:5]] == [False, False, False, True, True]
    assert result.cases == 5 and result.caveat == CAVEAT


def test_pass_at_and_the_pass_fail_scale_decide_what_passes():
    assert card([verdict("number", 3)], pass_at=3).overall_detection.detected == 0
    pass_fail = card([verdict("number", 1), verdict("number", 0)], scale="pass_fail")
    assert [v.passed for v in pass_fail.verdicts] == [True, False]
    assert pass_fail.overall_detection.detected == 1
    with pytest.raises(ValueError, match=r"1\.\.5"):
        card([verdict("number", 0)])


def test_false_alarms_are_unchanged_references_the_judge_failed():
    result = card([verdict(UNCHANGED, 5), verdict(UNCHANGED, 2, "c2"), verdict(UNCHANGED, 4, "c3")])
    alarms = result.false_alarms
    assert (alarms.n, alarms.false_alarms, alarms.rate) == (3, 1, pytest.approx(1 / 3))
    assert (alarms.low, alarms.high) == pytest.approx(wilson_interval(1, 3))


def test_parse_failures_are_left_out_of_the_rates_but_counted():
    result = card([verdict("entity", 1), verdict("entity", None, "c2"), verdict(UNCHANGED, None)])
    assert result.parse_failures == 2
    assert (result.detection[0].n, result.detection[0].detected, result.detection[0].rate) == (1, 1, 1.0)
    assert (result.false_alarms.n, result.false_alarms.rate, result.false_alarms.low) == (0, None, None)
    assert result.verdicts[1].passed is None


def test_verdicts_the_spend_cap_refused_are_not_parse_failures_and_mark_the_card_partial():
    refused = verdict("entity", None, "c2").model_copy(update={"refused": True})
    result = card([verdict("entity", 1), refused, verdict(UNCHANGED, None)])
    assert (result.parse_failures, result.refused_by_budget) == (1, 1)
    assert result.detection[0].n == 1  # the refused one is in no rate
    partial = "  PARTIAL: the spend cap left 1 verdict(s) unasked"
    assert any(line.startswith(partial) for line in card_lines(result))
    assert not any("PARTIAL" in line for line in card_lines(card([verdict("entity", 1)])))


def test_seconds_per_verdict_is_the_mean_of_the_known_times():
    result = card(
        [
            verdict("number", 1, seconds=1.0),
            verdict("number", 1, seconds=3.0),
            verdict("entity", 1, seconds=None),
        ]
    )
    assert result.seconds_per_verdict == 2.0
    assert card([verdict("number", 1, seconds=None)]).seconds_per_verdict is None


def test_reliable_needs_the_share_of_errors_caught_and_of_references_passed():
    unchanged = [verdict(UNCHANGED, 5, f"c{i}") for i in range(5)]
    caught_4_of_5 = [verdict("number", 1, f"c{i}") for i in range(4)] + [verdict("number", 5, "c4")]
    assert card(caught_4_of_5 + unchanged).reliable  # 80% caught, at min_detection
    assert not card(caught_4_of_5 + unchanged, min_detection=0.81).reliable
    # a judge failing every answer catches every error and is still unreliable
    assert not card([verdict("number", 1), verdict(UNCHANGED, 1)]).reliable
    assert card([verdict("number", 1), *unchanged[:4], verdict(UNCHANGED, 1, "c4")]).reliable  # 1 alarm in 5


def test_a_card_without_scored_planted_errors_or_references_is_never_reliable():
    assert not card([]).reliable
    assert not card([verdict(UNCHANGED, 5), verdict("number", None)]).reliable
    assert not card([verdict("number", 1)]).reliable  # no unchanged reference scored
    assert card([]).detection == [] and card([]).overall_detection.rate is None


def test_counted_kinds_choose_what_the_overall_detection_pools():
    verdicts = [verdict("number", 1), verdict("unsupported", 5), verdict(UNCHANGED, 5)]
    assert not card(verdicts).reliable  # 1 of 2 caught
    pooled = card(verdicts, counted_kinds=["number", "entity", "negation", "refusal"])
    assert pooled.reliable and pooled.overall_detection.n == 1
    assert [d.kind for d in pooled.detection] == ["number", "unsupported"]  # every kind still shown


def test_unknown_kinds_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown planted kind"):
        card([verdict("typo", 1)])
    with pytest.raises(ValueError, match="unknown planted kind"):
        card([], counted_kinds=["typo"])
    with pytest.raises(ValueError, match="min_detection"):
        card([], min_detection=0)


def test_the_card_round_trips_as_json():
    result = card([verdict("number", 2), verdict(UNCHANGED, 5)])
    assert JudgeCard.model_validate_json(result.model_dump_json()) == result


def test_card_lines_show_rates_intervals_and_the_unreliable_label():
    verdicts = [verdict("number", 1, f"c{i}") for i in range(7)] + [verdict("number", 5, "c7")]
    verdicts += [verdict(UNCHANGED, 5, f"c{i}") for i in range(8)] + [verdict("entity", None)]
    text = "\n".join(card_lines(card(verdicts, min_detection=0.9)))
    assert "caught number 7/8 (88%, 95% CI 53-98%)" in text
    assert "false alarms on unchanged references 0/8 (0%, 95% CI 0-32%)" in text
    assert "parse failures 1 of 17 verdicts; 1.00 s/verdict" in text
    assert "UNRELIABLE: catches 88% of the planted errors, below 90%" in text
    assert CAVEAT in text
    reliable = "\n".join(card_lines(card(verdicts)))
    assert "UNRELIABLE" not in reliable and "reliable:" in reliable
    assert "no planted error" in "\n".join(card_lines(card([])))


def test_sample_cases_is_seeded_keeps_eval_set_order_and_skips_cases_without_a_reference():
    cases = [case(f"c{i}") for i in range(20)] + [case("none", None), case("blank", "  ")]
    sample = sample_cases(cases, 5, seed=0)
    assert len(sample) == 5 and sample == sample_cases(cases, 5, seed=0)
    assert [c.id for c in sample] == [c.id for c in cases if c in sample]
    assert sample != sample_cases(cases, 5, seed=1)
    assert len(sample_cases(cases, 100, seed=0)) == 20
    assert sample_cases(list(reversed(cases)), 5, seed=0) == list(reversed(sample))


def test_appending_cases_keeps_the_sample_but_for_newcomers_that_outrank_it():
    cases = [case(f"c{i}") for i in range(20)]
    before = {c.id for c in sample_cases(cases, 5, seed=3)}
    after = {c.id for c in sample_cases([*cases, *(case(f"new{i}") for i in range(5))], 5, seed=3)}
    assert {i for i in after if not i.startswith("new")} <= before
    assert len(before - after) == len({i for i in after if i.startswith("new")})


def test_planted_inputs_send_each_planted_answer_with_the_real_reference():
    cases = [case("a"), case("b", "Keys must be hashable."), case("none", None)]
    planted = planted_inputs(cases, ["KeyError"], seed=0)
    assert planted == planted_inputs(cases, ["KeyError"], seed=0)
    assert {item.case_id for item, _, _ in planted} == {"a", "b"}
    for item, kind, change in planted:
        source = next(c for c in cases if c.id == item.case_id)
        assert item.reference_answer == source.reference_answer and item.question == source.question
        assert item.tags == ["t"] and item.contexts == [] and CORRECTNESS.applies(item)
        assert (item.answer == source.reference_answer) == (kind == UNCHANGED) and change
    first = [(item.answer, kind) for item, kind, _ in planted if item.case_id == "a"]
    assert first[0] == (cases[0].reference_answer, UNCHANGED)
    assert len(first) == len(plant_errors(cases[0].reference_answer or "", vocabulary=["KeyError"], seed=0))
