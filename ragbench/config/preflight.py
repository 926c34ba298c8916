"""Everything checkable before the pipeline starts, so bad input fails in seconds, not after indexing."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ragbench.analysis.holdout import holdout_error
from ragbench.analysis.strategies import Confirmed, cell_budget_error, searched_cases
from ragbench.config.dry_run import placeholder_answer
from ragbench.config.expand import rewriter_settings
from ragbench.config.model import BenchmarkConfig
from ragbench.generation.reader import build_reader_messages
from ragbench.generation.systems import missing_environment
from ragbench.grid.cell import CellSpec, pairwise_pairs
from ragbench.inputs.chunking import overlap_tokens
from ragbench.inputs.conversation import placeholder_history
from ragbench.inputs.eval_cases import EvalCase, EvalSuite, load_eval_suite_from
from ragbench.inputs.knowledge_base import Corpus, load_corpus
from ragbench.inputs.references import dynamic_fields
from ragbench.llm.pricing import context_window, estimate_prompt_tokens
from ragbench.llm.readiness import check_llm_ready, checked_offline
from ragbench.llm.redaction import refuse_url_credentials
from ragbench.models.hub import check_model_available, hub_offline, resolvable_offline
from ragbench.models.provision import embedding_dimension, provisioned_location
from ragbench.retrieval.ann import FLAT_INDEX, IndexSpec, pq_subquantizers
from ragbench.retrieval.rerank import RerankerChoice, resolve_reranker
from ragbench.review.labels import ReviewLabels, check_labels, load_labels_file
from ragbench.testset.labels import load_labels
from ragbench.testset.rubrics import check_names

logger = logging.getLogger(__name__)


class PreflightError(ValueError):
    """Input that would make the run fail or lie; raised before any model is loaded."""


@dataclass
class Preflight:
    """What the checks read, kept so nothing is read twice (`ragbench.config.plan`): the knowledge base and
    the eval cases (their fingerprints tell runs on the same data apart), the labels file, and the
    rerankers a real run's checks resolved."""

    corpus: Corpus
    eval_suite: EvalSuite
    review_labels: ReviewLabels | None = None
    rerankers: dict[str, RerankerChoice] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # what only a real run can check (dry run)

    @property
    def knowledge_base_fingerprint(self) -> str:
        return self.corpus.fingerprint


def max_seq_length(location: str) -> int | None:
    """Read from the sentence-transformers folder without loading the model."""
    config_file = Path(location) / "sentence_bert_config.json"
    if not config_file.is_file():
        return None
    return json.loads(config_file.read_text()).get("max_seq_length")


# Seconds per token to embed, measured on 2 CPU cores (docs/measured.md: 1173 chunks of 128 tokens
# took 18 s with MiniLM-L6 and 118 s with mpnet-base); models we have not measured count as base size.
_EMBED_SECONDS_PER_TOKEN = {
    "sentence-transformers/all-MiniLM-L6-v2": 1.2e-4,
    "sentence-transformers/all-mpnet-base-v2": 7.9e-4,
}
_CHARACTERS_PER_TOKEN = 4


def size_warnings(config: BenchmarkConfig, characters: int) -> list[str]:
    """A knowledge base big enough to take hours is announced, with the estimate, before any work."""
    warnings = []
    tokens = characters / _CHARACTERS_PER_TOKEN
    for size in config.grid.chunk_size:
        overlap = max(overlap_tokens(size, share) for share in config.grid.chunk_overlap)
        chunks = int(tokens / max(1, size - overlap))
        if chunks <= config.knowledge_base.warn_chunks:
            continue
        seconds = sum(
            chunks * size * _EMBED_SECONDS_PER_TOKEN.get(model, max(_EMBED_SECONDS_PER_TOKEN.values()))
            for model in config.grid.embedding_model
        )
        warnings.append(
            f"knowledge base of {characters:,} characters makes about {chunks:,} chunks of {size} tokens "
            f"(over knowledge_base.warn_chunks = {config.knowledge_base.warn_chunks:,}): indexing them with "
            f"{len(config.grid.embedding_model)} embedding model(s) takes about {seconds / 3600:.1f} h on 2 "
            "CPU cores; use knowledge_base.limit or fewer chunk sizes to try it smaller first"
        )
    return warnings


def estimated_chunks(config: BenchmarkConfig, characters: int, size: int) -> int:
    """About how many chunks of `size` tokens the knowledge base makes (4 characters a token), before
    chunking: what index parameters can be checked against without reading a model."""
    overlap = max(overlap_tokens(size, share) for share in config.grid.chunk_overlap)
    return max(1, int(characters / _CHARACTERS_PER_TOKEN / max(1, size - overlap)))


