"""Keyword tests: whole-word matching, phrases, first words after markdown, failure rates."""

from __future__ import annotations

from typing import Any

import pytest

from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.keyword_tests import (
    BUILTIN_SUITES,
    contains_phrase,
    run_keyword_tests,
    starts_with_phrase,
)

SUITES = {suite.name: suite for suite in BUILTIN_SUITES}


def check_answer(case: EvalCase, suite: str, answer: str) -> str | None:
    """What fails `answer` on the built-in `suite` (None when it passes or the suite skips the case)."""
    return SUITES[suite].check(case, answer) if SUITES[suite].tests_case(case) else None


def case(case_id: str = "c1", **fields: Any) -> EvalCase:
    return EvalCase(id=case_id, question="What is the default orchestrator?", **fields)


# -- matching ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "phrase", "match", "expected"),
    [
        ("The default is the local orchestrator.", "local", "word", True),
        ("It runs locally on your machine.", "local", "word", False),
        ("It runs locally on your machine.", "local", "substring", True),
        ("Use LOCAL for testing", "local", "word", True),
        ("Use Local.", "local", "word", True),
        ("(local)", "local", "word", True),
        ("non-local", "local", "word", True),  # a hyphen separates words
        ("Supports AWS Step Functions too", "aws step functions", "word", True),
        ("Supports AWS  Step\nFunctions too", "AWS Step Functions", "word", True),
        ("Supports AWS\n\n  Step\tFunctions", "AWS Step Functions", "substring", True),
        ("Supports AWS StepFunctions", "AWS Step Functions", "word", False),
        ("We use C++ here", "C++", "word", True),
        ("We use C++x here", "C++", "word", False),
        ("prefect.", "Prefect", "word", True),
        ("anything", "   ", "word", False),
    ],
)
def test_contains_phrase(text: str, phrase: str, match: Any, expected: bool) -> None:
    assert contains_phrase(text, phrase, match) is expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Yes, it does.", True),
        ("yes", True),
        ("  \n Yes.", True),
        ('"Yes", ZenML supports it.', True),
        ("**Yes**, ZenML supports it.", True),
        ("# Yes\nIt does.", True),
        ("> **_Yes_** it does", True),
        ("- Yes", True),
        ("Yesterday we added it.", False),
        ("No. Yes would be wrong.", False),
        ("ZenML: yes", False),
        ("", False),
    ],
)
def test_starts_with_phrase_after_markdown_quotes_punctuation(answer: str, expected: bool) -> None:
    assert starts_with_phrase(answer, "Yes") is expected


def test_starts_with_phrase_multiword_and_substring_mode() -> None:
    assert starts_with_phrase("**Yes,  it\ndoes** support Flyte", "yes, it does")
    assert not starts_with_phrase("Yes it does", "yes, it does")
    assert starts_with_phrase("Yesterday", "Yes", "substring")
    assert not starts_with_phrase("Yesterday", "Yes", "word")


# -- the three suites ----------------------------------------------------------------------------


def test_bad_words_fail_whole_word_only() -> None:
    c = case(bad_words=["Flyte", "Prefect"])
    assert check_answer(c, "bad_answers", "ZenML supports Kubeflow and flyte.") == "Flyte"
    assert check_answer(c, "bad_answers", "ZenML supports Kubeflow and Flytekit.") is None
    assert check_answer(case(bad_words=["Flyte"], match="substring"), "bad_answers", "Flytekit") == "Flyte"


def test_good_words_are_all_required() -> None:
    c = case(good_words=["Kubeflow", "Airflow"])
    assert check_answer(c, "good_answers", "Kubeflow and Airflow are supported.") is None
    assert check_answer(c, "good_answers", "KUBEFLOW is supported.") == "Airflow"
    assert check_answer(c, "good_answers", "Nothing relevant.") == "Kubeflow"
    assert check_answer(case(good_words=["local"]), "good_answers", "It runs locally.") == "local"


def test_bad_first_words_suite() -> None:
    c = case(bad_first_words=["Yes"])
    assert check_answer(c, "bad_first_words", "**Yes**, Flyte works out of the box.") == "Yes"
    assert check_answer(c, "bad_first_words", "No, not out of the box. Yes, a plugin exists.") is None


