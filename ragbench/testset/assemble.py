"""From critiqued candidates to an eval set: keyword candidates, the threshold filter, de-duplication.

The result is in the benchmark's own case schema (`EvalCase`), with `provenance` saying which models
wrote and rated each case, its evolution type, every critique and the chunk(s) it came from. Rejected
cases are kept beside the kept ones, with the reasons.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragbench.inputs.conversation import question_in_context
from ragbench.inputs.eval_cases import CaseProvenance, EvalCase
from ragbench.llm.providers import provider_class
from ragbench.llm.types import Usage, total_cost
from ragbench.report.pages import html_page, html_section
from ragbench.scoring.keyword_tests import contains_phrase
from ragbench.testset.critique import CritiqueSet
from ragbench.testset.generate import Candidate, CandidateSet
from ragbench.testset.labels import (
    CandidateLabel,
    FilterAgreement,
    agreement_html,
    agreement_text,
    measure_filters,
)
from ragbench.testset.roundtrip import RoundtripSet
from ragbench.testset.rubrics import UNANSWERABLE

_TERM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.'-]*[A-Za-z0-9_]|[A-Za-z0-9]")


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def good_words(
    answer: str,
    question: str,
    passages: Sequence[str],
    document_frequency: Callable[[str], int],
    limit: int,
) -> list[str]:
    """Up to `limit` words of the answer that occur verbatim (as whole words) in its passages, rarest in
    the knowledge base first: the ones an answer cannot contain by chance. Stop words, one-letter words
    and words of the question or of its words' family ("raises" after "raise": a reader may just echo
    them) are left out."""
    stop = _stop_words()
    asked = [word.lower() for word in _TERM.findall(question) if len(word) >= 4]
    seen: set[str] = set()
    found: list[str] = []
    for term in _TERM.findall(answer):
        term = term.strip(".'-")
        key = term.lower()
        echoes = contains_phrase(question, term) or any(
            (key.startswith(word) or word.startswith(key)) and abs(len(key) - len(word)) <= 3
            for word in asked
            if len(key) >= 4
        )
        if len(term) < 2 or key in stop or key in seen or echoes:
            continue
        seen.add(key)
        if any(contains_phrase(passage, term) for passage in passages):
            found.append(term)
    found.sort(key=lambda term: (document_frequency(term), -len(term)))
    return found[:limit]


def corpus_frequency(texts: Sequence[str]) -> Callable[[str], int]:
    """How many of `texts` contain a word (as a whole word), memoised."""
    memo: dict[str, int] = {}

    def frequency(term: str) -> int:
        key = term.lower()
        if key not in memo:
            memo[key] = sum(contains_phrase(text, term) for text in texts)
        return memo[key]

    return frequency


def near_duplicates(vectors: np.ndarray, threshold: float) -> dict[int, tuple[int, float]]:
    """Greedy in order: row i is a duplicate of the first earlier kept row j with cosine >= threshold
    (rows normalised). Returns i -> (j, similarity)."""
    kept: list[int] = []
    duplicates: dict[int, tuple[int, float]] = {}
    for row in range(len(vectors)):
        if kept:
            similarities = vectors[kept] @ vectors[row]
            best = int(np.argmax(similarities))
            if similarities[best] >= threshold:
                duplicates[row] = (kept[best], float(similarities[best]))
                continue
        kept.append(row)
    return duplicates


class EvalSet(BaseModel):
    """A generated eval set: the kept cases (what a benchmark runs on), the rejected ones with their
    reasons, and the numbers of how it was made."""

    name: str
    cases: list[EvalCase]
    rejected: list[EvalCase]
    summary: dict[str, Any]

    def summary_text(self) -> str:
        """What the terminal says after `run.py testset`."""
        s = self.summary
        rejected = ", ".join(f"{n} by {critic}" for critic, n in s["rejected_by"].items()) or "none"
        kinds = ", ".join(f"{kind} {n['kept']}/{n['generated']}" for kind, n in s["by_evolution"].items())
        cost = s["cost_usd"]["total"]
        return (
            f"Eval set {self.name}: {s['kept']} kept of {s['generated']} generated from "
            f"{s['chunks_sampled']} chunks ({s['kept_per_100_chunks']} per 100 chunks).\n"
            f"Below a threshold: {rejected}; near-duplicates removed: {s['duplicates_removed']}; "
            f"no valid reply: generator {s['generator_invalid']}, critic {s['critic_invalid']}; "
            f"failed calls: generator {s['generator_failures']}, critic {s['critic_failures']}.\n"
            f"Kept/generated by type: {kinds}.\n"
            f"Generator {s['generator']} ({s['calls']['generator']} requests), critic {s['critic']} "
            f"({s['calls']['critic']} requests; a request's re-asks and retries are in the spend below), "
            f"{sum(s['tokens'].values())} tokens, cost "
            + ("unknown" if cost is None else f"${cost:.4f}")
            + (f"\n{agreement_text(self.agreement)}" if self.agreement else "")
        )

    @property
    def agreement(self) -> list[FilterAgreement]:
        """Each filter against a person's labels (testset.labels), when there were labels."""
        return [FilterAgreement.model_validate(row) for row in self.summary.get("filter_agreement", [])]

    @property
    def warnings(self) -> list[str]:
        """Said wherever the set's numbers appear: a small local critic decided what was kept."""
        critic = self.summary.get("critic", "")
        if not (critic and provider_class(critic).in_process):
            return []
        return [
            f"The critic is a small local model ({critic}): its ratings are noisy, so some good cases were "
            "rejected and some weak ones kept. Read the kept and rejected cases before relying on this set, "
            "or regenerate it with a stronger critic (testset.critic)."
        ]

    def html(self) -> str:
        """The set as a page: kept and rejected cases with every rating and reason, and the summary."""

        def row(case: EvalCase) -> dict[str, Any]:
            provenance = case.provenance
            assert provenance is not None
            ratings = {
                c.criterion: c.rating if c.rating is not None else "no rating" for c in provenance.critiques
            }
            return {
                "id": case.id,
                "type": provenance.evolution,
                "question": question_in_context(case.question, case.history),
                "reference_answer": case.reference_answer or f"({case.expected_behaviour})",
                "sources": ", ".join(c.source for c in provenance.source_chunks),
                "good_words": ", ".join(case.good_words),
                **ratings,
                **(
                    {
                        "roundtrip": "; ".join(
                            f"{c.passages}: {c.method or c.error}" for c in provenance.roundtrip
                        )
                    }
                    if provenance.roundtrip
                    else {}
                ),
                "rejected_because": "; ".join(provenance.rejected_because),
            }

        numbers = [
            {"": key, "value": json.dumps(value) if isinstance(value, dict | list) else value}
            for key, value in self.summary.items()
        ]
        return html_page(
            f"Eval set {self.name}",
            [
                html_section(f"Kept ({len(self.cases)})", [row(c) for c in self.cases]),
                html_section(f"Rejected ({len(self.rejected)})", [row(c) for c in self.rejected]),
                *([agreement_html(self.agreement)] if self.agreement else []),
                html_section("Summary", numbers),
            ],
            warnings=self.warnings,
        )

    def jsonl(self, which: str = "kept") -> str:
        cases = self.cases if which == "kept" else self.rejected
        return "".join(json.dumps(case.model_dump(mode="json"), ensure_ascii=False) + "\n" for case in cases)


