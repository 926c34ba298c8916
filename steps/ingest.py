"""The run's inputs, read anew by every run (never cached), so a scheduled run sees edited documents.

Their outputs carry content hashes, so the steps after them are still served from the cache when
nothing changed: ZenML keys a step on its inputs' content, not on which run made them.
"""

import os
import socket
from typing import Annotated

from zenml import get_step_context, log_metadata, step
from zenml.client import Client

from materializers.json_models import CorpusMaterializer
from ragbench.config.model import KnowledgeBaseConfig
from ragbench.generation.references import reference_writer
from ragbench.inputs.eval_cases import EvalCasesConfig, EvalSuite, load_eval_suite_from
from ragbench.inputs.knowledge_base import Corpus, load_corpus
from ragbench.inputs.references import ReferenceResolutions, resolve_cases
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.retrieval.rerank import RerankerChoice, resolve_reranker
from steps.caching import Operations
from steps.spend import step_spending


@step(enable_cache=False, output_materializers=CorpusMaterializer)
def ingest_knowledge_base(
    knowledge_base: KnowledgeBaseConfig, snapshot: Corpus | None = None
) -> Annotated[Corpus, "corpus"]:
    """`snapshot`: the documents as the client read them from its own disk (see `pipelines.inputs`); otherwise
    the knowledge base is read here, where the step runs (a URI, a dataset, the shipped default).

    On the local orchestrator also records which process runs the pipeline, so a run whose process was
    killed can be marked failed by the next run instead of staying "running" forever (elsewhere the
    orchestrator tracks its own pods)."""
    if Client().active_stack.orchestrator.flavor == "local":  # one process on this host runs every step
        log_metadata(
            {"orchestrator_pid": os.getpid(), "orchestrator_host": socket.gethostname()},
            run_id_name_or_prefix=get_step_context().pipeline_run.id,
        )
    corpus = snapshot or load_corpus(knowledge_base)
    log_metadata({"documents": len(corpus.documents), "skipped_files": corpus.skipped})
    return corpus


@step(enable_cache=False)
def load_eval_suite(
    eval_cases: EvalCasesConfig, snapshot: EvalSuite | None = None
) -> Annotated[EvalSuite, "eval_cases"]:
    """`snapshot`: the cases as the client read them from its own disk; otherwise read here."""
    suite = snapshot or load_eval_suite_from(eval_cases)
    log_metadata({"cases": len(suite.cases), "eval_fingerprint": suite.fingerprint})
    return suite


@step(enable_cache=False)
def resolve_references(
    eval_suite: EvalSuite, operations: Operations, writer: LLMSettings | None = None
) -> tuple[Annotated[EvalSuite, "eval_cases_resolved"], Annotated[ReferenceResolutions, "references"]]:
    """Every case's `reference_from` and `expected_sources_from` fetched now, where this step runs (never
    cached: the truth may have changed since the last run). The resolved cases keep the eval set's
    fingerprint (its definition), while their content, which every later step is keyed on, holds the fresh
    values. `writer`: the LLM that writes a reference from a source's context (the grid's first reader).
    A source that fails fails its case (`reference_error`), never the run."""
    cases = eval_suite.cases
    if writer is None:
        resolved, resolutions = resolve_cases(cases, None)
    else:
        llm = writer.model_copy(update=operations.llm.get(writer.result_key, {}))
        with step_spending(operations), LLMClient(llm, cache_location=operations.llm_cache) as client:
            resolved, resolutions = resolve_cases(cases, reference_writer(client))
    failures = resolutions.failures()
    log_metadata({"dynamic_references": len(resolutions.resolutions), "reference_failures": failures})
    suite = eval_suite.model_copy(update={"cases": resolved})
    return suite, resolutions


@step(enable_cache=False)
def choose_reranker(checkpoint: str) -> Annotated[RerankerChoice, "reranker"]:
    """The checkpoint reranking will really use: the configured one, or the labelled UNTRAINED stand-in."""
    return resolve_reranker(checkpoint)
