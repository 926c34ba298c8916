"""The six Ragas metrics as scorers, with Ragas's names and definitions (checked against ragas 0.4.3, the
legacy metric classes `ragas.evaluate` runs, by tests/system/test_ragas_conformance.py).

Each scorer makes the same judge calls in the same order as Ragas, with replies of the same shape
(`ragbench.scoring.ragas_prompts`), and computes the same number from them. Where Ragas's score is NaN the
case gets no value and ``details["undefined"]`` says why. Everything a score was made of (statements,
verdicts, reasons, generated questions and their cosines, TP/FP/FN) is kept in the case's details.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ragbench.hashing import short_hash
from ragbench.scoring import ragas_prompts as prompts
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import Input, JudgeInput
from ragbench.scoring.scorer import CaseScore, ScoreContext, Scorer, cosine


def scale_text(value_range: tuple[float, float]) -> str:
    """A scale as a label names it: "0-1", or "-1 to 1" where a minus sign would read as the dash."""
    low, high = value_range
    return f"{low:g}-{high:g}" if low >= 0 else f"{low:g} to {high:g}"


class RagasScorer(Scorer):
    """What the six share: one 0-1 metric named after the scorer, compared case by case with a
    permutation test, and an identity that covers the prompts and helpers outside the class body.
    `value_range`: what a case's value can be, which its interval is held to; a cosine can go below 0."""

    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def metrics(self) -> tuple[MetricInfo, ...]:
        return (
            MetricInfo(
                column=self.name,
                label=f"{self.name} ({scale_text(self.value_range)})",
                higher_is_better=True,
                paired_test="paired_permutation",
                bounds=self.value_range,
            ),
        )

    def identity(self) -> dict[str, Any]:
        """The base identity hashes the class body only; a prompt's change must change the cache key too."""
        code = "".join(inspect.getsource(sys.modules[module]) for module in (__name__, prompts.__name__))
        return super().identity() | {"code": short_hash(code)}

    def result(self, value: float | None, details: dict[str, Any], undefined: str = "") -> CaseScore:
        """The case's score, or none with the reason when Ragas's value would be NaN."""
        if value is None or not math.isfinite(value):
            return CaseScore(values={}, details=details | {"undefined": undefined or "not a number"})
        return CaseScore(values={self.name: float(value)}, details=details)


def _statements(context: ScoreContext, question: str, text: str) -> list[str]:
    """The statements `text` makes: one call for the whole text, as Ragas 0.4.3 does (no sentence split)."""
    return context.ask(prompts.statements_messages(question, text), prompts.Statements)["statements"]


def _cosine(vectors: np.ndarray, i: int, j: int) -> float | None:
    """Cosine of two rows; None where a vector is zero (Ragas divides by zero there and gets NaN)."""
    a, b = vectors[i], vectors[j]
    return None if not (np.linalg.norm(a) and np.linalg.norm(b)) else cosine(a, b)


def _similarity(context: ScoreContext, reference: str, answer: str) -> float | None:
    """Cosine of the reference answer's and the answer's embeddings (reference first, as Ragas embeds)."""
    return _cosine(np.asarray(context.embed([reference, answer]), dtype=float), 0, 1)


def average_precision(verdicts: Sequence[int]) -> float:
    """Mean of precision@k over the ranks k of the useful passages; 0 when none is useful.

    Ragas divides by (number useful + 1e-10): the same value to 1e-10, and 0 rather than NaN for none."""
    useful = 0
    total = 0.0
    for rank, verdict in enumerate(verdicts, start=1):
        if verdict:
            useful += 1
            total += useful / rank
    return total / useful if useful else 0.0


def f_beta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """F-beta of statement counts, with Ragas's conventions: precision or recall 0 when undefined, and 0
    when both are 0."""
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    if precision == 0 and recall == 0:
        return 0.0
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