def rejection_reasons(critiques: Sequence, thresholds: Mapping[str, int]) -> list[str]:
    reasons = []
    for critique in critiques:
        if critique.error is not None:
            what = "critic call failed" if critique.failed_call else "critic gave no valid rating"
            reasons.append(f"{critique.criterion}: {what} ({critique.error})")
        elif critique.rating < thresholds[critique.criterion]:
            reasons.append(f"{critique.criterion} {critique.rating} < {thresholds[critique.criterion]}")
    return reasons


def to_case(
    candidate: Candidate,
    provenance: CaseProvenance,
    frequency: Callable[[str], int],
    max_good_words: int,
) -> EvalCase:
    answerable = candidate.evolution != UNANSWERABLE
    answering = candidate.answer_chunks
    passages = [chunk.text for chunk in answering]
    return EvalCase(
        id=candidate.id,
        question=candidate.question or "",
        history=candidate.history,
        reference_answer=candidate.answer if answerable else None,
        expected_sources=list(dict.fromkeys(c.source for c in answering)) if answerable else [],
        good_words=good_words(
            candidate.answer or "", candidate.question or "", passages, frequency, max_good_words
        )
        if answerable
        else [],
        tags=["generated", candidate.evolution],
        expected_behaviour="answers" if answerable else "declines",
        provenance=provenance,
    )


