"""The end-to-end part of one grid cell: optionally rerank the retrieved candidates, answer, then test and
judge."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from ragbench.colbert_maxsim import PrecomputedColbertReranker
from ragbench.eval_cases import EvalCase
from ragbench.external import ExternalClient, ExternalResult, ExternalSystem
from ragbench.grid import CellSpec
from ragbench.judge import Judgement, JudgeSummary, judge_answers, judge_case_values, summarise_judgements
from ragbench.keyword_tests import KeywordReport, Suite, run_keyword_tests, suite_column
from ragbench.llm import LLMClient
from ragbench.llm.types import nearest_rank_percentile, total_cost
from ragbench.pairwise import PairwiseInput, PairwiseResult, judge_pairs
from ragbench.reader import ReaderAnswer, answer_questions
from ragbench.rerank import RerankerChoice, select_contexts
from ragbench.retrieval import (
    RetrievalResult,
    RetrievedCandidates,
    RetrievedChunk,
    SearchStats,
    retrieval_metrics,
)
from ragbench.rubrics import JudgeInput, Rubric, checked_criterion


def sample_cases(cases: Sequence[EvalCase], sample_size: int | None, seed: int) -> list[EvalCase]:
    """The same seeded sample in every cell, kept in file order, so cells are compared on equal cases."""
    if sample_size is None or sample_size >= len(cases):
        return list(cases)
    chosen = set(random.Random(seed).sample(range(len(cases)), sample_size))
    return [case for position, case in enumerate(cases) if position in chosen]


class ExternalAnswers(BaseModel):
    """What an external system's cell adds to its answers: which system and deploy answered, how its calls
    went, and the retrieval metrics of the sources it returned (None: it returned none)."""

    name: str
    kind: str
    endpoint: str
    version: str | None
    cases_asked: int
    calls_made: int  # not served from the cache
    failures: int
    retries: int
    returned_contexts: bool  # False: answer-only metrics (nothing to measure retrieval or faithfulness on)
    retrieval: RetrievalResult | None  # None: no passages, or passages without sources


class AnswerSet(BaseModel):
    """Every answer of one answer-stage key with the passages the reader saw, so any score traces back to
    its case. Judges grade it; they never re-answer."""

    spec: CellSpec
    reranker: RerankerChoice | None
    answers: list[ReaderAnswer]
    external: ExternalAnswers | None = None

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


def external_cell(
    spec: CellSpec,
    system: ExternalSystem,
    cases: Sequence[EvalCase],
    *,
    sample_size: int | None,
    seed: int,
    metrics_k: int,
    llm_cache: str | None = None,
    run_scope: str | None = None,
) -> AnswerSet:
    """Ask the system every case once: its sources give the retrieval metrics (over every case with
    expected sources, as a grid cell's do) and the sampled cases' answers are tested and judged like a
    reader's, with the passages it returned as the judge's passages. `run_scope`: the run's id, which
    scopes the answers of a system without a version to this run."""
    if spec.external != system.name:
        raise ValueError(f"system {system.name} given to cell {spec.id}")
    with ExternalClient(system, cache_location=llm_cache, run_scope=run_scope) as client:
        results = client.ask_many([case.question for case in cases], desc=f"external {system.name}")
        version = client.version
    by_case = {case.id: result for case, result in zip(cases, results, strict=True)}
    contexts = {case.id: external_contexts(by_case[case.id]) for case in cases}
    answers = []
    for case in sample_cases(cases, sample_size, seed):
        result = by_case[case.id]
        answers.append(
            ReaderAnswer(
                case_id=case.id,
                question=case.question,
                answer=result.reply.answer.strip() if result.reply is not None else None,
                error=result.error,
                contexts=contexts[case.id],
                latency_s=result.latency_s,
                cost_usd=None,  # what the system's own calls cost is not visible from outside
                retries=result.retries,
                cached=result.cached,
                retried_earlier_failure=result.retried_earlier_failure,
            )
        )
    with_sources = [case for case in cases if case.expected_sources]
    returned_sources = any(chunk.source for chunks in contexts.values() for chunk in chunks)
    retrieval = None
    if with_sources and returned_sources:
        ranked = [
            [
                chunk.model_copy(update={"source": system.source_match.source_id(chunk.source)})
                for chunk in contexts[case.id]
            ]
            for case in with_sources
        ]
        expected = [
            case.model_copy(
                update={
                    "expected_sources": [system.source_match.expected_id(s) for s in case.expected_sources]
                }
            )
            for case in with_sources
        ]
        deepest = max((len(chunks) for chunks in contexts.values()), default=0)
        retrieval = RetrievalResult(
            spec=spec.upto("retrieve"),
            chunk_count=0,
            index=None,
            lexical=None,
            search=SearchStats(queries=len(with_sources), ms_per_query=0.0),
            retrieval=retrieval_metrics(expected, ranked, metrics_k, deepest),
        )
    external = ExternalAnswers(
        name=system.name,
        kind=system.kind,
        endpoint=system.endpoint,
        version=version,
        cases_asked=len(results),
        calls_made=sum(not result.cached for result in results),
        failures=sum(result.reply is None for result in results),
        retries=sum(result.retries for result in results),
        returned_contexts=any(contexts.values()),
        retrieval=retrieval,
    )
    return AnswerSet(spec=spec, reranker=None, answers=answers, external=external)


def external_contexts(result: ExternalResult) -> list[RetrievedChunk]:
    """The passages a system returned, in its order, as the reader's passages (no index row, no score)."""
    if result.reply is None:
        return []
    return [
        RetrievedChunk(
            position=-1, source=context.source or "", score=0.0, text=context.text, retrieval_rank=rank
        )
        for rank, context in enumerate(result.reply.contexts, start=1)
    ]


class JudgeResult(BaseModel):
    """One judge's verdicts on one answer set with the rubrics it graded by; failed verdicts are kept with
    their error, never scored."""

    spec: CellSpec
    rubrics: list[Rubric]
    judgements: list[Judgement]
    # The judge's correctness verdicts on the human-labelled answers of the eval cases (`human_answer`).
    calibration: list[Judgement] = []

    @property
    def summary(self) -> JudgeSummary:
        return summarise_judgements(self.judgements, self.rubrics)

    def case_values(self) -> dict[str, dict[str, float]]:
        return judge_case_values(self.judgements, self.rubrics)

    @property
    def failures(self) -> int:
        """Verdicts the judge could not give (call failed or reply never valid), first samples, repeats
        and calibration alike: counted, never scored, and the step is not reused from the cache."""
        return sum(len(j.errors) + j.resample_failures for j in [*self.judgements, *self.calibration])


def judge_cell(
    spec: CellSpec,
    answer_set: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    rubrics: Sequence[Rubric],
    llm_cache: str | None = None,
    samples: int = 1,
) -> JudgeResult:
    """Judge the answers that exist; failed reader calls are counted by the table, not judged."""
    if spec.judge is None:
        raise ValueError(f"cell {spec.id} has no judge")
    if answer_set.external is not None and not answer_set.external.returned_contexts:
        rubrics = [rubric for rubric in rubrics if "passages" not in rubric.inputs]  # answer-only
    by_id = {case.id: case for case in cases}
    inputs = [
        JudgeInput(
            case_id=answer.case_id,
            question=answer.question,
            answer=answer.answer,
            reference_answer=by_id[answer.case_id].reference_answer,
            contexts=[chunk.text for chunk in answer.contexts],
            tags=by_id[answer.case_id].tags,
        )
        for answer in answer_set.answers
        if answer.answer is not None
    ]
    # a person's labels (`human_correctness`) grade the criterion the judge is checked on
    checked = [rubric for rubric in rubrics if checked_criterion([rubric]) is not None]
    labelled = calibration_inputs(cases) if checked else []
    judgements: list[Judgement] = []
    calibration: list[Judgement] = []
    if inputs or labelled:
        with LLMClient(spec.judge, cache_location=llm_cache) as client:
            if inputs:
                judgements = judge_answers(
                    client, inputs, rubrics=rubrics, desc=f"judge {spec.id}", samples=samples
                )
            if labelled:
                calibration = judge_answers(client, labelled, rubrics=checked[:1], desc="judge labelled")
    return JudgeResult(spec=spec, rubrics=list(rubrics), judgements=judgements, calibration=calibration)


def pairwise_cell(
    judge_key: CellSpec,
    candidate: AnswerSet,
    baseline: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    labels: tuple[str, str],
    criterion: str,
    seed: int,
    confidence: float,
    llm_cache: str | None = None,
) -> PairwiseResult:
    """`judge_key`'s judge compares two answer sets of the same cases, both orders of each pair."""
    if judge_key.judge is None:
        raise ValueError(f"cell {judge_key.id} has no judge")
    baseline_answers = {answer.case_id: answer.answer for answer in baseline.answers}
    by_id = {case.id: case for case in cases}
    inputs = [
        PairwiseInput(
            case_id=answer.case_id,
            question=answer.question,
            candidate_answer=answer.answer,
            baseline_answer=baseline_answers.get(answer.case_id),
            reference_answer=by_id[answer.case_id].reference_answer,
        )
        for answer in candidate.answers
    ]
    with LLMClient(judge_key.judge, cache_location=llm_cache) as client:
        return judge_pairs(
            client,
            inputs,
            candidate=labels[0],
            baseline=labels[1],
            judge=judge_key.judge.model,
            criterion=criterion,
            seed=seed,
            confidence=confidence,
            desc=f"pairwise {judge_key.id}",
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
            tags=case.tags,
        )
        for case in cases
        if case.human_answer is not None
    ]


