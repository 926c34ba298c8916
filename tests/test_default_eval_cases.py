"""The hand-made eval cases for the default knowledge base (CPython's pydoc topics) are consistent."""

from __future__ import annotations

import re
from pathlib import Path
from pydoc_data.topics import topics

import pytest

from ragbench.eval_cases import EvalCase, load_eval_cases

CASES_PATH = Path(__file__).resolve().parents[1] / "configs" / "eval_cases" / "python_reference.yaml"
MIN_CASES = 40
MIN_DISTINCT_TOPICS = 30


def _occurs_as_word(word: str, text: str) -> bool:
    """Whole word/phrase, case-insensitive: "local" does not match "locally".

    Runs of whitespace in the text count as one space, so a phrase wrapped over two lines
    of a topic still counts as that phrase.
    """
    text = re.sub(r"\s+", " ", text)
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=re.IGNORECASE) is not None


@pytest.fixture(scope="module")
def cases() -> list[EvalCase]:
    return load_eval_cases(CASES_PATH)


def test_enough_cases(cases: list[EvalCase]) -> None:
    assert len(cases) >= MIN_CASES


def test_ids_are_unique(cases: list[EvalCase]) -> None:
    ids = [case.id for case in cases]
    assert len(ids) == len(set(ids))


def test_every_case_has_ground_truth(cases: list[EvalCase]) -> None:
    incomplete = [
        case.id
        for case in cases
        if not (case.reference_answer and case.reference_answer.strip())
        or not case.expected_sources
        or not case.good_words
    ]
    assert not incomplete, f"cases without reference answer, expected source or good word: {incomplete}"


def test_expected_sources_are_topics(cases: list[EvalCase]) -> None:
    unknown = {
        case.id: [source for source in case.expected_sources if source not in topics]
        for case in cases
        if any(source not in topics for source in case.expected_sources)
    }
    assert not unknown, f"expected sources that are not pydoc topics: {unknown}"


def test_good_words_occur_in_expected_topics(cases: list[EvalCase]) -> None:
    missing = {}
    for case in cases:
        texts = [topics[source] for source in case.expected_sources if source in topics]
        absent = [word for word in case.good_words if not any(_occurs_as_word(word, text) for text in texts)]
        if absent:
            missing[case.id] = absent
    assert not missing, f"good words not found in any expected topic: {missing}"


def test_cases_cover_many_topics(cases: list[EvalCase]) -> None:
    distinct = {source for case in cases for source in case.expected_sources}
    assert len(distinct) >= MIN_DISTINCT_TOPICS


def test_word_matching_respects_word_boundaries() -> None:
    assert _occurs_as_word("local", "a Local variable")
    assert not _occurs_as_word("local", "defined locally")
    assert _occurs_as_word("-(x+1)", 'defined as "-(x+1)".')
    assert _occurs_as_word("__all__", 'named "__all__";')
    assert _occurs_as_word("memory address", "is the memory\n   address where")
