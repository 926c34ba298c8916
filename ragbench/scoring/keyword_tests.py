"""Deterministic checks of generated answers: cheap regression tests, each suite one declaration.

A suite fails an answer or passes it; its column `fail_<name>` is the failure rate over the cases it
tested. The built-in suites read words from the eval cases, each run only on the cases that list words
for it:

- ``bad_answers``: the answer fails if it mentions any of the case's ``bad_words``;
- ``bad_first_words``: the answer fails if it opens with one of ``bad_first_words`` (leading
  whitespace, quotes, markdown such as ``**`` or ``#`` and punctuation are skipped first, so
  ``**"Yes**, it does`` opens with "yes");
- ``good_answers``: the answer fails unless it mentions every one of the ``good_words``;
- ``declines``: on a case whose ``expected_behaviour`` is "declines" (the knowledge base does not
  answer it), the answer fails unless it is a refusal (`ragbench.llm.prompts.says_not_in_context`):
  a RAG
  system that invents an answer shows up as this suite's failure rate.

A user's suite (`evaluation.custom_suites`, `AssertionSuite`) is an assertion every answer must meet,
as promptfoo's are: ``contains``, ``contains-any``, ``contains-all``, ``starts-with``, ``regex``,
``max-length``, ``is-json``, each negated by a ``not-`` prefix; `tags` limit it to some cases.

Matching ignores case. With the case's default ``match: word`` a word or phrase must stand alone
("local" does not match "locally", nor "local_path": an underscore is part of a word, as in
identifiers); ``match: substring`` switches to plain containment. Either way a space inside a phrase
matches any run of whitespace, line breaks included. A regex is Python's, as written (``(?i)`` for
case-insensitive).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.prompts import says_not_in_context
from ragbench.scoring.metrics import MetricInfo

# The word a `declines` failure is recorded with: no word decides it, the missing refusal does.
NO_REFUSAL = "(answered instead of declining)"
MatchMode = Literal["word", "substring"]

# What may precede an answer's first word: whitespace, quotes, markdown markers, punctuation.
_LEADING_NOISE = re.compile(r"^[\W_]+")


class KeywordFailure(BaseModel):
    """One failed check: which case, which suite, the first word that decided it, and the answer."""

    case_id: str
    suite: str
    word: str
    answer: str


class SuiteResult(BaseModel):
    """`failure_rate` is failures / cases_tested (0-1), None when no case took part."""

    cases_tested: int = 0
    failures: int = 0
    failure_rate: float | None = None


class KeywordReport(BaseModel):
    suites: dict[str, SuiteResult]
    failing: list[KeywordFailure]
    # suite -> case id -> 1.0 failed / 0.0 passed, for every case the suite tested: the rates are
    # their means, and intervals and paired tests are computed from them.
    outcomes: dict[str, dict[str, float]] = {}


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


def suite_column(name: str) -> str:
    """A suite's results column: its failure rate."""
    return f"fail_{name}"