def build_eval_set(
    name: str,
    candidates: CandidateSet,
    critiques: CritiqueSet | None,
    roundtrip: RoundtripSet | None,
    *,
    thresholds: Mapping[str, int],
    corpus_texts: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    duplicate_similarity: float,
    max_good_words: int,
    labels: Mapping[str, CandidateLabel] | None = None,
) -> EvalSet:
    """Keep a candidate when it passes every filter that ran (each critic's rating reached its threshold;
    the roundtrip reader's answers agreed), then drop near-duplicate questions among the kept (the earlier
    one stays). `embed` returns normalised question vectors. With `labels` (a person's verdicts) each
    filter's precision, recall and kappa against them are in the summary."""
    if critiques is None and roundtrip is None:
        raise ValueError("no filter ran: a generated set is never kept unchecked")
    frequency = corpus_frequency(corpus_texts)
    kept: list[EvalCase] = []
    rejected: list[EvalCase] = []
    rejected_by: dict[str, int] = {}
    decisions: dict[str, dict[str, bool]] = {}
    critic_failures = critic_invalid = 0
    for candidate in candidates.candidates:
        if candidate.question is None:
            continue
        reasons: list[str] = []
        entry = critiques.critiques.get(candidate.id) if critiques is not None else None
        verdicts = entry.critiques if entry else []
        if critiques is not None:
            critic_reasons = rejection_reasons(verdicts, thresholds) if verdicts else ["not critiqued"]
            decisions.setdefault("critics", {})[candidate.id] = not critic_reasons
            reasons += critic_reasons
        critic_failures += any(c.failed_call for c in verdicts)
        critic_invalid += any(c.error is not None and not c.failed_call for c in verdicts)
        for critique in verdicts:
            if critique.rating is not None and critique.rating < thresholds[critique.criterion]:
                rejected_by[critique.criterion] = rejected_by.get(critique.criterion, 0) + 1
        checked = roundtrip.verdicts.get(candidate.id) if roundtrip is not None else None
        if roundtrip is not None:
            decisions.setdefault("roundtrip", {})[candidate.id] = bool(checked and checked.kept)
            if checked is None or not checked.kept:
                reasons.append(f"roundtrip: {checked.reason if checked else 'not checked'}")
                rejected_by["roundtrip"] = rejected_by.get("roundtrip", 0) + 1
            critic_failures += bool(checked and any(check.failed_call for check in checked.checks))
        provenance = CaseProvenance(
            generator=candidates.generator,
            critic=(critiques or roundtrip).critic,  # type: ignore[union-attr]
            evolution=candidate.evolution,
            source_chunks=candidate.chunks,
            seed_question=candidate.seed_question,
            critiques=verdicts,
            roundtrip=checked.checks if checked else [],
            checked_against=[f"{c.source}@{c.start_index}" for c in entry.retrieved] if entry else [],
            rejected_because=reasons,
        )
        (rejected if reasons else kept).append(to_case(candidate, provenance, frequency, max_good_words))
    # a follow-up is compared as asked, after its conversation: "what is its default?" after two different
    # first questions are two different cases
    asked = [question_in_context(case.question, case.history) for case in kept]
    duplicates = near_duplicates(embed(asked), duplicate_similarity) if kept else {}
    for row, (original, similarity) in sorted(duplicates.items()):
        case = kept[row]
        assert case.provenance is not None
        case.provenance.rejected_because.append(
            f"near-duplicate of {kept[original].id} (cosine {similarity:.2f})"
        )
        rejected.append(case)
    kept = [case for row, case in enumerate(kept) if row not in duplicates]
    usage = [entry.usage for entry in critiques.critiques.values()] if critiques else []
    usage += [verdict.usage for verdict in roundtrip.verdicts.values()] if roundtrip else []
    summary = _summary(
        candidates,
        (critiques or roundtrip).critic,  # type: ignore[union-attr]
        usage,
        kept,
        rejected_by,
        (critic_failures, critic_invalid),
        len(duplicates),
    )
    summary |= {
        "filters": list(decisions),
        "thresholds": dict(thresholds) if critiques is not None else {},
        "duplicate_similarity": duplicate_similarity,
    }
    if labels:
        questions = {c.id: c.question for c in candidates.candidates}
        rows = measure_filters(decisions, labels, questions)
        summary["filter_agreement"] = [row.model_dump(mode="json") for row in rows]
    return EvalSet(name=name, cases=kept, rejected=rejected, summary=summary)