def keyword_report(
    answer_set: AnswerSet, cases: Sequence[EvalCase], suites: Sequence[Suite]
) -> KeywordReport:
    """The suites run on the answers that exist (once per answer set, however many judges grade it)."""
    answered = {answer.case_id: answer.answer for answer in answer_set.answers if answer.answer is not None}
    return run_keyword_tests(cases, answered, suites)


def _rounded_cost(costs: Iterable[float | None]) -> float | None:
    total = total_cost(costs)
    return None if total is None else round(total, 6)


def generation_case_values(keyword: KeywordReport | None, judged: JudgeResult | None) -> dict:
    """Per case, the value behind each end-to-end column that is a mean over cases (column -> case id ->
    value), with the same cases the means use: tested suites, scored verdicts only."""
    values: dict[str, dict[str, float]] = {}
    if keyword is not None:
        values |= {suite_column(suite): dict(outcomes) for suite, outcomes in keyword.outcomes.items()}
    if judged is not None:
        values |= judged.case_values()
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
            row[suite_column(suite)] = result.failure_rate
            row[f"{suite_column(suite)}_cases"] = result.cases_tested
    if judged is not None:
        summary = judged.summary
        for column, mean in summary.means.items():
            row[column] = mean
            row[f"{column}_cases"] = summary.scored[column]
        row["judge_parse_failures"] = sum(summary.failures.values())
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
    if judged is not None:
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
