"""The one config model: validated in full before any model loads, so bad input fails fast."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from ragbench.analysis.columns import is_results_column
from ragbench.analysis.racing import race_metric
from ragbench.analysis.strategies import SearchConfig, StagedSearch, stage_metric
from ragbench.config.grid import GridConfig
from ragbench.config.orchestration import OrchestrationConfig
from ragbench.config.paths import resolve_override_paths, resolve_paths
from ragbench.generation.answers import GenerationConfig
from ragbench.generation.systems import ExternalSystem
from ragbench.inputs.chunking import overlap_tokens
from ragbench.inputs.eval_cases import EvalCasesConfig
from ragbench.inputs.knowledge_base import KnowledgeBaseConfig
from ragbench.inputs.tables import TableError, load_yaml, read_utf8
from ragbench.llm.budget import BudgetConfig
from ragbench.llm.cache import check_cache_url, is_database_url
from ragbench.llm.prompts import DEFAULT_PROMPT, DEFAULT_PROMPT_NAME, PromptTemplate, load_prompt
from ragbench.llm.types import llm_settings
from ragbench.models.devices import Device
from ragbench.retrieval.retrievers import RetrievalConfig
from ragbench.runs.gate import RegressionConfig
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.registry import EvaluationConfig, Scoring, make_scorers
from ragbench.section import Section, validation_message
from ragbench.stats.inference import StatisticsConfig
from ragbench.testset.settings import TestsetConfig
from ragbench.training.settings import RerankerTrainingConfig

logger = logging.getLogger("ragbench")

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"


class ConfigError(ValueError):
    """A config that cannot be run; the message names the offending key."""


class ChunkingConfig(Section):
    """One tokenizer for all embeddings, so every model is compared on identical chunks."""

    tokenizer: str | None = Field(
        default=None, description="model whose tokenizer measures chunk length; default: first embedding"
    )


class EmbeddingConfig(Section):
    """How indexes are built (not what they contain: vectors do not depend on these)."""

    device: Device = Field(
        default="auto", description="where the index step encodes: auto = a GPU where the step has one"
    )
    shard_size: int = Field(
        default=2048,
        ge=1,
        description="chunks embedded per shard; each finished shard is checkpointed in the artifact store, "
        "so an index build that was killed resumes and re-embeds at most one shard",
    )


# A config's name keys its history (run names, tags, schedules, eval sets, output folders): lowercase so
# that no two names can meet in a case-insensitive store, no character that a run name template, a path, a
# tag filter or a crontab line would read, and short enough for ZenML's run names.
CONFIG_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"
CONFIG_NAME_RULE = "1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


def suggested_name(text: str) -> str:
    """A valid name close to `text`, for the message that refuses it."""
    name = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-._")[:64]
    return name or "my-benchmark"


class BenchmarkConfig(Section):
    """A whole benchmark config, one field per top-level key (each key: docs/reference/config.md); a frozen
    pydantic model validated in full, unknown keys refused. `load_config` makes one from a YAML file as the
    command line does, `BenchmarkConfig.model_validate(mapping)` from a mapping (raising ValidationError)."""

    name: str = Field(
        default="default",
        description="names the config's history: runs, compare, the gate's baseline, the champion, schedules "
        f"and eval sets are per name ({CONFIG_NAME_RULE}); a config file without it is named after the file",
    )
    tags: list[str] = Field(
        default_factory=list,
        description="tags every run of this config carries (compare --tag filters by them); rule as name",
    )
    knowledge_base: KnowledgeBaseConfig = KnowledgeBaseConfig()
    eval_cases: EvalCasesConfig = Field(
        default=EvalCasesConfig(
            path=str(DEFAULT_CONFIG_PATH.parent / "eval_cases" / "python_reference.yaml")
        ),
        description="where eval cases come from; default: the 63 packaged cases on the Python language "
        "reference (configs/eval_cases/python_reference.yaml). A string is short for {path: ...}",
        # the default's path is absolute to where ragbench is checked out: the schema leaves it out so that
        # the committed schema is the same on every machine (the description names the file)
        json_schema_extra=lambda field_schema: field_schema.pop("default", None),
    )
    chunking: ChunkingConfig = ChunkingConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    grid: GridConfig = GridConfig()
    systems: list[ExternalSystem] = Field(
        default_factory=list,
        description="RAG systems you already run (an HTTP endpoint or a Python callable), each benchmarked "
        "as one more cell beside the grid's, judged by every grid.judge",
    )
    benchmark_grid: bool = Field(
        default=True,
        description="false: benchmark only the `systems` (e.g. a nightly check of a deploy); the grid's "
        "judges still grade them",
    )
    prompts: dict[str, str | dict[str, str]] = Field(
        default_factory=dict,
        description="reader prompt templates by name: {system, user} or a YAML file; 'default' is built in",
    )
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    statistics: StatisticsConfig = StatisticsConfig()
    search: SearchConfig | None = Field(
        default=None,
        description="how the sweep spends its calls, by `strategy`: race (rounds of shared cases, "
        "docs/concepts/racing.md), staged (retrieval decided first, then a race, the winner confirmed on "
        "held-out cases: docs/concepts/search.md) or tpe (model-based trials)",
    )
    regression: RegressionConfig = RegressionConfig()
    budget: BudgetConfig = BudgetConfig()  # the most a run of any pipeline may spend
    testset: TestsetConfig = TestsetConfig()
    reranker_training: RerankerTrainingConfig = RerankerTrainingConfig()
    orchestration: OrchestrationConfig = OrchestrationConfig()
    llm_cache_dir: str | None = Field(
        default=None,
        description="folder of the LLM cache's SQLite file (one machine); default: $RAGBENCH_CACHE_DIR/llm",
    )
    llm_cache_url: str | None = Field(
        default=None,
        description="a SQL database every step and pod shares as the LLM cache instead (e.g. "
        "postgresql+psycopg://ragbench@db:5432/ragbench); no password in it: PGPASSWORD or ~/.pgpass where "
        "the steps run",
    )
    output_dir: str = Field(default="output", description="where run.py writes every file it outputs")

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not re.match(CONFIG_NAME, name):
            raise ValueError(
                f"name {name!r} is not a valid config name ({CONFIG_NAME_RULE}), "
                f"e.g. {suggested_name(name)!r}"
            )
        return name

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, tags: list[str]) -> list[str]:
        if bad := [tag for tag in tags if not re.match(CONFIG_NAME, tag)]:
            raise ValueError(f"tag(s) {bad} not valid ({CONFIG_NAME_RULE})")
        return tags

    @field_validator("eval_cases", mode="before", json_schema_input_type=EvalCasesConfig | str)
    @classmethod
    def _path_shorthand(cls, value: Any) -> Any:
        """`eval_cases: cases.yaml` is short for `eval_cases: {path: cases.yaml}`."""
        return {"path": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_overlap(self) -> BenchmarkConfig:
        for size in self.grid.chunk_size:
            for overlap in self.grid.chunk_overlap:
                tokens = overlap_tokens(size, overlap)
                if tokens >= size:
                    raise ValueError(
                        f"chunk overlap ({tokens} tokens) must be smaller than chunk size ({size} tokens)"
                    )
        for name in ("testset", "reranker_training"):
            size, tokens = self.section_chunking(getattr(self, name))
            if tokens >= size:
                raise ValueError(
                    f"{name}: chunk overlap ({tokens} tokens) must be smaller than chunk size ({size} tokens)"
                )
        return self

    @model_validator(mode="after")
    def _check_generation(self) -> BenchmarkConfig:
        for role, entries, defaults in (
            ("reader", self.grid.reader, self.generation.reader),
            ("judge", self.grid.judge, self.evaluation.judge),
        ):
            for entry in entries:
                try:
                    llm_settings(entry, defaults)
                except ValidationError as error:
                    problem = validation_message(error)
                    raise ValueError(f"grid.{role} entry {entry!r}: {problem}") from None
        if self.retrieval.metrics_k > min(self.grid.top_k):
            raise ValueError("retrieval.metrics_k cannot exceed the smallest grid.top_k")
        if self.grid.reader and max(self.grid.top_n) > min(self.grid.top_k):
            raise ValueError("every grid.top_n must be at most every grid.top_k")
        unknown = sorted(set(self.grid.prompt) - set(self.prompt_templates()))
        if unknown:
            raise ValueError(f"grid.prompt names {unknown} not defined in prompts")
        if self.evaluation.pairwise is not None and not self.grid.judge:
            raise ValueError("evaluation.pairwise needs a judge in grid.judge")
        if self.evaluation.judge_repeats is not None and not self.grid.judge:
            raise ValueError("evaluation.judge_repeats needs a judge in grid.judge")
        if self.evaluation.judge_samples > 1:
            greedy = [
                s.model
                for e in self.grid.judge
                if (s := llm_settings(e, self.evaluation.judge)).temperature == 0
            ]
            if greedy:
                raise ValueError(
                    "evaluation.judge_samples > 1 measures how much a judge's verdicts vary when sampled, "
                    f"but judge(s) {greedy} have temperature 0; set evaluation.judge.temperature (e.g. 0.7)"
                )
        return self

    @model_validator(mode="after")
    def _check_metric_columns(self) -> BenchmarkConfig:
        """A custom rubric's or a scorer's metric never takes a column the results row has of its own."""
        scorers = make_scorers(self.evaluation.metrics)
        columns = [rubric.name for rubric in self.evaluation.custom_rubrics] + [
            metric.column for scorer in scorers for metric in scorer.metrics()
        ]
        if taken := [column for column in columns if is_results_column(column)]:
            raise ValueError(
                f"{', '.join(map(repr, taken))} names a results column of its own: choose another metric name"
            )
        return self

    @model_validator(mode="after")
    def _check_search(self) -> BenchmarkConfig:
        """A search needs readers, an end-to-end metric (a staged one also a retrieval metric its stages
        compute) and parts that work in rounds (two cells, a cell budget, a holdout: the preflight)."""
        if self.search is not None:
            if not self.grid.reader:
                raise ValueError("search: a race needs readers in grid.reader (retrieval costs no call)")
            if self.systems or self.evaluation.pairwise is not None:
                raise ValueError(
                    "search: external systems and pairwise judging are not raced; leave them out"
                )
            self.race_metric()  # raises for an unknown or a retrieval metric
            if isinstance(self.search, StagedSearch):
                self.stage_metric()
        return self

    def race_metric(self) -> MetricInfo:
        """The end-to-end metric the search races on."""
        assert self.search is not None
        return race_metric(self.scoring().metrics(), self.search.metric)

    def stage_metric(self) -> MetricInfo:
        """The retrieval metric a staged search's retrieve and rerank stages decide on."""
        assert isinstance(self.search, StagedSearch)
        metrics_k = self.retrieval.metrics_k
        return stage_metric(self.search.retrieval_column(metrics_k), metrics_k)

    @model_validator(mode="after")
    def _check_systems(self) -> BenchmarkConfig:
        names = [system.name for system in self.systems]
        if duplicated := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"systems: names must be unique, {duplicated} repeat")
        if not self.benchmark_grid and not self.systems:
            raise ValueError("benchmark_grid: false leaves nothing to benchmark: add `systems`")
        logged = [system.name for system in self.systems if system.traces]
        if logged and self.eval_cases.traces is None:
            raise ValueError(
                f"systems {logged} answer from traces (traces: true): read the eval cases from them, "
                "with eval_cases.traces"
            )
        return self

    @model_validator(mode="after")
    def _check_llm_cache(self) -> BenchmarkConfig:
        if self.llm_cache_url is not None:
            if self.llm_cache_dir is not None:
                raise ValueError(
                    "set llm_cache_dir (a SQLite folder) or llm_cache_url (a database), not both"
                )
            if not is_database_url(self.llm_cache_url):
                raise ValueError(f"llm_cache_url is not a database URL: {self.llm_cache_url!r}")
            check_cache_url(self.llm_cache_url)
        return self

    def scoring(self) -> Scoring:
        """The registry of this config's metrics (raises ValueError when two metrics share a name)."""
        return self.evaluation.scoring(self.retrieval.metrics_k)

    @property
    def llm_cache(self) -> str | None:
        """Where every LLM step caches: the database URL, else the folder (None: the default folder)."""
        return self.llm_cache_url or self.llm_cache_dir

    @model_validator(mode="after")
    def _check_thresholds(self) -> BenchmarkConfig:
        """A threshold under a key the gate never sees would be accepted and silently never used."""
        tracked = self.scoring().tracked_keys()
        unknown = sorted(set(self.regression.thresholds) - set(tracked))
        if unknown:
            raise ValueError(
                f"regression.thresholds: {', '.join(unknown)} is not a tracked metric; tracked metrics "
                f"(with retrieval.metrics_k {self.retrieval.metrics_k}): {', '.join(tracked)}"
            )
        return self

    def prompt_templates(self) -> dict[str, PromptTemplate]:
        """The built-in default plus the configured templates (a configured 'default' replaces it)."""
        return {DEFAULT_PROMPT_NAME: DEFAULT_PROMPT} | {
            name: load_prompt(name, value) for name, value in self.prompts.items()
        }

    @property
    def chunking_tokenizer(self) -> str:
        return self.chunking.tokenizer or self.grid.embedding_model[0]

    @property
    def eval_set_name(self) -> str:
        return self.testset.name or re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{self.name}-eval-set")

    def section_chunking(self, section: TestsetConfig | RerankerTrainingConfig) -> tuple[int, int]:
        """(chunk size, overlap in tokens) of a section's chunks: by default the grid's largest chunks, so a
        benchmark run has usually made them already (ZenML reuses the step)."""
        size = section.chunk_size or max(self.grid.chunk_size)
        overlap = self.grid.chunk_overlap[0] if section.chunk_overlap is None else section.chunk_overlap
        return size, overlap_tokens(size, overlap)

    @property
    def scoring_embedding_model(self) -> str | None:
        """What scorers compare texts with; None when no configured scorer embeds anything."""
        if not any(scorer.uses_embeddings for scorer in self.scoring().scorers):
            return None
        return self.evaluation.embedding_model or self.grid.embedding_model[0]

    def section_embedding_model(self, section: TestsetConfig | RerankerTrainingConfig) -> str:
        return section.embedding_model or self.grid.embedding_model[0]

    @property
    def trained_reranker_name(self) -> str:
        return self.reranker_training.name or re.sub(r"[^A-Za-z0-9_.-]+", "-", self.name)