def _summary(
    candidates: CandidateSet,
    critic: str,
    critic_usage: Sequence[Usage],
    kept: list[EvalCase],
    rejected_by: dict[str, int],
    critic_problems: tuple[int, int],
    duplicates: int,
) -> dict[str, Any]:
    by_evolution: dict[str, dict[str, int]] = {}
    for candidate in candidates.candidates:
        counts = by_evolution.setdefault(candidate.evolution, {"planned": 0, "generated": 0, "kept": 0})
        counts["planned"] += 1
        counts["generated"] += candidate.question is not None
    for case in kept:
        by_evolution[case.case_type or ""]["kept"] += 1
    generator_usage = [c.usage for c in candidates.candidates]
    generator_cost = total_cost(u.cost_usd for u in generator_usage)
    critic_cost = total_cost(u.cost_usd for u in critic_usage)
    # sampled chunks, not candidates: with testset.questions_per_chunk > 1 a chunk seeds several
    chunks = len({(c.chunks[0].source, c.chunks[0].start_index) for c in candidates.candidates if c.chunks})
    return {
        "generator": candidates.generator,
        "critic": critic,
        "chunks_sampled": chunks,
        "generated": sum(c.question is not None for c in candidates.candidates),
        "generator_failures": candidates.failures,
        "generator_invalid": sum(c.invalid is not None for c in candidates.candidates),
        "critic_failures": critic_problems[0],
        "critic_invalid": critic_problems[1],
        "not_generated": [
            {"id": c.id, "evolution": c.evolution, "reason": c.error or c.invalid}
            for c in candidates.candidates
            if c.question is None
        ],
        "rejected_by": rejected_by,
        "duplicates_removed": duplicates,
        "kept": len(kept),
        "kept_per_100_chunks": round(100 * len(kept) / chunks, 1) if chunks else 0.0,
        "by_evolution": by_evolution,
        "calls": {
            "generator": sum(u.calls for u in generator_usage),
            "critic": sum(u.calls for u in critic_usage),
        },
        "tokens": {
            "generator_prompt": sum(u.prompt_tokens for u in generator_usage),
            "generator_completion": sum(u.completion_tokens for u in generator_usage),
            "critic_prompt": sum(u.prompt_tokens for u in critic_usage),
            "critic_completion": sum(u.completion_tokens for u in critic_usage),
        },
        "cost_usd": {
            "generator": generator_cost,
            "critic": critic_cost,
            "total": total_cost([generator_cost, critic_cost]),
        },
    }
