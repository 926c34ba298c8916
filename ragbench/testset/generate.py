"""The generator's calls: a plain question and answer per chunk, then the planned evolutions (a
follow-up's evolution writes the next question of a conversation that the plain pair opens).

Two batches through the one LLM client (cached, retried, counted, concurrent where the provider
allows): first every plain and unanswerable question, then every rewrite of a plain question into its
evolution. A failed call leaves its candidate without a question and with the error: it is counted,
never kept, and the step that made it is not reused from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragbench.inputs.conversation import Turn
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.llm.client import LLMClient
from ragbench.llm.prompts import data_section
from ragbench.llm.types import LLMRequest, LLMResult, Usage
from ragbench.testset.plan import Seed
from ragbench.testset.rubrics import (
    EVOLUTIONS,
    GENERATOR_SYSTEM,
    SIMPLE_TASK,
    UNANSWERABLE,
    UNANSWERABLE_TASK,
    GeneratedQA,
    GeneratedQAs,
    GeneratedQuestion,
    GeneratedQuestions,
    is_follow_up,
    passages_text,
    several,
)


class Candidate(BaseModel):
    """One generated case before critique. `question` is None when the generator gave none: `error` when
    its call failed (counted as a failure: a later run retries it), `invalid` when it answered but never
    with a valid question, e.g. one that mentions "the passage" (the case is rejected with that reason)."""

    id: str
    evolution: str
    chunks: list[SourceChunk]
    # A follow-up's conversation: the plain question and its answer, before `question` (see
    # `rubrics.Evolution.follow_up`); empty for every other kind.
    history: list[Turn] = []
    question: str | None = None
    answer: str | None = None
    seed_question: str | None = None
    error: str | None = None
    invalid: str | None = None
    usage: Usage = Usage()

    @property
    def answer_chunks(self) -> list[SourceChunk]:
        """The passages that answer `question`: a follow-up's last one (its first answered the history),
        else all of them. What its expected sources, keywords and roundtrip source read come from."""
        return self.chunks[-1:] if self.history else self.chunks

    def record_failure(self, result: LLMResult, stage: str) -> None:
        self.question = self.answer = None
        message = f"{stage}: {result.error or 'no valid reply'}"
        if result.invalid_reply:
            self.invalid = message
        else:
            self.error = message


class CandidateSet(BaseModel):
    generator: str
    candidates: list[Candidate]

    @property
    def failures(self) -> int:
        """Candidates whose generator call failed (not those whose replies were invalid)."""
        return sum(candidate.error is not None for candidate in self.candidates)


def first_request(seed: Seed, audience: str, questions: int = 1) -> LLMRequest:
    """The plain question (or, for an unanswerable seed, the question the passage does not answer);
    `questions` > 1 asks for that many different ones in the one call."""
    unanswerable = seed.evolution == UNANSWERABLE
    task = UNANSWERABLE_TASK if unanswerable else SIMPLE_TASK
    if questions > 1:
        task = several(task, questions)
        schema: type[BaseModel] = GeneratedQuestions if unanswerable else GeneratedQAs
    else:
        schema = GeneratedQuestion if unanswerable else GeneratedQA
    return LLMRequest(
        [
            {"role": "system", "content": GENERATOR_SYSTEM.replace("{audience}", audience)},
            {"role": "user", "content": f"{task}\n\n{passages_text(seed.chunks[:1])}"},
        ],
        response_schema=schema,
    )


def _written(parsed: dict, questions: int) -> list[tuple[str, str | None]]:
    """(question, answer) pairs of a first reply, at most `questions`, repeated questions once."""
    cases = parsed["cases"] if questions > 1 else [parsed]
    pairs = {case["question"].strip().lower(): (case["question"], case.get("answer")) for case in cases}
    return list(pairs.values())[:questions]


def evolve_request(seed: Seed, question: str, answer: str, audience: str) -> LLMRequest:
    """The rewrite of a plain question into the seed's evolution, over all of the seed's passages."""
    evolution = EVOLUTIONS[seed.evolution]
    assert evolution is not None
    user = (
        f"{evolution.instruction}\n\nThe plain question and its answer:\n"
        f"{data_section('question', question)}\n{data_section('answer', answer)}\n\n"
        f"{passages_text(seed.chunks)}"
    )
    return LLMRequest(
        [
            {"role": "system", "content": GENERATOR_SYSTEM.replace("{audience}", audience)},
            {"role": "user", "content": user},
        ],
        response_schema=GeneratedQA,
    )


def generate_candidates(
    client: LLMClient, seeds: Sequence[Seed], *, audience: str, questions: int = 1, desc: str = "generator"
) -> CandidateSet:
    """Up to `questions` candidates per seed, in seed order; a seed's first candidate has the seed's id,
    the others `<id>-2`, `<id>-3`, ... (a failed call leaves one candidate with the error)."""
    requests = [first_request(s, audience, questions) for s in seeds]
    firsts = client.complete_many(requests, desc=f"{desc}: questions")
    written: list[tuple[Seed, Candidate]] = []
    for seed, result in zip(seeds, firsts, strict=True):
        if result.parsed is None:
            failed = Candidate(id=seed.id, evolution=seed.evolution, chunks=seed.chunks)
            failed.usage.add(result)
            failed.record_failure(result, "question")
            written.append((seed, failed))
            continue
        for number, (question, answer) in enumerate(_written(result.parsed, questions), start=1):
            candidate = Candidate(
                id=seed.id if number == 1 else f"{seed.id}-{number}",
                evolution=seed.evolution,
                chunks=seed.chunks,
                question=question,
                answer=answer,
            )
            if number == 1:  # the call wrote them all: its usage counted once
                candidate.usage.add(result)
            written.append((seed, candidate))
    candidates = [candidate for _, candidate in written]
    to_evolve = [
        (seed, candidate)
        for seed, candidate in written
        if candidate.question is not None and EVOLUTIONS.get(seed.evolution) is not None
    ]
    requests = [evolve_request(s, c.question or "", c.answer or "", audience) for s, c in to_evolve]
    evolved = client.complete_many(requests, desc=f"{desc}: evolutions") if requests else []
    for (_, candidate), result in zip(to_evolve, evolved, strict=True):
        candidate.usage.add(result)
        candidate.seed_question = candidate.question
        if result.parsed is None:
            candidate.record_failure(result, "evolution")
            continue
        if is_follow_up(candidate.evolution):
            candidate.history = [
                Turn(role="user", content=candidate.question or ""),
                Turn(role="assistant", content=candidate.answer or ""),
            ]
        candidate.question, candidate.answer = result.parsed["question"], result.parsed["answer"]
    return CandidateSet(generator=client.settings.model, candidates=candidates)
