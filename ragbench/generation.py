"""The end-to-end part of one grid cell: retrieve, optionally rerank, answer, then test and judge."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from ragbench.eval_cases import EvalCase
from ragbench.index import Embedder, VectorIndex
from ragbench.judge import JudgeInput, Judgement, judge_answers, summarise_judgements
from ragbench.keyword_tests import KeywordReport, run_keyword_tests
from ragbench.llm import LLMClient, LLMSettings
from ragbench.llm.types import nearest_rank_percentile, total_cost
from ragbench.reader import ReaderAnswer, answer_questions
from ragbench.rerank import ColbertReranker, RerankerChoice, select_contexts
from ragbench.retrieval import retrieve


def sample_cases(cases: Sequence[EvalCase], sample_size: int | None, seed: int) -> list[EvalCase]:
    """The same seeded sample in every cell, kept in file order, so cells are compared on equal cases."""
    if sample_size is None or sample_size >= len(cases):
        return list(cases)
    chosen = set(random.Random(seed).sample(range(len(cases)), sample_size))
    return [case for position, case in enumerate(cases) if position in chosen]


class AnswerSet(BaseModel):
    """Every answer of one cell with the passages the reader saw, so any score traces back to its case."""

    cell_id: str
    chunk_size: int
    embedding_model: str
    reranker: RerankerChoice | None
    reader_model: str
    top_k: int
    top_n: int
    answers: list[ReaderAnswer]

    @property
    def reranker_label(self) -> str:
        return self.reranker.label if self.reranker else "off"


def answer_cell(
    cell_id: str,
    index: VectorIndex,
    embedder: Embedder,
    cases: Sequence[EvalCase],
    *,
    reader: LLMSettings,
    reranker: RerankerChoice | None,
    top_k: int,
    top_n: int,
    llm_cache_dir: str | None = None,
) -> AnswerSet:
    retrieved = retrieve(index, embedder, [case.question for case in cases], top_k)
    contexts = select_contexts(
        [case.question for case in cases],
        retrieved,
        top_n,
        ColbertReranker(choice=reranker) if reranker else None,
        desc=f"rerank {cell_id}",
    )
    client = LLMClient(reader, cache_dir=llm_cache_dir)
    answers = answer_questions(client, cases, contexts, desc=f"reader {cell_id}")
    return AnswerSet(
        cell_id=cell_id,
        chunk_size=index.manifest.chunk_size,
        embedding_model=index.manifest.embedding_model,
        reranker=reranker,
        reader_model=reader.model,
        top_k=top_k,
        top_n=top_n,
        answers=answers,
    )


class AnswerEvaluation(BaseModel):
    cell_id: str
    keyword: KeywordReport | None
    judgements: list[Judgement]
    judge_summary: dict | None
    judge_model: str | None


def evaluate_answers(
    answer_set: AnswerSet,
    cases: Sequence[EvalCase],
    *,
    keyword_tests: bool,
    judge: LLMSettings | None,
    rubrics: Sequence[str],
    llm_cache_dir: str | None = None,
) -> AnswerEvaluation:
    """Keyword tests and judge over the answers that exist; failed reader calls are counted, not scored."""
    by_id = {case.id: case for case in cases}
    produced = [answer for answer in answer_set.answers if answer.answer is not None]
    answers_by_case = {answer.case_id: answer.answer for answer in produced}
    keyword = run_keyword_tests(cases, answers_by_case) if keyword_tests else None
    judgements: list[Judgement] = []
    if judge is not None and produced:
        inputs = [
            JudgeInput(
                case_id=answer.case_id,
                question=answer.question,
                answer=answer.answer,
                reference_answer=by_id[answer.case_id].reference_answer,
                contexts=[chunk.text for chunk in answer.contexts],
            )
            for answer in produced
        ]
        client = LLMClient(judge, cache_dir=llm_cache_dir)
        judgements = judge_answers(client, inputs, rubrics=rubrics, desc=f"judge {answer_set.cell_id}")
    return AnswerEvaluation(
        cell_id=answer_set.cell_id,
        keyword=keyword,
        judgements=judgements,
        judge_summary=summarise_judgements(judgements) if judge is not None else None,
        judge_model=judge.model if judge is not None else None,
    )


def _rounded_cost(costs: Iterable[float | None]) -> float | None:
    total = total_cost(costs)
    return None if total is None else round(total, 6)


def generation_columns(answer_set: AnswerSet, evaluation: AnswerEvaluation) -> dict:
    """The end-to-end columns of a results row; each `*_cases` column says how many cases it used."""
    answers = answer_set.answers
    produced = [answer for answer in answers if answer.answer is not None]
    latencies = [answer.latency_s for answer in produced if not answer.cached] or [
        answer.latency_s for answer in produced
    ]
    row: dict = {
        "reranker": answer_set.reranker_label,
        "reader": answer_set.reader_model,
        "e2e_cases": len(answers),
        "answers_produced": len(produced),
        "reader_failures": len(answers) - len(produced),
    }
    if evaluation.keyword is not None:
        for suite, result in evaluation.keyword.suites.items():
            row[f"fail_{suite}"] = result.failure_rate
            row[f"fail_{suite}_cases"] = result.cases_tested
    summary = evaluation.judge_summary
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
    judgements = evaluation.judgements
    row.update(
        {
            "latency_mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
            "latency_p95_s": round(nearest_rank_percentile(latencies, 0.95), 3) if latencies else None,
            "reader_prompt_tokens": sum(answer.prompt_tokens for answer in answers),
            "reader_completion_tokens": sum(answer.completion_tokens for answer in answers),
            "reader_cost_usd": _rounded_cost(answer.cost_usd for answer in answers),
            "reader_retries": sum(answer.retries for answer in answers),
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
            }
        )
    return row
