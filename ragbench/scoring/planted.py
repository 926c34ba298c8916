"""Planted errors: wrong versions of a reference answer, made by fixed rules, to test a judge on.

Each kind is a mistake readers make: a wrong number, the wrong named thing, the claim turned around, a
claim the reference never makes, a refusal. No LLM writes them, so whether each answer is wrong is known
by construction, and the same reference, vocabulary and seed give the same answers in every run. The
unchanged reference comes first: a judge must pass it, or its detections mean nothing.

The rules are shallow on purpose (a word swapped, a "not" added): they make errors a judge should never
miss, not the subtle ones real readers make (see `ragbench.analysis.judge_card`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

UNCHANGED = "unchanged"
PLANTED_KINDS = ("number", "entity", "negation", "unsupported", "refusal")


@dataclass(frozen=True)
class PlantedAnswer:
    """One answer to grade: the reference itself (`kind` "unchanged") or one with an error planted.
    `change` says in a few words what was changed, for the card's list of verdicts."""

    kind: str
    answer: str
    change: str


# --------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------

# Digits not inside a word or literal (2j, 0o123, 1.5B): a sign only where it cannot be a subtraction.
_DIGITS = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)*(?![\w]|\.\d)")
_OPERATORS = set("*+/^%=<>-")
# "one" is never changed (only written): in answers it is mostly a pronoun ("the one from the finally block").
_SPELLED = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven")
_SPELLED_WORD = re.compile(r"(?<![\w-])(" + "|".join((_SPELLED[0], *_SPELLED[2:])) + r")\b", re.IGNORECASE)


def _other_number(text: str, rng: random.Random) -> str:
    """A nearby value a reader could plausibly get wrong: the next or previous one, or double."""
    if "." in text:  # a version or decimal: move one of its parts by one
        parts = text.split(".")
        choices = []
        for index in (0, len(parts) - 1):
            for step in (-1, 1):
                value = int(parts[index]) + step
                if value >= 0:
                    changed = [*parts[:index], str(value), *parts[index + 1 :]]
                    choices.append(".".join(changed))
        return rng.choice(sorted(set(choices)))
    value = int(text)
    options = {value - 1, value + 1, -value} if value < 0 else {value + 1, value - 1, value * 2}
    kept = sorted(option for option in options if option != value and (value < 0 or option >= 0))
    return str(rng.choice(kept))


def _same_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _in_formula(text: str, match: re.Match[str]) -> bool:
    before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
    return bool({before, after} & _OPERATORS)


def _plant_number(reference: str, rng: random.Random) -> PlantedAnswer | None:
    """Digits are surely numbers, so they are changed first, standing alone before inside a formula (where
    `1**2` -> `1**1` may keep the answer true); spelled numbers only when there are no digits."""
    found = list(_DIGITS.finditer(reference))
    alone = [match for match in found if not _in_formula(reference, match)]
    if found:
        match = rng.choice(alone or found)
        new = _other_number(match.group(), rng)
    else:
        found = list(_SPELLED_WORD.finditer(reference))
        if not found:
            return None
        match = rng.choice(found)
        index = _SPELLED.index(match.group().lower())
        steps = [step for step in (-1, 1, 2) if 0 <= index + step < len(_SPELLED)]
        new = _same_case(_SPELLED[index + rng.choice(steps)], match.group())
    answer = reference[: match.start()] + new + reference[match.end() :]
    return PlantedAnswer("number", answer, f"{match.group()} -> {new}")


# --------------------------------------------------------------------------------------------------
# Named things: identifiers and capitalised terms, by shape
# --------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_OPENERS = " \t\r\n\"'`([*•-"
_QUOTES = {"`", '"', "'"}
# Code names make the most convincing swaps; a capitalised word is swapped only when there is none.
_CODE_SHAPES = ("dunder", "dotted", "snake", "camel", "call", "upper", "name")
_NAMED_IN_CLAIMS = ("dunder", "dotted", "snake", "camel", "call")
_CALL = "()"