class Faithfulness(RagasScorer):
    name = "faithfulness"
    needs: ClassVar[tuple[Input, ...]] = ("question", "answer", "passages")
    definition = "The share of the answer's statements that the retrieved passages support."

    def planned_calls(self, case: JudgeInput) -> int:
        return 2  # statements, then one verdict call for all of them

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas: statements of the answer (one call), then one call judging all of them against the
        passages; the score counts the verdicts the judge returned (not the statements asked about)."""
        statements = _statements(context, case.question_in_context, case.answer)
        details: dict[str, Any] = {"statements": statements}
        if not statements:
            return self.result(None, details, "the answer makes no statement")
        reply = context.ask(prompts.verdicts_messages(case.contexts, statements), prompts.StatementVerdicts)
        verdicts = reply["statements"]
        details["verdicts"] = verdicts
        if not verdicts:
            return self.result(None, details, "the judge returned no verdicts")
        return self.result(sum(1 for v in verdicts if v["verdict"]) / len(verdicts), details)


class AnswerRelevancy(RagasScorer):
    name = "answer_relevancy"
    value_range = (-1.0, 1.0)  # built on a cosine, which can be negative
    needs: ClassVar[tuple[Input, ...]] = ("question", "answer")
    uses_embeddings = True
    definition = (
        "The mean cosine similarity between the question and questions generated from the answer alone; "
        "0 when every generation finds the answer noncommittal."
    )
    # Questions generated per answer (Ragas's `strictness`, default 3).
    strictness: ClassVar[int] = 3

    def planned_calls(self, case: JudgeInput) -> int:
        return self.strictness  # at most: one when the judge's temperature is 0

    def settings(self) -> dict[str, Any]:
        return {"strictness": self.strictness}

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas: `strictness` generations of {question, noncommittal} from the answer only; the mean
        cosine of the case's question with each generated one, times 0 if all of them (`np.all`) are
        noncommittal; NaN when every generated question is empty.

        When the judge's samples cannot differ (temperature 0) the question is generated once and counted
        `strictness` times: `strictness` identical replies give the same mean, for a third of the calls."""
        asked = self.strictness if context.samples_differ else 1
        messages = prompts.question_messages(case.answer)
        replies = [context.ask(messages, prompts.GeneratedQuestion, sample=i) for i in range(asked)]
        details: dict[str, Any] = {"strictness": self.strictness, "generations_asked": asked}
        generated = [reply["question"] for reply in replies]
        if all(question == "" for question in generated):
            details["questions"] = replies
            return self.result(None, details, "no question could be generated from the answer")
        texts = list(dict.fromkeys([case.question_in_context, *generated]))
        vectors = np.asarray(context.embed(texts), dtype=float)
        cosines = [_cosine(vectors, 0, texts.index(question)) for question in generated]
        details["questions"] = [reply | {"cosine": c} for reply, c in zip(replies, cosines, strict=True)]
        if any(c is None for c in cosines):
            return self.result(None, details, "a zero embedding vector has no cosine")
        committal = not all(reply["noncommittal"] for reply in replies)
        details["all_noncommittal"] = not committal
        return self.result(float(np.mean(cosines)) if committal else 0.0, details)


class ContextPrecision(RagasScorer):
    name = "context_precision"
    needs: ClassVar[tuple[Input, ...]] = ("question", "passages", "reference_answer")
    definition = (
        "Average precision of the retrieved passages, in the order the reader saw them, where a passage "
        "counts as relevant when it helps to arrive at the reference answer."
    )

    def planned_calls(self, case: JudgeInput) -> int:
        return len(case.contexts)  # one verdict per passage

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas (ContextPrecision, with reference): one {reason, verdict} call per passage in order, each
        showing the question, that passage and the reference answer; then their average precision."""
        reference = case.reference_answer or ""
        passages = []
        for rank, passage in enumerate(case.contexts, start=1):
            messages = prompts.usefulness_messages(case.question_in_context, passage, reference)
            passages.append({"rank": rank} | context.ask(messages, prompts.Usefulness))
        precision = average_precision([p["verdict"] for p in passages])
        return self.result(precision, {"passages": passages})


class ContextRecall(RagasScorer):
    name = "context_recall"
    needs: ClassVar[tuple[Input, ...]] = ("question", "passages", "reference_answer")
    definition = "The share of the reference answer's sentences that the retrieved passages account for."

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas (LLMContextRecall): one call classifying each sentence of the reference answer as
        attributed to the passages or not; NaN when it returns no sentence."""
        messages = prompts.attribution_messages(
            case.question_in_context, case.contexts, case.reference_answer or ""
        )
        classifications = context.ask(messages, prompts.Attributions)["classifications"]
        details: dict[str, Any] = {"classifications": classifications}
        if not classifications:
            return self.result(None, details, "the judge classified no sentence of the reference answer")
        attributed = sum(1 for c in classifications if c["attributed"])
        return self.result(attributed / len(classifications), details)


