"""How far to trust the judge's correctness scores: against the keyword tests, against a second judge
grading the same answers, and against human labels (`human_correctness` on eval cases).

Correctness 4-5 counts as "right", 1-2 as "wrong"; 3 decides nothing and is left out of the keyword
agreement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from pydantic import BaseModel

from ragbench.analysis.judge_repeats import Repeatability
from ragbench.review.agreement import agreement
from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import weighted_kappa

SCALE = (1, 2, 3, 4, 5)


class JudgedCase(BaseModel):
    """One judged answer with what else is known about it."""

    cell: str  # label
    answer_set: str  # names the answers: two judges of the same answers share it
    judge: str
    case_id: str
    correctness: int
    keyword_failures: list[str]  # "suite: word" of each failed keyword test
    keyword_tested: bool  # at least one keyword suite tested this answer


class Contradiction(BaseModel):
    cell: str
    case_id: str
    correctness: int
    keyword: str


class KeywordAgreement(BaseModel):
    compared: int  # answers with a decisive score (1-2 or 4-5) and at least one keyword test
    agreeing: int
    contradictions: list[Contradiction]  # judge 5 with a failed keyword test, judge 1 with none failed


class JudgePairAgreement(BaseModel):
    answers: str  # the answer set both judged
    first: str
    second: str
    cases: int
    kappa: float | None  # quadratic-weighted Cohen's kappa on correctness


class HumanAgreement(BaseModel):
    judge: str
    cases: int
    kappa: float | None
    exact: float  # share of answers with the human's score exactly
    confusion: list[list[int]]  # rows: human 1-5, columns: judge 1-5
    kappa_low: float | None = None  # the bootstrap interval of kappa (`ragbench.review.agreement`)
    kappa_high: float | None = None
    labels_needed: int | None = None  # more labels for the interval's half-width under 0.1


class Consistency(BaseModel):
    """One judge's self-consistency on one criterion, over answers it scored more than once."""

    judge: str
    criterion: str
    answers: int
    samples: int  # the most verdicts any answer got
    changed: float  # share of answers whose score was not the same in every sample
    mean_range: float  # mean over answers of (highest - lowest score)


class JudgeReliability(BaseModel):
    keyword: KeywordAgreement | None
    judge_pairs: list[JudgePairAgreement]
    human: list[HumanAgreement]
    consistency: list[Consistency] = []
    repeatability: list[Repeatability] = []  # from `evaluation.judge_repeats`, per judge, cell, criterion

    def lines(self) -> list[str]:
        """The terminal's view, one line per finding."""
        lines = []
        if self.keyword is not None and self.keyword.compared:
            k = self.keyword
            lines.append(
                f"judge vs keyword tests: agree on {k.agreeing} of {k.compared} answers "
                f"({k.agreeing / k.compared:.0%}); {len(k.contradictions)} contradiction(s) listed in the "
                "report"
            )
        lines += [
            f"judge agreement {p.first} vs {p.second} on the answers of {p.answers}: weighted kappa "
            f"{_kappa(p.kappa)} on {p.cases} answers"
            for p in self.judge_pairs
        ]
        lines += [
            f"judge {h.judge} vs human labels: weighted kappa {_kappa(h.kappa)}"
            + (f" {interval}" if (interval := interval_text(h.kappa_low, h.kappa_high, digits=2)) else "")
            + f", exact {h.exact:.0%} on {h.cases} answers"
            + (f" (about {h.labels_needed} more labels for +/-0.1)" if h.labels_needed else "")
            for h in self.human
        ]
        lines += [
            f"judge {c.judge} self-consistency on {c.criterion}: {c.changed:.0%} of {c.answers} answers "
            f"changed score over {c.samples} samples (mean range {c.mean_range:.2f})"
            for c in self.consistency
        ]
        lines += [r.line() for r in self.repeatability]
        return lines


