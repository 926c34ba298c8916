"""Thin ZenML steps: unpack artifacts, call the core in `ragbench`, log metadata."""

from ragbench import submodules_as_attributes
from ragbench.store import use_store
from steps.chunk import chunk_knowledge_base
from steps.colbert import encode_chunks_for_reranking
from steps.gate import regression_gate
from steps.generate import answer_external_system, answer_questions_cell, pass_llm_operations
from steps.index import build_approximate_vector_index, build_vector_index
from steps.ingest import choose_reranker, ingest_knowledge_base, load_eval_suite, resolve_references
from steps.judge import (
    check_judge_on_planted_errors,
    judge_answers_cell,
    judge_pairwise_cell,
    measure_judge_alignment,
)
from steps.lexical import build_bm25_index
from steps.race import look_at_race, start_cell_race
from steps.rerank import rerank_cell
from steps.results import build_results_table
from steps.retrieve import retrieve_cell
from steps.rewrite import rewrite_queries_step
from steps.run_spend import sum_run_spend
from steps.store import ZenMLStore
from steps.testset import (
    assemble_eval_set,
    critique_eval_candidates,
    generate_eval_candidates,
    roundtrip_eval_candidates,
)
from steps.traces import write_trace_annotations

# The core's store, in every process that runs a step or builds a pipeline (`ragbench.store`).
use_store(ZenMLStore())

__all__ = [
    "answer_external_system",
    "answer_questions_cell",
    "assemble_eval_set",
    "build_approximate_vector_index",
    "build_bm25_index",
    "build_results_table",
    "build_vector_index",
    "check_judge_on_planted_errors",
    "choose_reranker",
    "chunk_knowledge_base",
    "critique_eval_candidates",
    "encode_chunks_for_reranking",
    "generate_eval_candidates",
    "ingest_knowledge_base",
    "judge_answers_cell",
    "judge_pairwise_cell",
    "load_eval_suite",
    "look_at_race",
    "measure_judge_alignment",
    "pass_llm_operations",
    "regression_gate",
    "rerank_cell",
    "resolve_references",
    "retrieve_cell",
    "rewrite_queries_step",
    "roundtrip_eval_candidates",
    "start_cell_race",
    "sum_run_spend",
    "write_trace_annotations",
]

__getattr__ = submodules_as_attributes(__name__)
