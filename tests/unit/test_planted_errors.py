"""The planted-error generator: each kind changes the reference the way its rule says, only where the rule
applies, the same way on every run, and works on the default eval set's reference answers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbench.inputs.eval_cases import load_eval_cases
from ragbench.inputs.knowledge_base import KnowledgeBaseConfig, load_corpus
from ragbench.scoring.planted import (
    PLANTED_KINDS,
    UNCHANGED,
    PlantedAnswer,
    knowledge_vocabulary,
    plant_errors,
    term_shape,
)

CASES_PATH = Path(__file__).resolve().parents[2] / "configs" / "eval_cases" / "python_reference.yaml"
VOCABULARY = [
    "TypeError",
    "KeyError",
    "__init__",
    "__len__",
    "len()",
    "repr()",
    "os.path",
    "max_size",
    "None",
]
FAST = settings(max_examples=60, deadline=None, database=None, derandomize=True, report_multiple_bugs=False)


def by_kind(planted: list[PlantedAnswer]) -> dict[str, PlantedAnswer]:
    return {answer.kind: answer for answer in planted}


@pytest.fixture(scope="module")
def default_vocabulary() -> list[str]:
    return knowledge_vocabulary(document.text for document in load_corpus(KnowledgeBaseConfig()).documents)


def test_the_unchanged_reference_comes_first_then_the_kinds_in_order():
    planted = plant_errors("  A TypeError is raised for 3 arguments.  ", vocabulary=VOCABULARY, seed=1)
    assert planted[0] == PlantedAnswer(UNCHANGED, "A TypeError is raised for 3 arguments.", "none")
    assert [answer.kind for answer in planted[1:]] == list(PLANTED_KINDS)
    assert all(answer.answer != planted[0].answer for answer in planted[1:])


def test_a_number_is_changed_to_a_nearby_one_and_the_change_says_so():
    planted = by_kind(plant_errors("It holds at most 8 items.", vocabulary=[], seed=0))
    number = planted["number"]
    assert number.answer in {
        "It holds at most 7 items.",
        "It holds at most 9 items.",
        "It holds at most 16 items.",
    }
    old, new = number.change.split(" -> ")
    assert old == "8" and new in number.answer


def test_a_standalone_number_is_changed_before_one_inside_a_formula():
    for seed in range(20):
        answer = by_kind(plant_errors("It is -(1**2), which is -1.", vocabulary=[], seed=seed))["number"]
        assert answer.answer.startswith("It is -(1**2), which is ") and answer.change.startswith("-1 -> ")


def test_versions_and_spelled_numbers_are_numbers_but_literals_and_names_are_not():
    version = by_kind(plant_errors("New in Python 3.7.", vocabulary=[], seed=0))["number"]
    assert version.change in {"3.7 -> 2.7", "3.7 -> 4.7", "3.7 -> 3.6", "3.7 -> 3.8"}
    spelled = by_kind(plant_errors("Six digits after the point.", vocabulary=[], seed=0))["number"]
    assert spelled.answer.split()[0] in {"Five", "Seven", "Eight"}
    for reference in ("Write it as 0o123 or 2j.", "Use utf8 and the one from the finally block."):
        assert "number" not in by_kind(plant_errors(reference, vocabulary=[], seed=0))


def test_an_entity_is_swapped_for_a_vocabulary_name_of_the_same_shape():
    planted = by_kind(plant_errors("A TypeError is raised; see __init__.", vocabulary=VOCABULARY, seed=3))
    old, new = planted["entity"].change.split(" -> ")
    assert old in {"TypeError", "__init__"}
    assert term_shape(new) == term_shape(old) and new not in {"TypeError", "__init__"}
    assert planted["entity"].answer == "A TypeError is raised; see __init__.".replace(old, new, 1)


def test_only_the_first_occurrence_is_swapped_so_a_placeholder_example_turns_wrong():
    reference = "`class Foo:` is equivalent to `class Foo(object):`."
    entity = by_kind(plant_errors(reference, vocabulary=["Bar"], seed=0))["entity"]
    assert entity.answer == "`class Bar:` is equivalent to `class Foo(object):`."


def test_a_called_name_is_swapped_for_another_called_name():
    entity = by_kind(plant_errors("find() returns -1.", vocabulary=["else", "len()"], seed=0))["entity"]
    assert entity.answer == "len() returns -1." and entity.change == "find -> len"


def test_no_entity_without_a_name_or_a_vocabulary_name_of_its_shape():
    assert "entity" not in by_kind(
        plant_errors("the loop ends when it is exhausted.", vocabulary=VOCABULARY, seed=0)
    )
    assert "entity" not in by_kind(plant_errors("A TypeError is raised.", vocabulary=[], seed=0))
    # a capitalised word opening a sentence is no name unless the knowledge base names it
    assert "entity" not in by_kind(plant_errors("Nothing happens.", vocabulary=["Python"], seed=0))


@pytest.mark.parametrize(
    ("reference", "negated"),
    [
        ("A TypeError is raised.", "A TypeError is not raised."),
        ("Deleting it raises a NameError.", "Deleting it does not raise a NameError."),
        ("No. The conditions run in order.", "Yes. The conditions run in order."),
        ("Lambdas cannot contain statements.", "Lambdas can contain statements."),
        ("finally always runs.", "finally never runs."),
        ("It does not copy the items.", "It does copy the items."),
        ("An empty string is always a substring.", "An empty string is never a substring."),
        ("Keys must be hashable.", "Keys must not be hashable."),
        ("Not exactly: x is evaluated once.", "Exactly: x is evaluated once."),
        ("False, None and zero.", "True, None and zero."),
        ("It has a default.", "It does not have a default."),
        ("`x is y` compares identity, which can differ.", "`x is y` compares identity, which cannot differ."),
    ],
)
def test_negation_turns_the_first_claim_around(reference: str, negated: str):
    assert by_kind(plant_errors(reference, vocabulary=[], seed=0))["negation"].answer == negated


def test_no_negation_where_no_template_applies():
    assert "negation" not in by_kind(plant_errors("The assignment operator `:=`.", vocabulary=[], seed=0))


def test_unsupported_and_refusal_always_apply():
    reference = "The assignment operator `:=`"
    planted = by_kind(plant_errors(reference, vocabulary=["os.path"], seed=0))
    assert planted["unsupported"].answer.startswith(reference + ". ")
    assert "os.path" in planted["unsupported"].answer and planted["unsupported"].change.endswith("os.path")
    assert (
        planted["refusal"].answer not in (reference, "") and planted["refusal"].change == "refuses to answer"
    )
    assert set(by_kind(plant_errors(reference, vocabulary=[], seed=0))) >= {"unsupported", "refusal"}


def test_a_blank_reference_is_refused():
    with pytest.raises(ValueError, match="blank"):
        plant_errors("  ", vocabulary=VOCABULARY, seed=0)


def test_the_vocabulary_is_the_texts_names_most_frequent_first():
    texts = [
        'Call len() on it. The "try" statement catches TypeError, and TypeError again.\n\nThe end.',
        "Use os.path or __init__; Python is a name, Sequence here and a sequence there and a sequence.",
    ]
    vocabulary = knowledge_vocabulary(texts)
    assert vocabulary[0] == "TypeError"
    assert set(vocabulary) == {"TypeError", "len()", "try", "os.path", "__init__", "Python"}
    assert vocabulary == knowledge_vocabulary(list(reversed(texts)))  # ties in alphabetical order
    assert knowledge_vocabulary(texts, limit=2) == vocabulary[:2]


def test_every_default_reference_gets_refusal_and_unsupported_and_most_a_negation(default_vocabulary):
    cases = load_eval_cases(CASES_PATH)
    counts: Counter[str] = Counter()
    for case in cases:
        assert case.reference_answer
        planted = plant_errors(case.reference_answer, vocabulary=default_vocabulary, seed=0)
        kinds = [answer.kind for answer in planted]
        assert {"unsupported", "refusal"} <= set(kinds) and len(kinds) == len(set(kinds))
        assert all(answer.answer != planted[0].answer for answer in planted[1:]), case.id
        counts.update(kinds)
    assert counts["negation"] >= 0.8 * len(cases)
    assert counts["entity"] >= 0.4 * len(cases) and counts["number"] >= 0.15 * len(cases)


references = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=120).filter(str.strip)
words = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}(\.[a-z_]{1,6})?(\(\))?", fullmatch=True)


@FAST
@given(
    references | st.sampled_from(["A TypeError is raised for 2 items.", "Yes: it is True."]), st.lists(words)
)
def test_planting_is_deterministic_and_every_kind_differs_from_the_reference(
    reference: str, vocabulary: list[str]
):
    planted = plant_errors(reference, vocabulary=vocabulary, seed=7)
    assert planted == plant_errors(reference, vocabulary=vocabulary, seed=7)
    assert planted[0].kind == UNCHANGED and planted[0].answer == reference.strip()
    assert all(answer.answer != reference.strip() and answer.change for answer in planted[1:])
    assert {answer.kind for answer in planted[1:]} <= set(PLANTED_KINDS)
