"""Training questions: one per sampled chunk, written with the eval-set generator's system prompt and
client (cached, retried, counted), and the eval cases kept out of them.

A question only, no answer: the reranker learns which chunk answers it, and on the local 1.5B an answer
costs four times the question's decode time. Every chunk also gives an inverse-cloze pseudo-question
(one of its sentences, taken out of the chunk), which costs no call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field, field_validator

from ragbench.inputs.chunking import Chunk
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMRequest
from ragbench.testset.plan import source_chunk
from ragbench.testset.roundtrip import normalise
from ragbench.testset.rubrics import GENERATOR_SYSTEM, check_standalone, passages_text

SEARCH_TASK = """\
Write one question that a reader would type into the documentation's search box and that the passage \
below answers. Ask about one specific fact, behaviour or rule in it. Write only the question."""

# A question sharing this share of its words (either way round) with an eval case's question or reference
# answer is dropped: the eval set must measure what training never saw.
LEAK_OVERLAP = 0.6
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


class SearchQuestion(BaseModel):
    """The generator's reply: one question its passage answers."""

    question: str = Field(description="the question, as a reader would type it")

    _standalone = field_validator("question")(check_standalone)


class TrainingQuestion(BaseModel):
    """A question and the chunk it was written from (by position in the chunk set)."""

    question: str
    chunk: int
    origin: str  # "generator" or "cloze"


class TrainingQuestions(BaseModel):
    """What the question step made: the questions, and the calls that gave none (never reused from cache)."""

    generator: str
    calls: int
    questions: list[TrainingQuestion]
    errors: list[str]


def question_request(chunk: Chunk, audience: str) -> LLMRequest:
    return LLMRequest(
        [
            {"role": "system", "content": GENERATOR_SYSTEM.replace("{audience}", audience)},
            {"role": "user", "content": f"{SEARCH_TASK}\n\n{passages_text([source_chunk(chunk)])}"},
        ],
        response_schema=SearchQuestion,
    )


def write_questions(
    client: LLMClient, chunks: Sequence[Chunk], positions: Sequence[int], *, audience: str
) -> tuple[list[TrainingQuestion], list[str]]:
    """One generator question per chunk position, and the errors of the calls that failed (counted by the
    caller: a run with failures is never reused from the step cache). A chunk whose replies never made a
    valid question (e.g. one that mentions "the passage") just gets none."""
    results = client.complete_many(
        [question_request(chunks[p], audience) for p in positions], desc="training questions"
    )
    questions, errors = [], []
    for position, result in zip(positions, results, strict=True):
        if result.parsed is None:
            if not result.invalid_reply:  # a reply that never passed the schema is the model's: not retried
                errors.append(f"chunk {position}: {result.error or 'no reply'}")
            continue
        questions.append(
            TrainingQuestion(question=result.parsed["question"].strip(), chunk=position, origin="generator")
        )
    return questions, errors


def cloze_questions(chunks: Sequence[Chunk], *, min_words: int = 6) -> list[TrainingQuestion]:
    """Inverse cloze: for each chunk of at least three sentences, its longest sentence as a pseudo-question
    (`pairs.training_examples` takes that sentence out of the chunk it is matched against)."""
    found = []
    for position, chunk in enumerate(chunks):
        sentences = [s.strip() for s in _SENTENCE.split(chunk.text) if len(s.split()) >= min_words]
        if len(sentences) >= 3:
            found.append(TrainingQuestion(question=max(sentences, key=len), chunk=position, origin="cloze"))
    return found


def _words(text: str) -> set[str]:
    return set(normalise(text).split())


def leaks(question: str, held_out: Iterable[str], threshold: float = LEAK_OVERLAP) -> str | None:
    """The held-out text `question` overlaps with (a share of `threshold` of the smaller word set), if any."""
    words = _words(question)
    for text in held_out:
        other = _words(text)
        if words and other and len(words & other) / min(len(words), len(other)) >= threshold:
            return text
    return None


def held_out_texts(cases: Sequence[EvalCase]) -> list[str]:
    """Every eval case's question (a follow-up's earlier user turns too: questions of the eval set as well)
    and stored reference answer: no training question may resemble one."""
    texts = [case.question for case in cases]
    texts += [turn.content for case in cases for turn in case.history if turn.role == "user"]
    texts += [case.reference_answer for case in cases if case.reference_answer]
    return texts


def without_leaks(
    questions: Sequence[TrainingQuestion], cases: Sequence[EvalCase]
) -> tuple[list[TrainingQuestion], list[str]]:
    """The questions that resemble no eval case, and a line for each one dropped."""
    held_out = held_out_texts(cases)
    kept, dropped = [], []
    for question in questions:
        match = leaks(question.question, held_out)
        if match is None:
            kept.append(question)
        else:
            dropped.append(f"{question.question!r} resembles eval text {match!r}")
    return kept, dropped
