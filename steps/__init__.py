"""Thin ZenML steps: unpack artifacts, call the core in `ragbench`, log metadata."""

from steps.chunk import chunk_knowledge_base
from steps.evaluate import evaluate_retrieval_cell
from steps.generate import answer_questions_cell, judge_answers_cell
from steps.index import build_vector_index
from steps.ingest import choose_reranker, ingest_knowledge_base, load_eval_suite
from steps.results import build_results_table

__all__ = [
    "answer_questions_cell",
    "build_results_table",
    "build_vector_index",
    "choose_reranker",
    "chunk_knowledge_base",
    "evaluate_retrieval_cell",
    "ingest_knowledge_base",
    "judge_answers_cell",
    "load_eval_suite",
]