def check_indexes(config: BenchmarkConfig, characters: int) -> list[str]:
    """Refuse index parameters the data cannot satisfy (FAISS would fail after embedding): PQ's pq_m must
    divide the embedding dimension, IVF's nlist cannot exceed the vectors it trains on. Returns what only a
    real run can check (a model whose dimension is known only once it loads)."""
    unchecked = []
    specs = [IndexSpec.parse(name) for name in config.grid.index if name != FLAT_INDEX]
    fewest = min(estimated_chunks(config, characters, size) for size in config.grid.chunk_size)
    for spec in specs:
        if spec.kind == "ivf" and spec.nlist is not None and spec.nlist > fewest:
            raise PreflightError(
                f"grid.index {spec.name}: nlist={spec.nlist} lists need at least as many vectors to train "
                f"on, but the knowledge base makes about {fewest:,} chunks at chunk size "
                f"{max(config.grid.chunk_size)} (leave nlist out for an automatic one)"
            )
        if spec.encoding != "pq":
            continue
        for model in config.grid.embedding_model:
            dimension = embedding_dimension(model)
            if dimension is None:
                unchecked.append(
                    f"grid.index {spec.name}: pq_m against {model}'s dimension (known once it loads)"
                )
                continue
            try:
                pq_subquantizers(spec, dimension)
            except ValueError as error:
                raise PreflightError(f"grid.index: {error} ({model})") from None
    return unchecked


def run_preflight(
    config: BenchmarkConfig,
    *,
    cells: list[CellSpec],
    plan_only: bool = False,
    step_environment: Mapping[str, str] | None = None,
) -> Preflight:
    """Check the whole run. `plan_only` (a dry run) skips what needs models or keys: it calls nothing.
    `step_environment`: the variables the steps will see (default: this process's); `cells`: the config's,
    expanded once where the command starts (`ragbench.config.plan`), never here again."""
    warnings: list[str] = []
    labels = review_labels_file(config)  # a broken labels file fails in a second, before any model loads
    if config.search is not None and len(cells) < 2:
        raise PreflightError("search: a race needs at least two cells in the grid")
    if config.search is not None and (error := cell_budget_error(config.search, cells)):
        raise PreflightError(error)
    if config.evaluation.pairwise is not None:
        try:
            pairwise_pairs(cells, config.evaluation.pairwise.baseline)
        except ValueError as error:
            raise PreflightError(str(error)) from None
    rewriter = rewriter_settings(config)  # the query rewrite's LLM, when a cell rewrites
    llms = list(
        {
            s.model_dump_json(): s
            for s in [*(s for c in cells for s in (c.reader, c.judge)), rewriter]
            if s is not None
        }.values()
    )
    check_systems(config, step_environment, plan_only)
    grid_models = [config.chunking_tokenizer, *config.grid.embedding_model] if config.benchmark_grid else []
    if config.benchmark_grid and config.scoring_embedding_model is not None:
        grid_models.append(config.scoring_embedding_model)
    unchecked: list[str] = []
    for name in dict.fromkeys(grid_models):
        if plan_only and not resolvable_offline(name) and not hub_offline():
            unchecked.append(f"model {name}: found on the Hugging Face Hub (a dry run asks no server)")
        else:
            check_model_available(name)
    for settings in llms:
        # missing API key, unknown provider or GGUF: fail before any work (a dry run checks local models)
        if not plan_only or checked_offline(settings):
            check_llm_ready(settings, step_environment)
        else:
            unchecked.append(
                f"LLM {settings.model}: its provider's key where the steps run (a dry run needs none)"
            )
    rerankers = {  # an unusable checkpoint fails here; a fallback is logged loudly
        checkpoint: resolve_reranker(checkpoint)
        for checkpoint in ([] if plan_only else dict.fromkeys(c.reranker for c in cells if c.reranker))
    }
    url = config.llm_cache_url or ""
    if url.startswith("postgresql") and step_environment is not None and "PGPASSWORD" not in step_environment:
        warnings.append(
            "llm_cache_url: no PGPASSWORD where the steps run (no named secret holds one); the database "
            "client there needs ~/.pgpass, or the first LLM step fails after indexing"
        )
    corpus = load_corpus(config.knowledge_base)
    warnings += [f"knowledge base: skipped {reason}" for reason in corpus.skipped]
    if config.benchmark_grid:
        warnings += size_warnings(config, corpus.total_characters)
        unchecked += check_indexes(config, corpus.total_characters)
    suite = load_eval_suite_from(config.eval_cases)
    check_holdout(config, len(suite.cases))
    known_sources = {document.source for document in corpus.documents}
    unknown = sorted({source for case in suite.cases for source in case.expected_sources} - known_sources)
    if unknown:
        raise PreflightError(
            f"{config.eval_cases.label}: expected sources not in the knowledge base: "
            f"{', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else "")
        )
    if labels is not None:
        where = f"labels file {config.evaluation.labels_source}"
        check_labels(labels, config.scoring().rubrics, {case.id for case in suite.cases}, where)
    check_references(suite.cases, cells, step_environment, plan_only)
    unchecked += check_histories(suite.cases, cells, config.eval_cases.label)
    traces_only = config.eval_cases.traces is not None and not config.benchmark_grid
    if not traces_only and not any(
        case.expected_sources or case.expected_sources_from for case in suite.cases
    ):
        raise PreflightError(
            f"{config.eval_cases.label}: no eval case names expected_sources, so retrieval cannot be measured"
        )
    case_tags = {tag for case in suite.cases for tag in case.tags}
    evaluation = config.evaluation
    for kind, name, tags in [("rubric", r.name, r.tags) for r in evaluation.custom_rubrics] + [
        ("suite", s.name, s.tags) for s in evaluation.custom_suites
    ]:
        if tags and not set(tags) & case_tags:
            warnings.append(
                f"custom {kind} {name}: no eval case has any of its tags {list(tags)}: it scores nothing"
            )
    for name in [] if plan_only or not config.benchmark_grid else config.grid.embedding_model:
        location = provisioned_location(name)  # the steps provision models; a model not here yet is unchecked
        limit = max_seq_length(location) if location else None
        too_big = [size for size in config.grid.chunk_size if limit and size > limit]
        if too_big:
            warnings.append(
                f"chunk sizes {too_big} exceed {name}'s maximum sequence length ({limit} tokens): "
                "sentence-transformers would truncate those chunks; the table counts them as chunks_truncated"
            )
    for warning in warnings:
        logger.warning(warning)
    return Preflight(
        corpus=corpus,
        eval_suite=suite,
        review_labels=labels,
        rerankers=rerankers,
        warnings=warnings,
        unchecked=list(dict.fromkeys(unchecked)),  # one line per model, not per role
    )


