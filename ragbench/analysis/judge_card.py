"""The judge card: how often a judge catches errors planted in reference answers
(`ragbench.scoring.planted`), and how often it fails the unchanged reference, each with its Wilson
interval, beside its parse failures and time per verdict.

Whether each planted answer is wrong is known by construction, so the card needs no person's labels and
can be made on every run, for every judge. Planted errors are cruder than a reader's own mistakes: a
judge that misses them is blind, one that catches them all may still miss subtler ones (`CAVEAT`).

Reliable rule (`JudgeCard.reliable`): a judge is called reliable when, on the counted error kinds pooled,
it catches at least `min_detection` of the planted errors, and it passes at least that share of the
unchanged references (else a judge that fails every answer would catch every error). Point estimates
decide, so the label says what this sample shows; the intervals beside them say how sure that is. A card
with no planted error or no unchanged reference scored has shown nothing and cannot call a judge reliable.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import NamedTuple

from pydantic import BaseModel

from ragbench.hashing import seeded_rank
from ragbench.inputs.eval_cases import EvalCase, name_cases
from ragbench.scoring.planted import PLANTED_KINDS, UNCHANGED, plant_errors
from ragbench.scoring.rubrics import JudgeInput, Scale
from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import wilson_interval

CAVEAT = (
    "Planted errors are cruder than the mistakes readers really make, so a judge catches them more easily: "
    "this card bounds the judge's blindness from below only. How well it grades real answers is measured "
    "by a person's labels (human_correctness on eval cases)."
)


class PlantedVerdict(BaseModel):
    """The judge's verdict on one planted (or unchanged) answer. `score` is None when the judge gave no
    valid verdict; `seconds` None when the time is not known. `passed` (the judge scored the answer as
    right) is filled in by `build_card` from the score."""

    case_id: str
    kind: str
    change: str
    score: int | None
    seconds: float | None = None
    passed: bool | None = None
    refused: bool = False  # the run's spend cap did not send its call: not the judge's failure


class Detection(BaseModel):
    """The planted errors of one kind the judge scored (`n`) and failed (`detected`); `rate`, `low` and
    `high` are None when it scored none."""

    kind: str
    n: int
    detected: int
    rate: float | None
    low: float | None
    high: float | None


class FalseAlarms(BaseModel):
    """The unchanged references the judge scored (`n`) and failed all the same (`false_alarms`)."""

    n: int
    false_alarms: int
    rate: float | None
    low: float | None
    high: float | None


class JudgeCard(BaseModel):
    """One judge's card on one rubric's criterion; `verdicts` hold every answer each number counts."""

    judge: str
    rubric: str
    criterion: str
    scale: Scale
    pass_at: int  # a 1-5 score at or above it passes the answer (pass/fail: the verdict pass)
    confidence: float
    min_detection: float
    cases: int
    detection: list[Detection]  # per planted kind that occurred, in PLANTED_KINDS order
    counted_kinds: list[str]  # the kinds pooled in overall_detection
    overall_detection: Detection
    false_alarms: FalseAlarms
    parse_failures: int
    refused_by_budget: int = 0  # verdicts the spend cap never asked for: the card is partial
    seconds_per_verdict: float | None
    reliable: bool
    verdicts: list[PlantedVerdict]
    caveat: str = CAVEAT

    def summary(self) -> str:
        """One line for a label beside the judge's numbers: errors caught and references failed."""
        overall, alarms = self.overall_detection, self.false_alarms
        return (
            f"caught {overall.detected} of {overall.n} planted errors, failed {alarms.false_alarms} of "
            f"{alarms.n} unchanged references (judge card)"
        )


class PlantedInput(NamedTuple):
    """One answer to send the judge: the case with a planted (or unchanged) answer, and what was planted."""

    input: JudgeInput
    kind: str
    change: str


