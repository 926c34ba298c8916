"""The end-to-end part of one grid cell: optionally rerank the retrieved candidates, answer, then test and
judge."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from ragbench.colbert_maxsim import PrecomputedColbertReranker
from ragbench.eval_cases import EvalCase
from ragbench.grid import CellSpec
from ragbench.judge import JudgeInput, Judgement, context_scored, judge_answers, summarise_judgements
from ragbench.keyword_tests import KeywordReport, run_keyword_tests
from ragbench.llm import LLMClient
from ragbench.llm.types import nearest_rank_percentile, total_cost
from ragbench.reader import ReaderAnswer, answer_questions
from ragbench.rerank import RerankerChoice, select_contexts
from ragbench.retrieval import RetrievedCandidates


def sample_cases(cases: Sequence[EvalCase], sample_size: int | None, seed: int) -> list[EvalCase]:
    """The same seeded sample in every cell, kept in file order, so cells are compared on equal cases."""
    if sample_size is None or sample_size >= len(cases):
        return list(cases)
    chosen = set(random.Random(seed).sample(range(len(cases)), sample_size))
    return [case for position, case in enumerate(cases) if position in chosen]


class AnswerSet(BaseModel):
    """Every answer of one answer-stage key with the passages the reader saw, so any score traces back to
    its case. Judges grade it; they never re-answer."""

    spec: CellSpec
    reranker: RerankerChoice | None
    answers: list[ReaderAnswer]

    @property
    def reranker_label(self) -> str:
        return self.reranker.label if self.reranker else "off"


def answer_cell(
    spec: CellSpec,
    candidates: RetrievedCandidates,
    cases: Sequence[EvalCase],
    *,
    reranker: PrecomputedColbertReranker | None,
    llm_cache: str | None = None,
) -> AnswerSet:
    """Keep `spec.top_n` of the retrieve key's candidates (reranked or in retrieval order), answer with the
    reader."""
    if spec.reader is None or spec.top_n is None or spec.prompt is None:
        raise ValueError(f"cell {spec.id} has no reader: nothing to answer")
    if candidates.spec != spec.upto("retrieve"):
        raise ValueError(f"candidates of {candidates.spec.id} given to cell {spec.id}")
    questions = [case.question for case in cases]
    contexts = select_contexts(
        questions, candidates.for_cases(cases), spec.top_n, reranker, desc=f"rerank {spec.id}"
    )
    with LLMClient(spec.reader, cache_location=llm_cache) as client:
        answers = answer_questions(client, cases, contexts, prompt=spec.prompt, desc=f"reader {spec.id}")
    return AnswerSet(spec=spec, reranker=reranker.choice if reranker else None, answers=answers)


class JudgeResult(BaseModel):
    """One judge's verdicts on one answer set; failed verdicts are kept with their error, never scored."""

    spec: CellSpec
    judgements: list[Judgement]
    summary: dict
    # The judge's correctness verdicts on the human-labelled answers of the eval cases (`human_answer`).
    calibration: list[Judgement] = []

    @property
    def failures(self) -> int:
        """Verdicts the judge could not give (call failed or reply never valid), first samples, repeats
        and calibration alike: counted, never scored, and the step is not reused from the cache."""
        return sum(
            (j.correctness_error is not None or j.context_error is not None) + j.resample_failures
            for j in [*self.judgements, *self.calibration]
        )


def judge_cell(
    spec: CellSpec,
    answer_set: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    rubrics: Sequence[str],
    llm_cache: str | None = None,
    samples: int = 1,
) -> JudgeResult:
    """Judge the answers that exist; failed reader calls are counted by the table, not judged."""
    if spec.judge is None:
        raise ValueError(f"cell {spec.id} has no judge")
    by_id = {case.id: case for case in cases}
    inputs = [
        JudgeInput(
            case_id=answer.case_id,
            question=answer.question,
            answer=answer.answer,
            reference_answer=by_id[answer.case_id].reference_answer,
            contexts=[chunk.text for chunk in answer.contexts],
        )
        for answer in answer_set.answers
        if answer.answer is not None
    ]
    labelled = calibration_inputs(cases) if "correctness" in rubrics else []
    judgements: list[Judgement] = []
    calibration: list[Judgement] = []
    if inputs or labelled:
        with LLMClient(spec.judge, cache_location=llm_cache) as client:
            if inputs:
                judgements = judge_answers(
                    client, inputs, rubrics=rubrics, desc=f"judge {spec.id}", samples=samples
                )
            if labelled:
                calibration = judge_answers(client, labelled, rubrics=["correctness"], desc="judge labelled")
    return JudgeResult(
        spec=spec, judgements=judgements, summary=summarise_judgements(judgements), calibration=calibration
    )


