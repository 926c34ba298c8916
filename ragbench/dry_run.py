"""`run.py --dry-run`: count the LLM calls of a grid and price them without calling any LLM."""

from __future__ import annotations

from ragbench.config import BenchmarkConfig
from ragbench.eval_cases import EvalCase
from ragbench.generation import sample_cases
from ragbench.judge import JudgeInput, build_judge_calls
from ragbench.llm import estimate_cost
from ragbench.reader import build_reader_requests
from ragbench.retrieval import RetrievedChunk


def _placeholder_context(chunk_size: int, top_n: int) -> list[RetrievedChunk]:
    """Passages as long as the chunk size allows: an upper bound on what the reader will see."""
    text = " ".join(["token"] * chunk_size)
    return [RetrievedChunk(position=i, source=f"doc-{i}", score=0.0, text=text) for i in range(top_n)]


def estimate_llm_usage(config: BenchmarkConfig, cases: list[EvalCase]) -> list[dict]:
    """One row per LLM role and model: calls, prompt tokens (counted), completion tokens (max_tokens)."""
    sampled = sample_cases(cases, config.generation.sample_size, config.generation.seed)
    top_n = config.generation.top_n
    cells_per_chunk_size = len(config.grid.embedding_models) * len(config.grid.rerank)
    rows = []
    for reader in config.grid.readers:
        settings = config.generation.reader_settings(reader)
        requests = [
            request
            for chunk_size in config.grid.chunk_sizes
            for request in build_reader_requests(
                sampled, [_placeholder_context(chunk_size, top_n)] * len(sampled)
            )
            * cells_per_chunk_size
        ]
        rows.append({"role": "reader"} | estimate_cost(settings, requests))
        judge = config.evaluation.judge
        if judge is not None:
            answer = " ".join(["word"] * (settings.max_tokens // 2))
            inputs = [
                JudgeInput(
                    case_id=case.id,
                    question=case.question,
                    answer=answer,
                    reference_answer=case.reference_answer,
                    contexts=[chunk.text for chunk in _placeholder_context(chunk_size, top_n)],
                )
                for chunk_size in config.grid.chunk_sizes
                for case in sampled
            ] * cells_per_chunk_size
            calls = build_judge_calls(inputs, config.evaluation.rubrics)
            rows.append(
                {"role": f"judge ({reader} answers)"} | estimate_cost(judge, [c.request for c in calls])
            )
    return rows