def term_shape(term: str) -> str | None:
    """The shape of a term, which a swap keeps: `__x__` dunder, `a.b` dotted, `a_b` snake, `AbCd` or `abCd`
    camel, `ABC` upper, `Abc` capitalised, `abc()` call, `abc` name; None for no term (`_`, `x`, `e.g`)."""
    if term.endswith(_CALL):
        return "call" if term_shape(term.removesuffix(_CALL)) == "name" else None
    if not _TOKEN.fullmatch(term):
        return None
    if "." in term:
        return "dotted" if max(len(part) for part in term.split(".")) >= 3 else None
    if len(term.strip("_")) < 2:
        return None
    if term.startswith("__") and term.endswith("__"):
        return "dunder"
    if "_" in term:
        return "snake"
    if term.isupper():
        return "upper"
    if any(char.isupper() for char in term[1:]):
        return "camel"
    return "capitalised" if term[0].isupper() else "name"


def _sentence_start(text: str, start: int) -> bool:
    """Whether a word opens a sentence, a paragraph or the text (where any word is capitalised)."""
    window = text[max(0, start - 200) : start]
    lead = window.rstrip(_OPENERS)
    return not lead or lead[-1] in ".!?:" or "\n\n" in window[len(lead) :].replace(" ", "")


@dataclass(frozen=True)
class _Name:
    """One occurrence of a named thing: `term` as the vocabulary keeps it (a call with its `()`)."""

    term: str
    shape: str
    start: int
    end: int
    in_code: bool


def _names(text: str, known: frozenset[str] = frozenset()) -> list[_Name]:
    """Every occurrence of a named thing: a code name; a capitalised word not opening a sentence (or one the
    knowledge base names, wherever it stands); a lowercase word only when called (`find(`), or quoted as
    a whole outside a code span (inside one it is a string literal)."""
    code = [span.span() for span in re.finditer(r"`[^`\n]*`", text)]
    names = []
    for match in _TOKEN.finditer(text):
        term, start, end = match.group(), match.start(), match.end()
        in_code = any(low < start < high for low, high in code)
        shape = term_shape(term)
        if shape == "capitalised" and term not in known and _sentence_start(text, start):
            continue
        if shape == "name":
            if text[end : end + 1] == "(":
                term, shape = term + _CALL, "call"
            elif in_code or not (
                start and text[start - 1] in _QUOTES and text[end : end + 1] == text[start - 1]
            ):
                continue
        if shape:
            names.append(_Name(term, shape, start, end, in_code))
    return names


def knowledge_vocabulary(texts: Iterable[str], limit: int = 500) -> list[str]:
    """The knowledge base's own names (identifiers, calls as `name()`, capitalised terms), most frequent first
    and ties alphabetical: what entity swaps and unsupported claims draw from, so they sound like the
    documents. A capitalised word is kept only when it is written so more often than in lower case: that
    keeps names (None, Python) and drops words capitalised by headings (Sequence, Patterns)."""
    names: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for text in texts:
        names.update(name.term for name in _names(text))
        lower.update(re.findall(r"\b[a-z]+\b", text))
    kept = [term for term in names if term_shape(term) != "capitalised" or names[term] > lower[term.lower()]]
    return sorted(kept, key=lambda term: (-names[term], term))[:limit]


def _hump(term: str) -> str:
    """The last capitalised part of a camel-case name (`Error` of `TypeError`): a swap that keeps it
    stays plausible."""
    humps = re.findall(r"[A-Z][a-z0-9]+", term)
    return humps[-1] if humps else ""


