"""Everything checkable before the pipeline starts, so bad input fails in seconds, not after indexing."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ragbench.config import BenchmarkConfig
from ragbench.eval_cases import EvalCase, load_eval_source
from ragbench.knowledge_base import knowledge_base_fingerprint, load_corpus
from ragbench.llm import LLMSettings, check_llm_ready
from ragbench.models import check_model_available, resolve_model
from ragbench.rerank import RerankerChoice, resolve_reranker

logger = logging.getLogger(__name__)


class PreflightError(ValueError):
    """Input that would make the run fail or lie; raised before any model is loaded."""


@dataclass
class Preflight:
    """What the pipeline needs from the checks: fingerprints that key ZenML's cache, and the cases."""

    knowledge_base_fingerprint: str
    eval_cases: list[EvalCase]
    eval_fingerprint: str
    reranker: RerankerChoice | None
    llms: list[LLMSettings]
    warnings: list[str] = field(default_factory=list)


def max_seq_length(location: str) -> int | None:
    """Read from the sentence-transformers folder without loading the model."""
    config_file = Path(location) / "sentence_bert_config.json"
    if not config_file.is_file():
        return None
    return json.loads(config_file.read_text()).get("max_seq_length")


def run_preflight(config: BenchmarkConfig) -> Preflight:
    warnings: list[str] = []
    model_names = list(dict.fromkeys([config.chunking_tokenizer, *config.grid.embedding_models]))
    for name in model_names:
        check_model_available(name)
    llms = [config.generation.reader_settings(model) for model in config.grid.readers]
    if config.grid.readers and config.evaluation.judge is not None:
        llms.append(config.evaluation.judge)
    for settings in llms:
        check_llm_ready(settings)  # missing API key, unknown provider or GGUF: fail before any work
    reranker = resolve_reranker(config.generation.reranker) if True in config.grid.rerank else None
    if reranker is not None and reranker.is_standin:
        warnings.append(
            f"RERANKER IS AN UNTRAINED STAND-IN ({reranker.label}): {reranker.reason}. Rows with "
            "rerank on show that the reranking path works; their numbers are NOT ColBERT results."
        )
    fingerprint = knowledge_base_fingerprint(config.knowledge_base)
    corpus = load_corpus(config.knowledge_base, fingerprint=fingerprint)
    warnings += [f"knowledge base: skipped {reason}" for reason in corpus.skipped]
    cases = load_eval_source(config.eval_cases)
    known_sources = {document.source for document in corpus.documents}
    unknown = sorted({source for case in cases for source in case.expected_sources} - known_sources)
    if unknown:
        raise PreflightError(
            f"{config.eval_cases.label}: expected sources not in the knowledge base: "
            f"{', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else "")
        )
    if not any(case.expected_sources for case in cases):
        warnings.append("no eval case names expected_sources: retrieval metrics cannot be computed")
    for name in config.grid.embedding_models:
        limit = max_seq_length(resolve_model(name).location)
        too_big = [size for size in config.grid.chunk_sizes if limit and size > limit]
        if too_big:
            warnings.append(
                f"chunk sizes {too_big} exceed {name}'s maximum sequence length ({limit} tokens): "
                "sentence-transformers would truncate those chunks; the table counts them as chunks_truncated"
            )
    cases_json = json.dumps([case.model_dump(mode="json") for case in cases], sort_keys=True)
    for warning in warnings:
        logger.warning(warning)
    return Preflight(
        knowledge_base_fingerprint=fingerprint,
        eval_cases=cases,
        eval_fingerprint=hashlib.sha256(cases_json.encode()).hexdigest()[:16],
        reranker=reranker,
        llms=llms,
        warnings=warnings,
    )