def check_holdout(config: BenchmarkConfig, cases: int) -> None:
    """A search that confirms its winner must hold out enough of the cases it spends for a paired test on
    them, and leave the search its own (`holdout_error`)."""
    search = config.search
    if isinstance(search, Confirmed):
        spent = searched_cases(search, cases, config.generation.sample_size)
        if error := holdout_error(spent, search.holdout):
            raise PreflightError(error)


def check_systems(
    config: BenchmarkConfig, step_environment: Mapping[str, str] | None, plan_only: bool
) -> None:
    """An external system's header secrets and version must be set where its step runs (checked by name,
    never by value), and a Python system importable, before anything is indexed."""
    environment = os.environ if step_environment is None else step_environment
    for system in config.systems:
        if not plan_only and (missing := missing_environment(system, environment)):
            raise PreflightError(
                f"system {system.name}: environment variable(s) {', '.join(missing)} not set where the steps "
                "run (set them, or put them in a ZenML secret named in orchestration.secrets)"
            )
        if system.version is None and system.version_env is None and not system.traces:
            logger.warning(
                "system %s has no version or version_env: its answers are asked anew by every run (never "
                "served from an earlier run's cache, since the deploy may have changed); give it a version "
                "to reuse them",
                system.name,
            )
        module = (system.python or "").partition(":")[0]
        if module and importlib.util.find_spec(module.split(".")[0]) is None:
            raise PreflightError(f"system {system.name}: python module {module!r} is not importable here")


def check_histories(cases: list[EvalCase], cells: list[CellSpec], label: str) -> list[str]:
    """Every conversation must fit each reader it goes to: the reader's prompt with no passage at all, the
    earlier turns, the question and room for the reply (`max_tokens`) within the model's context, else the
    reader could never answer the case (a local model would fail on it, a hosted one be refused), and the
    run finds out only after indexing. Tokens as the dry run counts them (a generated turn as long as the
    reader's max_tokens). Returns the readers whose context size nobody knows (unchecked)."""
    talks = [case for case in cases if case.history]
    if not talks:
        return []
    unchecked = []
    readers = {
        (c.reader.model_dump_json(), c.prompt.name): (c.reader, c.prompt)
        for c in cells
        if c.reader and c.prompt
    }
    for reader, prompt in readers.values():
        window = context_window(reader)
        if window is None:
            unchecked.append(
                f"LLM {reader.model}: whether the longest conversation fits its context (size unknown)"
            )
            continue
        for case in talks:
            history = placeholder_history(case.history, placeholder_answer(reader.max_tokens))
            messages = build_reader_messages(case.question, [], prompt, history)
            needed = estimate_prompt_tokens(reader.model, messages) + reader.max_tokens
            if needed > window:
                raise PreflightError(
                    f"{label}: case {case.id}: its {len(case.history)} earlier turns and question take about "
                    f"{needed - reader.max_tokens} tokens in the reader's prompt (passages not counted), "
                    f"which with the reply's max_tokens {reader.max_tokens} exceed {reader.model}'s "
                    f"context of "
                    f"{window} tokens: shorten its history"
                )
    return unchecked