def _plant_entity(reference: str, vocabulary: Sequence[str], rng: random.Random) -> PlantedAnswer | None:
    """One name swapped at its first occurrence for a frequent name of the same shape that the reference
    does not use. Only that occurrence changes: swapping every one would keep an example with a
    placeholder name (`class Foo:`) true."""
    used = {word.lower() for word in re.findall(r"\w+", reference)}
    pools: dict[str, list[str]] = {}
    for term in dict.fromkeys(vocabulary):
        shape = term_shape(term)
        words = re.findall(r"\w+", term)
        if shape and not any(word.lower() in used for word in words):
            pools.setdefault(shape, []).append(term)
    names = [name for name in _names(reference, frozenset(vocabulary)) if name.shape in pools]
    if not names:
        return None
    # outside code before inside it, code names before capitalised words
    groups = [
        [name for name in names if name.in_code == in_code and (name.shape in _CODE_SHAPES) == code_shape]
        for in_code in (False, True)
        for code_shape in (True, False)
    ]
    group = next(group for group in groups if group)
    first = {name.term: name for name in reversed(group)}  # each term at its first occurrence
    chosen = first[rng.choice(sorted(first, key=lambda term: first[term].start))]
    pool = pools[chosen.shape]
    if chosen.shape == "camel":
        pool = [term for term in pool if _hump(term) == _hump(chosen.term)] or pool
    # among the most frequent names, which a reader would mix up; capitalised words thin out fastest
    new = rng.choice(pool[: 5 if chosen.shape == "capitalised" else 20]).removesuffix(_CALL)
    answer = reference[: chosen.start] + new + reference[chosen.end :]
    return PlantedAnswer("entity", answer, f"{reference[chosen.start : chosen.end]} -> {new}")


# --------------------------------------------------------------------------------------------------
# Negation: the first claim of the answer (where references state it) turned around
# --------------------------------------------------------------------------------------------------

_AUXILIARIES = "is|are|was|were|does|do|did|has|have|had|will|would|should|could|must|may|might"
# Third-person verbs the answers lead with, and the form that follows "does not".
_VERBS = {
    "raises": "raise",
    "returns": "return",
    "yields": "yield",
    "runs": "run",
    "calls": "call",
    "makes": "make",
    "creates": "create",
    "produces": "produce",
    "becomes": "become",
    "gets": "get",
    "signals": "signal",
    "contains": "contain",
    "includes": "include",
    "uses": "use",
    "keeps": "keep",
    "refers": "refer",
    "requires": "require",
    "allows": "allow",
    "supports": "support",
    "accepts": "accept",
    "binds": "bind",
    "happens": "happen",
    "evaluates": "evaluate",
    "stores": "store",
    "copies": "copy",
    "applies": "apply",
    "excludes": "exclude",
}
_NOT_AFTER = r"(?!\s+(?:not|no|never|nothing)\b)(?!n't)"
# (pattern, replacement) in priority order: where two match at the same place, the first listed wins.
_NEGATIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"^(Yes|No)(?=[.,;:!]|$)", "{yes_no}"),
        (r"^Not\s+(\w+)", "{upper1}"),
        (rf"\b({_AUXILIARIES}|can|need)\s+not\b", "{1}"),
        (r"\bcannot\b", "can"),
        (r"\bcan't\b", "can"),
        (r"\bwon't\b", "will"),
        (rf"\b({_AUXILIARIES}|need)n't\b", "{1}"),
        (r"\b(is|are|was|were) always\b", "{1} never"),
        (r"\bnever\b", "always"),
        (r"\balways\b", "never"),
        (r"\b(has|have) been\b", "{1} not been"),
        (r"\bhas\b" + _NOT_AFTER, "does not have"),
        (r"\bcan\b" + _NOT_AFTER, "cannot"),
        (rf"\b(is|are|was|were|does|do|did|will|would|should|could|must|may|might)\b{_NOT_AFTER}", "{1} not"),
        (r"\b(" + "|".join(_VERBS) + r")\b", "{verb}"),
        (r"\b(True|False|true|false)\b", "{truth}"),
    )
)
_OPPOSITE = {"Yes": "No", "No": "Yes", "True": "False", "False": "True", "true": "false", "false": "true"}


def _negated(match: re.Match[str], replacement: str) -> str:
    group = match.group(1) if match.re.groups else ""
    if replacement == "{yes_no}" or replacement == "{truth}":
        return _OPPOSITE[group]
    if replacement == "{upper1}":
        return group[:1].upper() + group[1:]
    if replacement == "{verb}":
        return _same_case("does not " + _VERBS[group.lower()], group)
    return _same_case(replacement.replace("{1}", group), match.group())