def sample_cases(cases: Sequence[EvalCase], n: int, seed: int) -> list[EvalCase]:
    """`n` of the cases that have a reference answer, in their eval-set order. Each case's place in the
    draw hangs on its id and the seed alone, so appending cases to the set keeps the sampled ones unless
    a new case outranks them, and reordering the set changes nothing."""
    if n < 0:
        raise ValueError(f"the number of sampled cases cannot be negative, got {n}")
    eligible = [case for case in cases if case.reference_answer and case.reference_answer.strip()]
    chosen = {id(case) for case in sorted(eligible, key=lambda case: seeded_rank(seed, case.id))[:n]}
    return [case for case in eligible if id(case) in chosen]


def planted_inputs(cases: Sequence[EvalCase], vocabulary: Sequence[str], seed: int) -> list[PlantedInput]:
    """The judge inputs of every case with a reference answer (others are skipped): each planted answer
    with the real reference to compare against, the case's question and tags, and no passages. The
    planted errors are seeded by `seed` and the case id, so each case gets its own draw."""
    planted = []
    for case in cases:
        if not (case.reference_answer and case.reference_answer.strip()):
            continue
        case_seed = int.from_bytes(seeded_rank(seed, case.id)[:8], "big")
        for answer in plant_errors(case.reference_answer, vocabulary=vocabulary, seed=case_seed):
            item = JudgeInput(
                case_id=case.id,
                question=case.question,
                history=case.history,
                answer=answer.answer,
                reference_answer=case.reference_answer,
                tags=list(case.tags),
            )
            planted.append(PlantedInput(item, answer.kind, answer.change))
    return planted


# A 1-5 score at or above it passes an answer: the card's default and the judge repeats' threshold.
PASS_AT = 4


def passed(score: int | None, scale: Scale, pass_at: int = PASS_AT) -> bool | None:
    """Whether a verdict passes the answer: a 1-5 score at or above `pass_at`, or the verdict pass; None
    for no verdict. The one pass threshold the card and the judge repeats share."""
    if score is None:
        return None
    if scale == "pass_fail":
        if score not in (0, 1):
            raise ValueError(f"a pass/fail score is 0 or 1, got {score}")
        return score == 1
    if not 1 <= score <= 5:
        raise ValueError(f"a 1-5 score lies in 1..5, got {score}")
    return score >= pass_at


def _detection(kind: str, verdicts: Sequence[PlantedVerdict], confidence: float) -> Detection:
    scored = [v for v in verdicts if v.passed is not None]
    detected = sum(not v.passed for v in scored)
    interval = wilson_interval(detected, len(scored), confidence)
    return Detection(
        kind=kind,
        n=len(scored),
        detected=detected,
        rate=detected / len(scored) if scored else None,
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
    )