def _set_dotted(data: dict[str, Any], dotted_key: str, value: Any) -> None:
    keys = dotted_key.split(".")
    node = data
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted_key}: '{key}' is not a section")
        node = child
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`grid.chunk_sizes=[128,256]` -> ("grid.chunk_sizes", [128, 256]); values are YAML."""
    key, separator, raw_value = text.partition("=")
    if not separator or not key.strip():
        raise ConfigError(f"--set expects key=value, got {text!r}")
    try:
        return key.strip(), load_yaml(raw_value, f"--set {key}: value")
    except TableError as error:
        raise ConfigError(str(error)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> BenchmarkConfig:
    """The config file at `path` (None: configs/default.yaml) with `overrides`, each a `--set` value
    (`"grid.chunk_size=[128,256]"`), validated at once; `ConfigError` names each offending key. Relative
    paths in the file resolve against its folder (so a scheduled run works from any directory), in
    overrides against the current directory; a file without `name` is named after the file."""
    config_path = Path(path) if path else DEFAULT_CONFIG_PATH
    if not config_path.is_file():
        raise ConfigError(f"config file not found: {config_path}")
    try:
        data = load_yaml(read_utf8(config_path), config_path) or {}
    except TableError as error:
        raise ConfigError(str(error)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{config_path}: top level must be a mapping")
    data = resolve_paths(data, config_path.resolve().parent)
    if "name" not in data:  # two unnamed configs must never share one history by accident
        if not re.match(CONFIG_NAME, config_path.stem):
            raise ConfigError(
                f"{config_path} has no `name`, and its file name {config_path.stem!r} is not a valid config "
                f"name ({CONFIG_NAME_RULE}): add e.g. `name: {suggested_name(config_path.stem)}`"
            )
        data["name"] = config_path.stem
        logger.info(
            "config %s has no name: its runs are named after the file, %r", config_path, config_path.stem
        )
    for override in overrides or []:
        key, value = parse_override(override)
        _set_dotted(data, key, resolve_override_paths(key, value, Path.cwd()))
    try:
        return BenchmarkConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(validation_message(error)) from None
