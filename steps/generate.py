from typing import Annotated

from zenml import log_metadata, step

import ragbench.generation
import ragbench.judge
import ragbench.keyword_tests
import ragbench.reader
import ragbench.rerank
from ragbench.eval_cases import EvalSuite
from ragbench.generation import AnswerEvaluation, AnswerSet, answer_cell, evaluate_answers, sample_cases
from ragbench.index import VectorIndex, load_embedder
from ragbench.llm import LLMSettings
from ragbench.rerank import RerankerChoice
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.generation, ragbench.reader, ragbench.rerank))
def answer_questions_cell(
    index: VectorIndex,
    eval_suite: EvalSuite,
    cell: str,
    reader: dict,
    reranker: dict | None,
    top_k: int,
    top_n: int,
    sample_size: int | None,
    seed: int,
    llm_cache_dir: str | None,
) -> Annotated[AnswerSet, "answers"]:
    """Retrieve, optionally rerank, answer; the LLM cache makes a re-run after a crash cheap."""
    cases = sample_cases(eval_suite.cases, sample_size, seed)
    answers = answer_cell(
        cell,
        index,
        load_embedder(index.manifest.embedding_model),
        cases,
        reader=LLMSettings.model_validate(reader),
        reranker=RerankerChoice.model_validate(reranker) if reranker else None,
        top_k=top_k,
        top_n=top_n,
        llm_cache_dir=llm_cache_dir,
    )
    failures = sum(answer.answer is None for answer in answers.answers)
    log_metadata(
        {"answers": len(answers.answers), "reader_failures": failures, "reranker": answers.reranker_label}
    )
    return answers


@step(cache_policy=cache_on(ragbench.generation, ragbench.judge, ragbench.keyword_tests))
def evaluate_answers_cell(
    answers: AnswerSet,
    eval_suite: EvalSuite,
    keyword_tests: bool,
    judge: dict | None,
    rubrics: list[str],
    llm_cache_dir: str | None,
) -> Annotated[AnswerEvaluation, "answer_evaluation"]:
    evaluation = evaluate_answers(
        answers,
        eval_suite.cases,
        keyword_tests=keyword_tests,
        judge=LLMSettings.model_validate(judge) if judge else None,
        rubrics=rubrics,
        llm_cache_dir=llm_cache_dir,
    )
    if evaluation.judge_summary is not None:
        log_metadata({"judge": evaluation.judge_summary})
    return evaluation