def _kappa(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def keyword_agreement(judged: Sequence[JudgedCase]) -> KeywordAgreement | None:
    decisive = [j for j in judged if j.keyword_tested and j.correctness != 3]
    if not decisive:
        return None
    agreeing = sum((j.correctness >= 4) == (not j.keyword_failures) for j in decisive)
    contradictions = [
        Contradiction(
            cell=j.cell,
            case_id=j.case_id,
            correctness=j.correctness,
            keyword="failed " + "; ".join(j.keyword_failures) if j.keyword_failures else "passed every test",
        )
        for j in decisive
        if (j.correctness == 5 and j.keyword_failures) or (j.correctness == 1 and not j.keyword_failures)
    ]
    return KeywordAgreement(compared=len(decisive), agreeing=agreeing, contradictions=contradictions)


def judge_pairs(judged: Sequence[JudgedCase]) -> list[JudgePairAgreement]:
    """Every two judges that graded the same answer set, on the answers both scored."""
    by_set: dict[str, dict[str, dict[str, int]]] = {}
    for j in judged:
        by_set.setdefault(j.answer_set, {}).setdefault(j.judge, {})[j.case_id] = j.correctness
    pairs = []
    for answers, judges in by_set.items():
        for (first, a), (second, b) in combinations(sorted(judges.items()), 2):
            shared = sorted(set(a) & set(b))
            pairs.append(
                JudgePairAgreement(
                    answers=answers,
                    first=first,
                    second=second,
                    cases=len(shared),
                    kappa=weighted_kappa([a[c] for c in shared], [b[c] for c in shared], SCALE),
                )
            )
    return pairs


def human_agreement(labelled: Mapping[str, Sequence[tuple[int, int]]]) -> list[HumanAgreement]:
    """Each judge against the person: `labelled` maps a judge to (human score, judge score) pairs, one
    per human-labelled answer it graded."""
    found = []
    for judge, pairs in sorted(labelled.items()):
        if not pairs:
            continue
        measured = agreement(pairs, rubric="correctness", criterion="correctness", judge=judge)
        found.append(
            HumanAgreement(
                judge=judge,
                cases=len(pairs),
                kappa=measured.kappa,
                exact=measured.exact or 0.0,
                confusion=measured.confusion,
                kappa_low=measured.kappa_low,
                kappa_high=measured.kappa_high,
                labels_needed=measured.labels_needed,
            )
        )
    return found


def self_consistency(scores: Mapping[str, Mapping[str, Sequence[Sequence[int]]]]) -> list[Consistency]:
    """`scores`: judge -> criterion -> one list of sampled scores per answer (first sample included)."""
    found = []
    for judge, by_criterion in sorted(scores.items()):
        for criterion, per_answer in by_criterion.items():
            repeated = [list(samples) for samples in per_answer if len(samples) > 1]
            if not repeated:
                continue
            found.append(
                Consistency(
                    judge=judge,
                    criterion=criterion,
                    answers=len(repeated),
                    samples=max(map(len, repeated)),
                    changed=sum(len(set(samples)) > 1 for samples in repeated) / len(repeated),
                    mean_range=sum(max(samples) - min(samples) for samples in repeated) / len(repeated),
                )
            )
    return found


def judge_reliability(
    judged: Sequence[JudgedCase],
    sampled: Mapping[str, Mapping[str, Sequence[Sequence[int]]]] | None = None,
    labelled: Mapping[str, Sequence[tuple[int, int]]] | None = None,
    repeatability: Sequence[Repeatability] = (),
) -> JudgeReliability | None:
    """Everything known about the judge's reliability in a run; `sampled` as for `self_consistency`,
    `labelled` as for `human_agreement`."""
    consistency = self_consistency(sampled or {})
    human = human_agreement(labelled or {})
    if not judged and not consistency and not human and not repeatability:
        return None
    return JudgeReliability(
        keyword=keyword_agreement(judged),
        judge_pairs=judge_pairs(judged),
        human=human,
        consistency=consistency,
        repeatability=list(repeatability),
    )