def calibration_inputs(cases: Sequence[EvalCase]) -> list[JudgeInput]:
    """The answers a person scored (`human_answer`), for the judge to grade as well."""
    return [
        JudgeInput(
            case_id=case.id,
            question=case.question,
            answer=case.human_answer,
            reference_answer=case.reference_answer,
            contexts=[],
        )
        for case in cases
        if case.human_answer is not None
    ]


def keyword_report(answer_set: AnswerSet, cases: Sequence[EvalCase]) -> KeywordReport:
    """Keyword tests of the answers that exist (once per answer set, however many judges grade it)."""
    answered = {answer.case_id: answer.answer for answer in answer_set.answers if answer.answer is not None}
    return run_keyword_tests(cases, answered)


def _rounded_cost(costs: Iterable[float | None]) -> float | None:
    total = total_cost(costs)
    return None if total is None else round(total, 6)


# Judge columns that are means over cases, and the Judgement field each case contributes.
_CONTEXT_COLUMNS = {
    "faithfulness_1to5": "faithfulness",
    "relevance_1to5": "relevance",
    "helpfulness_1to5": "helpfulness",
    "toxicity_1to5_low_good": "toxicity",
}


def generation_case_values(keyword: KeywordReport | None, judged: JudgeResult | None) -> dict:
    """Per case, the value behind each end-to-end column that is a mean over cases (column -> case id ->
    value), with the same cases the means use: tested keyword suites, scored verdicts only."""
    values: dict[str, dict[str, float]] = {}
    if keyword is not None:
        values |= {f"fail_{suite}": dict(outcomes) for suite, outcomes in keyword.outcomes.items()}
    if judged is not None:
        judgements = judged.judgements
        values["correctness_0to1"] = {
            j.case_id: j.correctness_normalised for j in judgements if j.correctness_normalised is not None
        }
        scored = context_scored(judgements)
        for column, field in _CONTEXT_COLUMNS.items():
            values[column] = {
                j.case_id: float(getattr(j, field)) for j in scored if getattr(j, field) is not None
            }
    return {column: by_case for column, by_case in values.items() if by_case}


def generation_columns(
    answer_set: AnswerSet, keyword: KeywordReport | None, judged: JudgeResult | None
) -> dict:
    """The end-to-end columns of a results row; each `*_cases` column says how many cases it used."""
    answers = answer_set.answers
    produced = [answer for answer in answers if answer.answer is not None]
    # Every answer's latency, a cached one's as measured when it was made: a cell's latency must not
    # depend on which of its calls another cell had already cached (the gate compares it across runs).
    latencies = [answer.latency_s for answer in produced]
    row: dict = {
        "e2e_cases": len(answers),
        "answers_produced": len(produced),
        "reader_failures": len(answers) - len(produced),
    }
    if keyword is not None:
        for suite, result in keyword.suites.items():
            row[f"fail_{suite}"] = result.failure_rate
            row[f"fail_{suite}_cases"] = result.cases_tested
    summary = judged.summary if judged is not None else None
    if summary is not None:
        row.update(
            {
                "correctness_0to1": summary["correctness_mean_0to1"],
                "correctness_cases": summary["correctness_scored"],
                "faithfulness_1to5": summary["faithfulness_mean_1to5"],
                "relevance_1to5": summary["relevance_mean_1to5"],
                "helpfulness_1to5": summary["helpfulness_mean_1to5"],
                "toxicity_1to5_low_good": summary["toxicity_mean_1to5_lower_is_better"],
                "context_judged_cases": summary["context_scored"],
                "judge_parse_failures": sum(summary["judge_parse_failures"].values()),
            }
        )
    judgements = judged.judgements if judged is not None else []
    row.update(
        {
            "latency_mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
            "latency_p95_s": round(nearest_rank_percentile(latencies, 0.95), 3) if latencies else None,
            "reader_prompt_tokens": sum(answer.prompt_tokens for answer in answers),
            "reader_completion_tokens": sum(answer.completion_tokens for answer in answers),
            "reader_cost_usd": _rounded_cost(answer.cost_usd for answer in answers),
            "reader_retries": sum(answer.retries for answer in answers),
            "reader_calls_retried": sum(answer.retried_earlier_failure for answer in answers),
        }
    )
    if summary is not None:
        row.update(
            {
                "judge_prompt_tokens": sum(j.prompt_tokens for j in judgements),
                "judge_completion_tokens": sum(j.completion_tokens for j in judgements),
                "judge_cost_usd": _rounded_cost(j.cost_usd for j in judgements),
                "judge_retries": sum(j.retries for j in judgements),
                "judge_json_reasks": sum(j.json_reasks for j in judgements),
                "judge_calls_retried": sum(j.calls_retried for j in judgements),
            }
        )
    row["cost_usd"] = _rounded_cost([row["reader_cost_usd"], row.get("judge_cost_usd", 0.0)])
    return row