def build_card(
    verdicts: Sequence[PlantedVerdict],
    *,
    judge: str,
    rubric: str,
    criterion: str,
    min_detection: float,
    confidence: float,
    pass_at: int = PASS_AT,
    scale: Scale = "1-5",
    counted_kinds: Sequence[str] = PLANTED_KINDS,
) -> JudgeCard:
    """The card of a judge's verdicts on planted and unchanged answers (see the module for the reliable
    rule). Parse failures (score None) are left out of every rate and counted apart. `counted_kinds`: the
    error kinds the overall detection pools, e.g. without `unsupported` for a rubric that lets extra
    claims pass (the correctness rubric accepts extra details that do not contradict the reference)."""
    if not 0 < min_detection <= 1:
        raise ValueError(f"min_detection must lie in (0, 1], got {min_detection}")
    if scale == "1-5" and not 2 <= pass_at <= 5:
        raise ValueError(f"pass_at must lie in 2..5 on a 1-5 scale, got {pass_at}")
    known = {UNCHANGED, *PLANTED_KINDS}
    if unknown := sorted(({v.kind for v in verdicts} - known) | (set(counted_kinds) - set(PLANTED_KINDS))):
        raise ValueError(f"unknown planted kind(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    verdicts = [v.model_copy(update={"passed": passed(v.score, scale, pass_at)}) for v in verdicts]
    errors = [v for v in verdicts if v.kind != UNCHANGED]
    detection = [
        _detection(kind, [v for v in errors if v.kind == kind], confidence)
        for kind in PLANTED_KINDS
        if any(v.kind == kind for v in errors)
    ]
    overall = _detection("all", [v for v in errors if v.kind in counted_kinds], confidence)
    unchanged = _detection(UNCHANGED, [v for v in verdicts if v.kind == UNCHANGED], confidence)
    false_alarms = FalseAlarms(
        n=unchanged.n,
        false_alarms=unchanged.detected,
        rate=unchanged.rate,
        low=unchanged.low,
        high=unchanged.high,
    )
    seconds = [v.seconds for v in verdicts if v.seconds is not None]
    reliable = (
        overall.rate is not None
        and false_alarms.rate is not None
        and overall.rate >= min_detection
        and 1 - false_alarms.rate >= min_detection
    )
    return JudgeCard(
        judge=judge,
        rubric=rubric,
        criterion=criterion,
        scale=scale,
        pass_at=pass_at,
        confidence=confidence,
        min_detection=min_detection,
        cases=len({v.case_id for v in verdicts}),
        detection=detection,
        counted_kinds=[kind for kind in PLANTED_KINDS if kind in counted_kinds],
        overall_detection=overall,
        false_alarms=false_alarms,
        parse_failures=sum(v.score is None and not v.refused for v in verdicts),
        refused_by_budget=sum(v.refused for v in verdicts),
        seconds_per_verdict=fmean(seconds) if seconds else None,
        reliable=reliable,
        verdicts=verdicts,
    )


def _share(count: int, n: int, low: float | None, high: float | None, confidence: float) -> str:
    """``7/8 (88%, 95% CI 53-98%)``."""
    if n == 0 or low is None or high is None:
        return f"{count}/{n} (no verdict)"
    interval = interval_text(low, high, digits=0, percent_range=True)
    return f"{count}/{n} ({count / n:.0%}, {confidence:.0%} CI {interval})"


def _unreliable_because(card: JudgeCard) -> str:
    overall, alarms = card.overall_detection, card.false_alarms
    if overall.rate is None or alarms.rate is None:
        return "no planted error or no unchanged reference was scored, so the card shows nothing"
    reasons = []
    if overall.rate < card.min_detection:
        reasons.append(f"catches {overall.rate:.0%} of the planted errors, below {card.min_detection:.0%}")
    if 1 - alarms.rate < card.min_detection:
        reasons.append(f"passes only {1 - alarms.rate:.0%} of the unchanged references")
    return "; ".join(reasons)


def card_lines(card: JudgeCard) -> list[str]:
    """The card as the terminal shows it: detection per kind and pooled, false alarms, parse failures,
    time per verdict, the UNRELIABLE label when it applies, and the caveat."""
    passing = f"score >= {card.pass_at}" if card.scale == "1-5" else "verdict pass"
    overall, alarms = card.overall_detection, card.false_alarms
    rows = [
        *((f"caught {d.kind}", d.detected, d.n, d.low, d.high) for d in card.detection),
        (
            f"caught overall ({', '.join(card.counted_kinds)})",
            overall.detected,
            overall.n,
            overall.low,
            overall.high,
        ),
        ("false alarms on unchanged references", alarms.false_alarms, alarms.n, alarms.low, alarms.high),
    ]
    timing = (
        "time unknown" if card.seconds_per_verdict is None else f"{card.seconds_per_verdict:.2f} s/verdict"
    )
    verdict = (
        f"reliable: catches at least {card.min_detection:.0%} of the planted errors, passes that share of "
        "the unchanged references"
        if card.reliable
        else f"UNRELIABLE: {_unreliable_because(card)}"
    )
    return [
        f"Judge card of {card.judge} ({card.rubric} rubric, {card.criterion}; passes at {passing}), "
        f"{card.cases} cases ({name_cases(list(dict.fromkeys(v.case_id for v in card.verdicts)))}):",
        *(f"  {label} {_share(count, n, low, high, card.confidence)}" for label, count, n, low, high in rows),
        f"  parse failures {card.parse_failures} of {len(card.verdicts)} verdicts; {timing}",
        *(
            [f"  PARTIAL: the spend cap left {card.refused_by_budget} verdict(s) unasked (raise the budget)"]
            if card.refused_by_budget
            else []
        ),
        f"  {verdict}",
        f"  {card.caveat}",
    ]