class Suite(BaseModel):
    """One deterministic check: a metric `fail_<name>` (lower is better), the cases it tests, and the
    word or reason that fails an answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the suite's name; its results column is fail_<name>")
    label: str = Field(description="how the report names its failure rate")
    headline: bool = Field(default=True, description="among the scores the gate watches and the report leads")
    tags: tuple[str, ...] = Field(default=(), description="test only cases with one of these tags")

    @property
    def column(self) -> str:
        return suite_column(self.name)

    @property
    def metric(self) -> MetricInfo:
        return MetricInfo(
            column=self.column, label=self.label, higher_is_better=False, bounds=(0.0, 1.0), binary=True
        )

    def tests_case(self, case: EvalCase) -> bool:
        """Whether the suite takes part on `case`; a suite limited to tags tests only cases with one."""
        return (not self.tags or bool(set(self.tags) & set(case.tags))) and self._takes_part(case)

    def _takes_part(self, case: EvalCase) -> bool:
        return True

    def check(self, case: EvalCase, answer: str) -> str | None:
        """What makes `answer` fail (a word or a short reason); None when it passes."""
        raise NotImplementedError


CaseWordField = Literal["good_words", "bad_words", "bad_first_words"]


class CaseWordsSuite(Suite):
    """A suite whose words come from each case's `field`: fail on any word present, on an opening word,
    or unless every word is present."""

    field: CaseWordField
    fails_when: Literal["any_present", "starts_with", "any_missing"]

    def words(self, case: EvalCase) -> list[str]:
        return [word for word in getattr(case, self.field) if word.strip()]

    def _takes_part(self, case: EvalCase) -> bool:
        return bool(self.words(case))

    def check(self, case: EvalCase, answer: str) -> str | None:
        words = self.words(case)
        if self.fails_when == "any_present":
            found = (w for w in words if contains_phrase(answer, w, case.match))
        elif self.fails_when == "starts_with":
            found = (w for w in words if starts_with_phrase(answer, w, case.match))
        else:
            found = (w for w in words if not contains_phrase(answer, w, case.match))
        return next(found, None)


class DeclinesSuite(Suite):
    """Cases the knowledge base cannot answer must get a refusal."""

    def _takes_part(self, case: EvalCase) -> bool:
        return case.expected_behaviour == "declines"

    def check(self, case: EvalCase, answer: str) -> str | None:
        return None if says_not_in_context(answer) else NO_REFUSAL


AssertionType = Literal[
    "contains", "contains-any", "contains-all", "starts-with", "regex", "max-length", "is-json"
]
_ASSERTIONS: tuple[str, ...] = get_args(AssertionType)


class AssertionSuite(Suite):
    """`evaluation.custom_suites` entry: an assertion every answer (of the tagged cases) must meet."""

    assertion: str = Field(
        alias="assert",
        description=f"one of {', '.join(_ASSERTIONS)}, or any of them with a not- prefix",
    )
    label: str = Field(
        default="", description="how the report names its failure rate; default: <name> (failure rate)"
    )
    value: str | int | list[str] | None = Field(
        default=None, description="a text, a list of texts (contains-any/all) or a length (max-length)"
    )
    match: MatchMode = Field(default="substring", description="substring, or word: whole words only")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _default_label(cls, data: Any) -> Any:
        if isinstance(data, dict) and "label" not in data and "name" in data:
            data = {**data, "label": f"{data['name']} (failure rate)"}
        return data

    @property
    def negated(self) -> bool:
        return self.assertion.startswith("not-")

    @property
    def kind(self) -> str:
        return self.assertion.removeprefix("not-")

    @model_validator(mode="after")
    def _check_value(self) -> AssertionSuite:
        where = f"custom suite {self.name}"
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"{where}: a name is lowercase letters, digits and _, starting with a letter")
        if self.kind not in _ASSERTIONS:
            raise ValueError(
                f"{where}: unknown assert {self.assertion!r}; choose from {', '.join(_ASSERTIONS)}"
            )
        value = self.value
        if self.kind in ("contains", "starts-with", "regex") and not (
            isinstance(value, str) and value.strip()
        ):
            raise ValueError(f"{where}: {self.kind} needs a non-empty text value")
        if self.kind in ("contains-any", "contains-all") and not (
            isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value)
        ):
            raise ValueError(f"{where}: {self.kind} needs a non-empty list of texts as value")
        if self.kind == "max-length" and not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{where}: max-length needs a positive number of characters as value")
        if self.kind == "is-json" and value is not None:
            raise ValueError(f"{where}: is-json takes no value")
        if self.kind == "regex":
            try:
                re.compile(str(value))
            except re.error as error:
                raise ValueError(f"{where}: invalid regex {value!r}: {error}") from None
        return self

    def _holds(self, answer: str) -> tuple[bool, str]:
        """Whether the assertion holds, and what decided it (for the failure list)."""
        value = self.value
        if self.kind == "contains":
            return contains_phrase(answer, str(value), self.match), str(value)
        if self.kind == "starts-with":
            return starts_with_phrase(answer, str(value), self.match), str(value)
        if self.kind in ("contains-any", "contains-all"):
            present = [w for w in value if contains_phrase(answer, w, self.match)]  # type: ignore[union-attr]
            missing = [w for w in value if w not in present]  # type: ignore[union-attr]
            if self.kind == "contains-any":
                return bool(present), present[0] if present else "none of " + ", ".join(missing)
            return not missing, missing[0] if missing else ", ".join(present)
        if self.kind == "regex":
            found = re.search(str(value), answer)
            return found is not None, found.group(0) if found else f"no match for {value}"
        if self.kind == "max-length":
            return len(answer) <= int(value), f"{len(answer)} characters (max {value})"  # type: ignore[arg-type]
        try:
            json.loads(answer)
        except ValueError:
            return False, "not valid JSON"
        return True, "valid JSON"

    def check(self, case: EvalCase, answer: str) -> str | None:
        holds, decided_by = self._holds(answer)
        return decided_by if holds == self.negated else None


BUILTIN_SUITES: tuple[Suite, ...] = (
    CaseWordsSuite(
        name="good_answers", label="missing good words (rate)", field="good_words", fails_when="any_missing"
    ),
    CaseWordsSuite(name="bad_answers", label="bad words (rate)", field="bad_words", fails_when="any_present"),
    CaseWordsSuite(
        name="bad_first_words",
        label="bad first words (rate)",
        field="bad_first_words",
        fails_when="starts_with",
        headline=False,
    ),
    DeclinesSuite(name="declines", label="answered instead of declining (rate)"),
)


def run_keyword_tests(
    cases: Iterable[EvalCase], answers: Mapping[str, str], suites: Sequence[Suite] | None = None
) -> KeywordReport:
    """Run every suite over the cases it tests that have an answer in `answers`.

    Cases without an answer (e.g. the reader failed) are neither tested nor counted. Default suites:
    the built-in ones.
    """
    suites = BUILTIN_SUITES if suites is None else suites
    results = {suite.name: SuiteResult() for suite in suites}
    outcomes: dict[str, dict[str, float]] = {suite.name: {} for suite in suites}
    failing: list[KeywordFailure] = []
    for case in cases:
        answer = answers.get(case.id)
        if answer is None:
            continue
        for suite in suites:
            if not suite.tests_case(case):
                continue
            results[suite.name].cases_tested += 1
            word = suite.check(case, answer)
            outcomes[suite.name][case.id] = float(word is not None)
            if word is not None:
                results[suite.name].failures += 1
                failing.append(KeywordFailure(case_id=case.id, suite=suite.name, word=word, answer=answer))
    for result in results.values():
        if result.cases_tested:
            result.failure_rate = result.failures / result.cases_tested
    return KeywordReport(suites=results, failing=failing, outcomes=outcomes)
