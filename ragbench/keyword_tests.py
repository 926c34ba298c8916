"""Handcrafted keyword tests of generated answers: cheap, deterministic regression checks.

Three suites, each run only on the cases that list words for it:

- ``bad_answers``: the answer fails if it mentions any of the case's ``bad_words``;
- ``bad_first_words``: the answer fails if it opens with one of ``bad_first_words`` (leading
  whitespace, quotes, markdown such as ``**`` or ``#`` and punctuation are skipped first, so
  ``**"Yes**, it does`` opens with "yes");
- ``good_answers``: the answer fails unless it mentions every one of the ``good_words``;
- ``declines``: on a case whose ``expected_behaviour`` is "declines" (the knowledge base does not
  answer it), the answer fails unless it is a refusal (`ragbench.reader.says_not_in_context`): a RAG
  system that invents an answer shows up as this suite's failure rate.

Matching ignores case. With the case's default ``match: word`` a word or phrase must stand alone
("local" does not match "locally", nor "local_path": an underscore is part of a word, as in
identifiers); ``match: substring`` switches to plain containment. Either way a space inside a phrase
matches any run of whitespace, line breaks included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel

from ragbench.eval_cases import EvalCase
from ragbench.reader import says_not_in_context

Suite = Literal["bad_answers", "bad_first_words", "good_answers", "declines"]
SUITES: tuple[Suite, ...] = ("bad_answers", "bad_first_words", "good_answers", "declines")
# The word a `declines` failure is recorded with: no word decides it, the missing refusal does.
NO_REFUSAL = "(answered instead of declining)"
MatchMode = Literal["word", "substring"]

# What may precede an answer's first word: whitespace, quotes, markdown markers, punctuation.
_LEADING_NOISE = re.compile(r"^[\W_]+")


class KeywordFailure(BaseModel):
    """One failed check: which case, which suite, the first word that decided it, and the answer."""

    case_id: str
    suite: Suite
    word: str
    answer: str


class SuiteResult(BaseModel):
    """`failure_rate` is failures / cases_tested (0-1), None when no case took part."""

    cases_tested: int = 0
    failures: int = 0
    failure_rate: float | None = None


class KeywordReport(BaseModel):
    suites: dict[Suite, SuiteResult]
    failing: list[KeywordFailure]
    # suite -> case id -> 1.0 failed / 0.0 passed, for every case the suite tested: the rates are
    # their means, and intervals and paired tests are computed from them.
    outcomes: dict[Suite, dict[str, float]] = {}


@lru_cache(maxsize=4096)
def _pattern(phrase: str, match: MatchMode, anchored: bool) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(part) for part in phrase.split())
    if match == "substring":
        return re.compile(("^" if anchored else "") + body, re.IGNORECASE)
    if anchored:  # the opening word may be closed by markdown: "_Yes_", "__Yes__"
        return re.compile(rf"^{body}(?![^\W_])", re.IGNORECASE)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def contains_phrase(text: str, phrase: str, match: MatchMode = "word") -> bool:
    """True if `phrase` occurs in `text` (case-insensitive; whole words unless match is substring)."""
    if not phrase.strip():
        return False
    return _pattern(phrase, match, anchored=False).search(text) is not None


def starts_with_phrase(text: str, phrase: str, match: MatchMode = "word") -> bool:
    """True if `text`, after leading quotes/markdown/punctuation, opens with `phrase`."""
    phrase = _LEADING_NOISE.sub("", phrase.strip())
    if not phrase:
        return False
    return _pattern(phrase, match, anchored=True).search(_LEADING_NOISE.sub("", text)) is not None


_SUITE_FIELD: dict[Suite, str] = {
    "bad_answers": "bad_words",
    "bad_first_words": "bad_first_words",
    "good_answers": "good_words",
}


def suite_words(case: EvalCase, suite: Suite) -> list[str]:
    """The case's non-blank words for `suite`; a case with none takes no part in that suite."""
    if suite == "declines":
        return []
    return [word for word in getattr(case, _SUITE_FIELD[suite]) if word.strip()]


def tests_case(case: EvalCase, suite: Suite) -> bool:
    """Whether `suite` takes part on `case`: it has words for it, or (declines) it expects a refusal."""
    if suite == "declines":
        return case.expected_behaviour == "declines"
    return bool(suite_words(case, suite))


def check_answer(case: EvalCase, suite: Suite, answer: str) -> str | None:
    """The word that makes `answer` fail `suite` (None if it passes or the suite does not test the case)."""
    if suite == "declines":
        return NO_REFUSAL if tests_case(case, suite) and not says_not_in_context(answer) else None
    words = suite_words(case, suite)
    if suite == "bad_answers":
        found = (w for w in words if contains_phrase(answer, w, case.match))
    elif suite == "bad_first_words":
        found = (w for w in words if starts_with_phrase(answer, w, case.match))
    else:
        found = (w for w in words if not contains_phrase(answer, w, case.match))
    return next(found, None)


def run_keyword_tests(cases: Iterable[EvalCase], answers: Mapping[str, str]) -> KeywordReport:
    """Run every suite over the cases that have both words for it and an answer in `answers`.

    Cases without an answer (e.g. the reader failed) are neither tested nor counted.
    """
    results = {suite: SuiteResult() for suite in SUITES}
    outcomes: dict[Suite, dict[str, float]] = {suite: {} for suite in SUITES}
    failing: list[KeywordFailure] = []
    for case in cases:
        answer = answers.get(case.id)
        if answer is None:
            continue
        for suite in SUITES:
            if not tests_case(case, suite):
                continue
            results[suite].cases_tested += 1
            word = check_answer(case, suite, answer)
            outcomes[suite][case.id] = float(word is not None)
            if word is not None:
                results[suite].failures += 1
                failing.append(KeywordFailure(case_id=case.id, suite=suite, word=word, answer=answer))
    for result in results.values():
        if result.cases_tested:
            result.failure_rate = result.failures / result.cases_tested
    return KeywordReport(suites=results, failing=failing, outcomes=outcomes)