def _plant_negation(reference: str) -> PlantedAnswer | None:
    """The earliest claim a template can turn around, outside code spans: answers lead with their claim."""
    code = [span.span() for span in re.finditer(r"`[^`]*`", reference)]
    best: tuple[int, int, re.Match[str], str] | None = None
    for priority, (pattern, replacement) in enumerate(_NEGATIONS):
        for match in pattern.finditer(reference):
            if any(start <= match.start() < end for start, end in code):
                continue
            if best is None or (match.start(), priority) < best[:2]:
                best = (match.start(), priority, match, replacement)
            break
    if best is None:
        return None
    match, replacement = best[2], best[3]
    new = _negated(match, replacement)
    answer = reference[: match.start()] + new + reference[match.end() :]
    return PlantedAnswer("negation", answer, f"{match.group()} -> {new}")


# --------------------------------------------------------------------------------------------------
# A claim the reference does not make, and a refusal
# --------------------------------------------------------------------------------------------------

_CLAIMS = (
    "Since version {version}, {term} behaves differently here and the old form is deprecated.",
    "This only holds when {term} is enabled, which has been the default since version {version}.",
    "Internally {term} is consulted first, which makes this roughly twice as fast.",
    "The same rule was extended to {term} in version {version}.",
    "Before version {version} this raised a warning unless {term} was set explicitly.",
)
_REFUSALS = (
    "The documents I was given do not answer this question.",
    "I cannot tell from the provided passages; they do not cover this.",
    "There is not enough information in the given context to answer this.",
)


def _plant_unsupported(reference: str, vocabulary: Sequence[str], rng: random.Random) -> PlantedAnswer:
    """A sentence with a version number and a knowledge-base name, in the tone of the documents, that the
    reference says nothing about (so no judge can check it against the reference and find it there)."""
    terms = [term for term in dict.fromkeys(vocabulary) if term_shape(term) in _NAMED_IN_CLAIMS]
    terms = [term for term in terms[:50] if term.removesuffix(_CALL) not in reference]
    term = rng.choice(terms) if terms else "this setting"
    version = f"{rng.randint(2, 3)}.{rng.randint(0, 9)}"
    claim = rng.choice(_CLAIMS).format(term=term, version=version)
    joiner = " " if reference[-1] in ".!?" else ". "
    return PlantedAnswer("unsupported", reference + joiner + claim, f"adds a claim about {term}")


def _plant_refusal(reference: str, rng: random.Random) -> PlantedAnswer:
    refusal = rng.choice([text for text in _REFUSALS if text != reference])
    return PlantedAnswer("refusal", refusal, "refuses to answer")


def plant_errors(reference: str, *, vocabulary: Sequence[str], seed: int) -> list[PlantedAnswer]:
    """The unchanged reference, then one planted error per kind of `PLANTED_KINDS` that applies to it, in
    that order; `unsupported` and `refusal` always apply. Each kind draws from its own generator, seeded
    from `seed`, the kind and the reference: a kind's answer does not move when another kind's rules
    change, and references planted with one seed still get different draws.

    `vocabulary` is the knowledge base's names (`knowledge_vocabulary`); without it there is no entity
    swap and the unsupported claim names no term of the documents."""
    reference = reference.strip()
    if not reference:
        raise ValueError("a reference answer is needed to plant errors in, got a blank one")

    def rng(kind: str) -> random.Random:
        return random.Random(f"{seed}/{kind}/{reference}")

    planted = [
        PlantedAnswer(UNCHANGED, reference, "none"),
        _plant_number(reference, rng("number")),
        _plant_entity(reference, vocabulary, rng("entity")),
        _plant_negation(reference),
        _plant_unsupported(reference, vocabulary, rng("unsupported")),
        _plant_refusal(reference, rng("refusal")),
    ]
    return [answer for answer in planted if answer is not None]