class AnswerSimilarity(RagasScorer):
    name = "answer_similarity"
    value_range = (-1.0, 1.0)  # built on a cosine, which can be negative
    needs: ClassVar[tuple[Input, ...]] = ("answer", "reference_answer")
    uses_llm = False
    uses_embeddings = True
    definition = "The cosine similarity of the answer's and the reference answer's embeddings."

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas (AnswerSimilarity, a bi-encoder and no threshold): the cosine of the two embeddings."""
        similarity = _similarity(context, case.reference_answer or "", case.answer)
        return self.result(similarity, {}, "a zero embedding vector has no cosine")


class AnswerCorrectness(RagasScorer):
    name = "answer_correctness"
    value_range = (-1.0, 1.0)  # built on a cosine, which can be negative
    needs: ClassVar[tuple[Input, ...]] = ("question", "answer", "reference_answer")
    uses_embeddings = True
    definition = (
        "0.75 x the F1 of the answer's statements against the reference answer's (true positives, false "
        "positives, false negatives) + 0.25 x the answer similarity."
    )
    # Ragas's defaults: weights of the factual F-score and of the similarity, and the F-score's beta.
    weights: ClassVar[tuple[float, float]] = (0.75, 0.25)
    beta: ClassVar[float] = 1.0

    def planned_calls(self, case: JudgeInput) -> int:
        return 3  # the answer's statements, the reference's, then their classification

    def settings(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "beta": self.beta}

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        """Ragas: statements of the answer, then of the reference answer (one call each, the same prompt
        as faithfulness's); one call sorting them into TP/FP/FN, skipped when both lists are empty (the
        F-score then counts as 1); the F-score and the answer similarity averaged with `weights`."""
        reference = case.reference_answer or ""
        answer_statements = _statements(context, case.question_in_context, case.answer)
        reference_statements = _statements(context, case.question_in_context, reference)
        details: dict[str, Any] = {
            "answer_statements": answer_statements,
            "reference_statements": reference_statements,
        }
        if answer_statements or reference_statements:
            messages = prompts.classification_messages(
                case.question_in_context, answer_statements, reference_statements
            )
            classes = context.ask(messages, prompts.Classification)
            details |= classes
            factual = f_beta(len(classes["TP"]), len(classes["FP"]), len(classes["FN"]), self.beta)
        else:
            details["note"] = "no statements on either side: the F-score counts as 1, as in Ragas"
            factual = 1.0
        similarity = _similarity(context, reference, case.answer)
        details |= {"f_score": factual, "similarity": similarity}
        if similarity is None:
            return self.result(None, details, "a zero embedding vector has no cosine")
        factual_weight, similarity_weight = self.weights
        blended = (factual_weight * factual + similarity_weight * similarity) / sum(self.weights)
        return self.result(blended, details)


RAGAS_FAMILY: dict[str, type[Scorer]] = {
    scorer.name: scorer
    for scorer in (
        Faithfulness,
        AnswerRelevancy,
        ContextPrecision,
        ContextRecall,
        AnswerSimilarity,
        AnswerCorrectness,
    )
}