# -- the report ----------------------------------------------------------------------------------


def test_report_counts_rates_and_failures() -> None:
    cases = [
        case("a", bad_words=["Flyte"], good_words=["Airflow"]),
        case("b", bad_words=["Flyte"]),
        case("c", bad_first_words=["Yes"]),
        case("d", reference_answer="no keywords here"),  # takes part in no suite
        case("e", good_words=["local"], bad_words=["Prefect"]),  # no answer: not tested, not counted
    ]
    answers = {
        "a": "Airflow and Flyte.",  # bad word present; good word present
        "b": "Only Kubeflow.",
        "c": "Yes, it does.",
        "d": "whatever",
        "unknown": "an answer for a case that does not exist",
    }
    report = run_keyword_tests(cases, answers)

    assert set(report.suites) == {suite.name for suite in BUILTIN_SUITES}
    bad = report.suites["bad_answers"]
    assert (bad.cases_tested, bad.failures, bad.failure_rate) == (2, 1, 0.5)
    first = report.suites["bad_first_words"]
    assert (first.cases_tested, first.failures, first.failure_rate) == (1, 1, 1.0)
    good = report.suites["good_answers"]
    assert (good.cases_tested, good.failures, good.failure_rate) == (1, 0, 0.0)

    assert [(f.case_id, f.suite, f.word) for f in report.failing] == [
        ("a", "bad_answers", "Flyte"),
        ("c", "bad_first_words", "Yes"),
    ]
    assert report.failing[0].answer == "Airflow and Flyte."


def test_report_with_no_tested_cases_has_no_rate() -> None:
    report = run_keyword_tests([case("a", good_words=["x"]), case("b")], {"b": "answer"})
    for result in report.suites.values():
        assert result.cases_tested == 0 and result.failures == 0 and result.failure_rate is None
    assert report.failing == []
    assert run_keyword_tests([], {}).suites["good_answers"].failure_rate is None


def test_blank_words_are_ignored() -> None:
    report = run_keyword_tests([case("a", good_words=["  "], bad_words=[""])], {"a": "text"})
    assert all(r.cases_tested == 0 for r in report.suites.values())


def test_empty_answer_is_tested() -> None:
    report = run_keyword_tests(
        [case("a", good_words=["local"], bad_words=["Flyte"])], {"a": ""}, BUILTIN_SUITES
    )
    assert report.suites["good_answers"].failures == 1
    assert report.suites["bad_answers"].failures == 0


def test_report_round_trips_as_json() -> None:
    report = run_keyword_tests([case("a", bad_words=["Flyte"])], {"a": "Flyte"})
    again = type(report).model_validate_json(report.model_dump_json())
    assert again == report


# -- unanswerable cases ----------------------------------------------------------------------------


def test_declines_suite_fails_every_answer_to_an_unanswerable_case_that_is_not_a_refusal() -> None:
    cases = [
        case("refused", expected_behaviour="declines"),
        case("paraphrased", expected_behaviour="declines"),
        case("invented", expected_behaviour="declines"),
        case("answerable", good_words=["local"]),  # not tested by this suite
    ]
    answers = {
        "refused": "The context does not say.",
        "paraphrased": "The passages do not mention the default orchestrator.",
        "invented": "The default orchestrator is Airflow [1].",
        "answerable": "The context does not say.",
    }
    report = run_keyword_tests(cases, answers)
    declines = report.suites["declines"]
    assert (declines.cases_tested, declines.failures) == (3, 1)
    assert report.outcomes["declines"] == {"refused": 0.0, "paraphrased": 0.0, "invented": 1.0}
    assert [(f.case_id, f.suite) for f in report.failing] == [
        ("invented", "declines"),
        ("answerable", "good_answers"),
    ]


def test_an_unanswerable_case_has_no_reference_answer_or_expected_sources() -> None:
    with pytest.raises(ValueError, match="declines"):
        case("x", expected_behaviour="declines", reference_answer="Airflow.")
    with pytest.raises(ValueError, match="declines"):
        case("x", expected_behaviour="declines", expected_sources=["doc.md"])