def review_labels_file(config: BenchmarkConfig) -> ReviewLabels | None:
    """The labels file `evaluation.judge_alignment` or `evaluation.label_correction` reads, read now so a
    label the run cannot use (a value off its scale, an edited answer, bad JSON) ends the run with one
    sentence before any work; `run_preflight` then checks its scales and cases (`check_labels`). None
    without labels or when they are an artifact, which the pipeline checks as it compiles
    (`pipelines.inputs.review_labels_input`), before any step."""
    source = config.evaluation.labels_source
    if source is None or not source.endswith(".jsonl"):
        return None
    return load_labels_file(source)


def check_references(
    cases: list[EvalCase], cells: list[CellSpec], step_environment: Mapping[str, str] | None, plan_only: bool
) -> None:
    """Every `reference_from` and `expected_sources_from` usable before anything is indexed: a callable's
    module importable, a URL free of credentials with its header variables set where the steps run, and a
    reader in the grid to write a reference from a source that gives context."""
    environment = os.environ if step_environment is None else step_environment
    has_reader = any(cell.reader is not None for cell in cells)
    for case in cases:
        for name, source in dynamic_fields(case):
            where = f"case {case.id}: {name.replace('reference_answer', 'reference')}_from"
            try:
                if source.url is not None:
                    refuse_url_credentials(source.url, where, "name it in headers_env")
            except ValueError as error:
                raise PreflightError(str(error)) from None
            module = (source.python or "").partition(":")[0]
            if module and importlib.util.find_spec(module.split(".")[0]) is None:
                raise PreflightError(f"{where}: python module {module!r} is not importable here")
            if (missing := source.missing_environment(environment)) and not plan_only:
                raise PreflightError(
                    f"{where}: environment variable(s) {', '.join(missing)} not set where the steps run"
                )
            if source.gives == "context" and name == "reference_answer" and not has_reader:
                raise PreflightError(
                    f"{where} gives context, but the grid has no reader model to write the reference"
                )


def run_testset_preflight(
    config: BenchmarkConfig, *, plan_only: bool = False, step_environment: Mapping[str, str] | None = None
) -> int:
    """Check what `run.py testset` needs before any model loads; returns the knowledge base's estimated
    number of chunks at the testset's chunk size (what a dry run can plan with without chunking)."""
    try:
        check_names(config.testset.evolutions, config.testset.thresholds)
        if config.testset.labels:
            load_labels(config.testset.labels)  # a broken labels file fails now, not after generating
    except ValueError as error:
        raise PreflightError(str(error)) from None
    if not plan_only:
        for name in dict.fromkeys(
            [config.chunking_tokenizer, config.section_embedding_model(config.testset)]
        ):
            check_model_available(name)
        for settings in (config.testset.generator_settings(), config.testset.critic_settings()):
            check_llm_ready(settings, step_environment)
    corpus = load_corpus(config.knowledge_base)
    for reason in corpus.skipped:
        logger.warning("knowledge base: skipped %s", reason)
    size, overlap = config.section_chunking(config.testset)
    # per document, rounded up: a knowledge base of many short pages makes at least one chunk of each
    step = _CHARACTERS_PER_TOKEN * (size - overlap)
    return max(1, sum(max(1, math.ceil(len(document.text) / step)) for document in corpus.documents))


def run_training_preflight(
    config: BenchmarkConfig, *, step_environment: Mapping[str, str] | None = None
) -> None:
    """Check what `run.py train-reranker` needs before any model loads: the models, the generator (when it
    writes questions), a knowledge base with documents, and the eval cases training must leave out."""
    training = config.reranker_training
    for name in dict.fromkeys([config.chunking_tokenizer, config.section_embedding_model(training)]):
        check_model_available(name)
    if training.chunks:
        check_llm_ready(training.generator_settings(), step_environment)
    elif not training.cloze:
        raise PreflightError("reranker_training: chunks is 0 and cloze is off: there is nothing to train on")
    corpus = load_corpus(config.knowledge_base)
    for reason in corpus.skipped:
        logger.warning("knowledge base: skipped %s", reason)
    suite = load_eval_suite_from(config.eval_cases)
    logger.info("reranker training holds out the %d eval case(s) of %s", len(suite.cases), suite.label)
