"""The hand-made eval cases for the default knowledge base (CPython's pydoc topics) are consistent."""

from __future__ import annotations

import re
from pathlib import Path
from pydoc_data.topics import topics

import pytest

from ragbench.generation.reader import NOT_IN_CONTEXT
from ragbench.inputs.eval_cases import EvalCase, load_eval_cases
from ragbench.scoring.keyword_tests import (
    BUILTIN_SUITES,
    contains_phrase,
    run_keyword_tests,
    starts_with_phrase,
)

CASES_PATH = Path(__file__).resolve().parents[2] / "configs" / "eval_cases" / "python_reference.yaml"
MIN_CASES = 40
MIN_DISTINCT_TOPICS = 30
MIN_KEYWORD_TESTED_CASES = 20  # cases with bad_words or bad_first_words (from real reader mistakes)
MIN_CONVERSATIONAL_CASES = 12  # follow-ups that need their earlier turns to find their passage
# The follow-up check's lexical search: windows of a topic's words, BM25 as ragbench's lexical retriever.
WINDOW_WORDS, WINDOW_STEP, TOP = 200, 150, 3


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


def test_enough_cases_have_bad_word_tests(cases: list[EvalCase]) -> None:
    tested = [case.id for case in cases if case.bad_words or case.bad_first_words]
    assert len(tested) >= MIN_KEYWORD_TESTED_CASES, f"only {len(tested)} cases with bad words: {tested}"


def test_bad_words_are_not_blank_or_duplicated(cases: list[EvalCase]) -> None:
    defects = {}
    for case in cases:
        for field in ("bad_words", "bad_first_words"):
            words = getattr(case, field)
            lowered = [word.strip().lower() for word in words]
            if any(not word for word in lowered) or len(lowered) != len(set(lowered)):
                defects[f"{case.id}.{field}"] = words
    assert not defects, f"blank or repeated keyword entries: {defects}"


def test_bad_words_never_occur_in_own_reference_answer(cases: list[EvalCase]) -> None:
    """A bad word that a correct answer contains would fail correct answers."""
    defects = {}
    for case in cases:
        reference = case.reference_answer or ""
        inside = [word for word in case.bad_words if contains_phrase(reference, word, case.match)]
        opening = [word for word in case.bad_first_words if starts_with_phrase(reference, word, case.match)]
        if inside or opening:
            defects[case.id] = {"bad_words": inside, "bad_first_words": opening}
    assert not defects, f"bad words found in the case's own reference answer: {defects}"


def test_bad_words_do_not_contradict_good_words(cases: list[EvalCase]) -> None:
    """No good word may itself contain a bad word (the two suites could never both pass)."""
    clashes = {
        case.id: [
            (good, bad)
            for good in case.good_words
            for bad in case.bad_words
            if contains_phrase(good, bad, case.match)
        ]
        for case in cases
    }
    clashes = {case_id: pairs for case_id, pairs in clashes.items() if pairs}
    assert not clashes, f"good words containing a bad word: {clashes}"


def test_reference_answers_pass_every_keyword_suite(cases: list[EvalCase]) -> None:
    report = run_keyword_tests(
        cases, {case.id: case.reference_answer or "" for case in cases}, BUILTIN_SUITES
    )
    failing = [(failure.case_id, failure.suite, failure.word) for failure in report.failing]
    assert not failing, f"reference answers failing their own keyword tests: {failing}"
    for suite in (s.name for s in BUILTIN_SUITES):
        tested = report.suites[suite].cases_tested
        if suite == "declines":  # every hand-written case is answerable; generated sets add unanswerable ones
            assert tested == 0
            continue
        assert tested > 0, f"no case takes part in the {suite} suite"


def test_keyword_suites_catch_a_refusal_and_an_inverted_opener(cases: list[EvalCase]) -> None:
    """The readers' real mistakes fail the suites: the fixed refusal, and "Yes" where the truth is no."""
    by_id = {case.id: case for case in cases}
    report = run_keyword_tests(
        [by_id["lambda-statements"], by_id["if-elif-single-branch"]],
        {
            "lambda-statements": NOT_IN_CONTEXT,
            "if-elif-single-branch": "**Yes**, in an if / elif / else chain, more than one branch can run.",
        },
    )
    assert report.suites["bad_answers"].failures == 1
    assert report.suites["bad_first_words"].failures == 1


def test_enough_conversational_cases(cases: list[EvalCase]) -> None:
    conversational = [case for case in cases if case.history]
    assert len(conversational) >= MIN_CONVERSATIONAL_CASES
    assert all("conversation" in case.tags for case in conversational)


def test_conversations_alternate_and_end_with_the_assistant(cases: list[EvalCase]) -> None:
    """A conversation the question continues: user, assistant, user, ..., the last earlier turn the
    assistant's (the question is the user's next turn)."""
    wrong = [
        case.id
        for case in cases
        if case.history
        and [turn.role for turn in case.history] != ["user", "assistant"] * (len(case.history) // 2)
    ]
    assert not wrong, f"conversations that do not alternate user/assistant or end with the user: {wrong}"


@pytest.fixture(scope="module")
def topic_search():
    """A BM25 search over windows of every topic's words (what a retriever reads is passages, not whole
    topics): a question -> the topics in the order of their best window."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    windows, sources = [], []
    for name in sorted(topics):
        words = topics[name].split()
        for start in range(0, max(1, len(words) - WINDOW_WORDS + WINDOW_STEP), WINDOW_STEP):
            windows.append(" ".join(words[start : start + WINDOW_WORDS]))
            sources.append(name)
    retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    tokens = bm25s.tokenize(windows, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever.index(tokens, show_progress=False)

    def search(question: str) -> list[str]:
        query = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, show_progress=False)
        found, _ = retriever.retrieve(query, k=len(windows), show_progress=False)
        return list(dict.fromkeys(sources[index] for index in found[0]))

    return search


def test_follow_ups_need_their_conversation_to_find_their_topic(cases: list[EvalCase], topic_search) -> None:
    """The point of a conversational case: its last question alone finds none of its expected topics in
    the top 3 of a word search, while the conversation and the question together find one. Word search is
    a proxy for what the grid's retrievers do, and no guarantee about them: what they do with and without
    a rewritten query is measured by the query_rewrite axis."""

    def best_rank(question: str, expected: list[str]) -> int:
        found = topic_search(question)
        return min(found.index(source) for source in expected) + 1

    defects = {}
    for case in cases:
        if not case.history:
            continue
        alone = best_rank(case.question, case.expected_sources)
        together = best_rank(
            " ".join([*(turn.content for turn in case.history), case.question]), case.expected_sources
        )
        if alone <= TOP or together > TOP:
            defects[case.id] = {"question alone": alone, "with its conversation": together}
    assert not defects, f"follow-ups whose conversation does not decide what is found (ranks): {defects}"


def test_word_matching_respects_word_boundaries() -> None:
    assert _occurs_as_word("local", "a Local variable")
    assert not _occurs_as_word("local", "defined locally")
    assert _occurs_as_word("-(x+1)", 'defined as "-(x+1)".')
    assert _occurs_as_word("__all__", 'named "__all__";')
    assert _occurs_as_word("memory address", "is the memory\n   address where")
