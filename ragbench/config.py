"""The one config model: validated in full before any model loads, so bad input fails fast."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ragbench.ann import FLAT_INDEX, IndexSpec
from ragbench.config_paths import resolve_override_paths, resolve_paths
from ragbench.eval_cases import EvalCase
from ragbench.external import ExternalSystem
from ragbench.keyword_tests import BUILTIN_SUITES, AssertionSuite
from ragbench.knowledge_base import KnowledgeBaseConfig
from ragbench.llm.cache import check_cache_url, is_database_url
from ragbench.llm.redaction import is_secret_name
from ragbench.llm.types import LLMSettings
from ragbench.models import MODEL_CACHE_ENV_VAR
from ragbench.pairwise import DEFAULT_CRITERION
from ragbench.prompts import DEFAULT_PROMPT, DEFAULT_PROMPT_NAME, PromptTemplate, load_prompt
from ragbench.rubrics import BUILTIN_RUBRICS, CustomRubric, names_of, select_rubrics
from ragbench.scoring import Scoring
from ragbench.tables import TableError, load_yaml, read_utf8
from ragbench.uris import is_uri

DEFAULT_LOCAL_LLM = "local/qwen2.5-coder-1.5b-instruct"

DEFAULT_RERANKER = "colbert-ir/colbertv2.0"

logger = logging.getLogger("ragbench")

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


class ConfigError(ValueError):
    """A config that cannot be run; the message names the offending key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvalCasesConfig(_Strict):
    """Where eval cases come from: a file in ragbench's schema (.yaml/.json/.jsonl, e.g. a set exported by
    `run.py testset`), a ZenML artifact that `run.py testset` made (by name, and version or the latest), or
    a table whose columns are mapped onto that schema (a .jsonl/.json/.csv/.parquet file with `columns`,
    or a Hugging Face dataset such as the cookbook's ``m-ric/huggingface_doc_qa_eval``)."""

    path: str | None = Field(default=None, description="eval case file")
    dataset: str | None = Field(default=None, description="Hugging Face dataset name or local dataset folder")
    artifact: str | None = Field(default=None, description="name of an eval set artifact from run.py testset")
    version: str | int | None = Field(default=None, description="artifact version; default: the latest")
    split: str = Field(default="train", description="dataset split (dataset)")
    revision: str | None = Field(default=None, description="dataset revision (git tag, branch or commit)")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="eval-case field -> column of the table, e.g. {reference_answer: answer}; "
        "unmapped fields are read from the column of the same name when it exists",
    )
    limit: int | None = Field(default=None, gt=0, description="keep only the first N cases")

    @model_validator(mode="after")
    def _check_source(self) -> EvalCasesConfig:
        if sum(source is not None for source in (self.path, self.dataset, self.artifact)) != 1:
            raise ValueError("eval_cases needs exactly one of path, dataset or artifact")
        if self.version is not None and self.artifact is None:
            raise ValueError("eval_cases.version applies to an artifact only")
        unknown = sorted(set(self.columns) - set(EvalCase.model_fields))
        if unknown:
            raise ValueError(
                f"eval_cases.columns: unknown field(s) {unknown}; fields: {sorted(EvalCase.model_fields)}"
            )
        return self

    @property
    def on_client(self) -> bool:
        """A file or dataset folder on the client's disk: the client loads the cases and hands the run a
        snapshot artifact. URIs, Hub datasets and artifacts load in the step."""
        if self.path is not None:
            return not is_uri(self.path)
        return self.dataset is not None and Path(self.dataset).expanduser().exists()

    @property
    def label(self) -> str:
        if self.artifact is not None:
            version = "latest version" if self.version is None else f"version {self.version}"
            return f"artifact {self.artifact} ({version})"
        return self.path or f"dataset {self.dataset}"


class ChunkingConfig(_Strict):
    """One tokenizer for all embeddings, so every model is compared on identical chunks."""

    tokenizer: str | None = Field(
        default=None, description="model whose tokenizer measures chunk length; default: first embedding"
    )


class EmbeddingConfig(_Strict):
    """How indexes are built (not what they contain: vectors do not depend on these)."""

    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="where the index step encodes: auto = a GPU where the step has one"
    )

    shard_size: int = Field(
        default=2048,
        ge=1,
        description="chunks embedded per shard; each finished shard is checkpointed in the artifact store, "
        "so an index build that was killed resumes and re-embeds at most one shard",
    )


# Names the grid had before every axis became a list field of the same name as the cell's field.
_RENAMED_AXES = {
    "chunk_sizes": "chunk_size",
    "embedding_models": "embedding_model",
    "rerank": "reranker",
    "readers": "reader",
}

LLMEntry = str | dict[str, Any]


class GridConfig(_Strict):
    """Every field is an axis and the grid is their product (see `ragbench.grid`); a single value
    may be written without brackets. Field names match `CellSpec`'s, one field per axis."""

    chunk_size: list[int] = Field(default=[128, 256], min_length=1, description="chunk sizes in tokens")
    chunk_overlap: list[float] = Field(
        default=[0.1], min_length=1, description="below 1: a share of the chunk size; 1 or more: tokens"
    )
    embedding_model: list[str] = Field(
        default=["sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"],
        min_length=1,
        description="sentence-transformers models (Hub names, packaged names or local folders)",
    )
    retriever: list[Literal["dense", "bm25", "hybrid"]] = Field(
        default=["dense"],
        min_length=1,
        description="dense (the embedding's FAISS index), bm25 (lexical: bm25s, see ragbench.lexical) or "
        "hybrid (reciprocal-rank fusion of both); a bm25 cell has no embedding_model or index",
    )
    index: list[str] = Field(
        default=[FLAT_INDEX],
        min_length=1,
        description="FAISS index types: flat (exact), hnsw, ivf, or with parameters, e.g. "
        "hnsw(m=32,ef_search=128), ivf(nlist=1024,nprobe=16,encoding=sq8) (see ragbench.ann)",
    )
    top_k: list[PositiveInt] = Field(default=[30], min_length=1, description="chunks retrieved per question")
    top_n: list[PositiveInt] = Field(default=[7], min_length=1, description="passages given to the reader")
    reranker: list[str | bool | None] = Field(
        default=[None],
        min_length=1,
        description="off (null, false or 'off') or a ColBERT checkpoint; true = colbert-ir/colbertv2.0",
    )
    reader: list[LLMEntry] = Field(
        default=[DEFAULT_LOCAL_LLM],
        description="litellm model strings or LLMSettings mappings; empty = retrieval only",
    )
    prompt: list[str] = Field(default=[DEFAULT_PROMPT_NAME], min_length=1, description="names in `prompts`")
    judge: list[LLMEntry] = Field(
        default=[DEFAULT_LOCAL_LLM], description="judge models (strings or mappings); empty = no judge"
    )

    @model_validator(mode="before")
    @classmethod
    def _lists_and_renames(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for old, new in _RENAMED_AXES.items():
            if old in data:
                raise ValueError(f"grid.{old} is now grid.{new} (every axis is named like the cell field)")
        return {key: value if isinstance(value, list) else [value] for key, value in data.items()}

    @field_validator("reranker")
    @classmethod
    def _normalise_reranker(cls, values: list[str | bool | None]) -> list[str | None]:
        return [
            None
            if value is None or value is False or value == "off"
            else DEFAULT_RERANKER
            if value is True
            else value
            for value in values
        ]

    @field_validator("index")
    @classmethod
    def _canonical_index_names(cls, values: list[str]) -> list[str]:
        """Each index type by its canonical name, so equal specs written differently are one index."""
        return [IndexSpec.parse(value).name for value in values]

    @model_validator(mode="after")
    def _check_values(self) -> GridConfig:
        if any(size < 16 for size in self.chunk_size):
            raise ValueError("grid.chunk_size values must all be at least 16 tokens")
        if any(
            not math.isfinite(overlap) or overlap < 0 or (overlap >= 1 and not overlap.is_integer())
            for overlap in self.chunk_overlap
        ):
            raise ValueError("grid.chunk_overlap values are shares in [0, 1) or whole numbers of tokens")
        for name in type(self).model_fields:
            values = [json.dumps(v, sort_keys=True, default=str) for v in getattr(self, name)]
            if len(set(values)) != len(values):
                raise ValueError(f"grid.{name} has duplicates: {getattr(self, name)}")
        return self


class RetrievalConfig(_Strict):
    """Retrieval metrics, computed on every case with expected sources."""

    metrics_k: int = Field(default=5, ge=1, description="cut-off for hit rate, recall and failure rate")
    rrf_k: int = Field(
        default=60,
        ge=1,
        description="hybrid retrieval: the k of reciprocal-rank fusion, score = sum of 1/(k + rank) over "
        "bm25 and dense, each ranking top_k deep",
    )


class GenerationConfig(_Strict):
    """Which cases run end to end, and the LLM settings every reader of the grid shares."""

    sample_size: int | None = Field(
        default=None, ge=1, description="cases answered end to end (seeded sample, same in every cell)"
    )
    seed: int = Field(default=42, description="seed of the end-to-end sample")
    reader: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 256},
        description="LLMSettings fields applied to every reader in grid.reader (an entry's own fields win)",
    )


class PairwiseConfig(_Strict):
    """Blinded pairwise judging: every answer set against its counterpart with the baseline's values."""

    baseline: dict[str, str] = Field(
        description="the baseline's axis values, e.g. {reader: local/qwen2.5-0.5b-instruct} or "
        "{retriever: dense}; a string is short for {reader: ...}. Each answer set that differs from it on "
        "these axes only is compared with it, case by case, by every judge; {external: <system name>}: "
        "every other answer set against that system's"
    )
    criterion: str = Field(default=DEFAULT_CRITERION, min_length=1, description="what 'better' means")
    seed: int = Field(default=0, description="seed of the order the two answers are shown in")

    @field_validator("baseline", mode="before")
    @classmethod
    def _reader_shorthand(cls, value: Any) -> Any:
        return {"reader": value} if isinstance(value, str) else value

    @field_validator("baseline")
    @classmethod
    def _not_empty(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("evaluation.pairwise.baseline names no axis")
        return value


class EvaluationConfig(_Strict):
    """How answers are scored: keyword tests and the LLM judge."""

    keyword_tests: bool = Field(
        default=True, description="run the built-in keyword suites (the cases' words) on every answer"
    )
    judge: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 320},
        description="LLMSettings fields applied to every judge in grid.judge (an entry's own fields win)",
    )
    rubrics: list[str] = Field(
        default=["correctness", "context"],
        description=f"built-in judge rubrics, any of {', '.join(BUILTIN_RUBRICS)}: correctness against the "
        "reference answer; context: faithfulness to the passages, relevance, helpfulness, toxicity",
    )
    custom_rubrics: list[CustomRubric] = Field(
        default_factory=list,
        description="your own judge rubrics, each {name, criteria, inputs, scale, anchors, tags, "
        "higher_is_better}: a metric named after it (docs/how-to/metrics.md)",
    )
    custom_suites: list[AssertionSuite] = Field(
        default_factory=list,
        description="your own deterministic checks, each {name, assert, value, match, tags, label}: "
        "assert is contains, contains-any, contains-all, starts-with, regex, max-length or is-json, "
        "or not-<any of them>; a metric fail_<name>",
    )
    pairwise: PairwiseConfig | None = Field(
        default=None, description="blinded pairwise judging against a baseline (docs/how-to/pairwise.md)"
    )
    judge_samples: int = Field(
        default=1,
        ge=1,
        le=20,
        description="verdicts per answer and rubric: more than 1 measures the judge's self-consistency "
        "and needs judge temperature > 0",
    )

    @field_validator("rubrics")
    @classmethod
    def _known_rubrics(cls, names: list[str]) -> list[str]:
        if unknown := [name for name in names if name not in BUILTIN_RUBRICS]:
            raise ValueError(
                f"unknown rubric(s) {', '.join(unknown)}; built in: {', '.join(BUILTIN_RUBRICS)}"
            )
        return names

    @model_validator(mode="after")
    def _custom_names_are_not_builtin(self) -> EvaluationConfig:
        """A custom metric never takes a built-in's name, whether or not that built-in is on: a run that
        turns it on later, or a reader of the results, would take one for the other."""
        builtin = names_of(BUILTIN_RUBRICS.values()) | {suite.name for suite in BUILTIN_SUITES}
        custom = [rubric.name for rubric in self.custom_rubrics] + [
            suite.name for suite in self.custom_suites
        ]
        if taken := sorted(builtin.intersection(custom)):
            raise ValueError(
                f"custom metric name(s) {', '.join(taken)} belong to built-in metrics (built in: "
                f"{', '.join(sorted(builtin))}): choose another name"
            )
        return self

    def scoring(self, metrics_k: int) -> Scoring:
        """The registry of the metrics these settings make, with retrieval's at `metrics_k`."""
        return Scoring(
            rubrics=tuple(select_rubrics(self.rubrics, self.custom_rubrics)),
            suites=(*(BUILTIN_SUITES if self.keyword_tests else ()), *self.custom_suites),
            metrics_k=metrics_k,
        )


def llm_settings(entry: LLMEntry, defaults: dict[str, Any]) -> LLMSettings:
    """A grid entry (model string or mapping) over the shared defaults of its role."""
    fields = {"model": entry} if isinstance(entry, str) else entry
    return LLMSettings(**{**defaults, **fields})


class StatisticsConfig(_Strict):
    """How the uncertainty of every number is estimated (docs/concepts/uncertainty.md)."""

    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, description="level of every interval")
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="significance level of paired tests")
    resamples: int = Field(default=2000, ge=100, le=100_000, description="bootstrap and permutation draws")
    seed: int = Field(default=0, description="seed of bootstrap and permutation draws")


# Gate thresholds every config has unless it names the metric itself: latency has no per-case values, so
# its threshold alone decides whether a slower p95 is a regression.
DEFAULT_THRESHOLDS = {"latency_p95_s": 1.0}


class RegressionConfig(_Strict):
    """The regression gate (the pipeline's last step, and `run.py compare`): which run is the baseline,
    and how far a tracked metric may move in its bad direction before it is a regression."""

    baseline: Literal["previous", "champion", "none"] = Field(
        default="previous",
        description="previous: the newest earlier run of this config that passed its gate or was promoted "
        "(never a regressed, incomplete or failed one); champion: the run promoted for this config "
        "(`run.py promote RUN`); none: only check the run is complete",
    )
    on_eval_change: Literal["fail", "warn"] = Field(
        default="fail",
        description="when the eval cases differ from the baseline's: fail the gate (default), or warn and "
        "compare anyway (accept the new eval set once with --set regression.on_eval_change=warn)",
    )
    default_threshold: float = Field(default=0.0, ge=0.0, description="for metrics not named below")
    thresholds: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_THRESHOLDS),
        description="metric key (as in run metadata, e.g. hit_rate_at_5) -> allowed change; merged over the "
        "defaults (latency_p95_s: 1.0 s), so naming one metric keeps the others",
    )

    @field_validator("thresholds")
    @classmethod
    def _merge_over_defaults(cls, thresholds: dict[str, float]) -> dict[str, float]:
        """A map that names one metric must not drop the latency default: latency has no per-case values,
        so its threshold alone decides, and 0.0 would fail every night whose p95 rose at all."""
        if negative := sorted(key for key, value in thresholds.items() if value < 0):
            raise ValueError(f"{', '.join(negative)}: a threshold is an allowed change, 0 or more")
        return {**DEFAULT_THRESHOLDS, **thresholds}


class OrchestrationConfig(_Strict):
    """Where the steps run and what they get there: on the local orchestrator every field may stay empty;
    on a team's stack (Kubernetes, Vertex, local_docker...) these reach every step. See
    docs/how-to/team-stack.md."""

    docker: dict[str, Any] = Field(
        default_factory=dict,
        description="ZenML DockerSettings fields for the pipeline's image, e.g. {parent_image: "
        "ragbench:local, skip_build: true}; docker/README.md builds that image",
    )
    orchestrator: dict[str, Any] = Field(
        default_factory=dict,
        description="settings of the active orchestrator, passed to ZenML as settings['orchestrator'] "
        "(e.g. local_docker {run_args: {volumes: ...}}, kubernetes {pod_settings: ...})",
    )
    secrets: list[str] = Field(
        default_factory=list,
        description="ZenML secrets whose keys become environment variables in every step (API keys, "
        "PGPASSWORD); preflight checks that they exist and hold the keys the models need",
    )
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="plain environment variables for every step; names that look like credentials are "
        "refused (use secrets)",
    )
    model_cache: str | None = Field(
        default=None,
        description="folder inside the steps where models are provisioned and verified (a mounted volume on "
        "a cluster); default: $RAGBENCH_CACHE_DIR/models where the step runs",
    )

    @model_validator(mode="after")
    def _check_environment(self) -> OrchestrationConfig:
        """Environment variables given here are stored with the run's configuration (and baked into an
        image for docker's): a key or password belongs in a ZenML secret named in `secrets` instead."""
        for where, variables in (
            ("orchestration.environment", self.environment),
            ("orchestration.docker.environment", self.docker.get("environment") or {}),
            ("orchestration.docker.runtime_environment", self.docker.get("runtime_environment") or {}),
        ):
            leaking = sorted(name for name in variables if is_secret_name(name))
            if leaking:
                raise ValueError(
                    f"{where}: {', '.join(leaking)} look like credentials; put them in a ZenML secret "
                    "and name it in orchestration.secrets"
                )
        return self

    def added_environment(self) -> dict[str, str]:
        """The variables this section adds to every step's environment, secrets aside."""
        cache = {MODEL_CACHE_ENV_VAR: self.model_cache} if self.model_cache else {}
        return {**self.environment, **cache}


class TestsetConfig(_Strict):
    """`run.py testset`: generate eval cases from the knowledge base, critique them, keep the good ones.
    See docs/how-to/eval-sets.md."""

    __test__ = False  # not a pytest test class, despite its name

    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="ZenML artifact name of the eval set; default: '<config name>-eval-set'",
    )
    chunks: int = Field(default=20, ge=1, description="chunks sampled; each seeds questions_per_chunk cases")
    questions_per_chunk: int = Field(
        default=1,
        ge=1,
        le=10,
        description="questions the generator writes per sampled chunk, in one call (each is evolved and "
        "filtered on its own; near-duplicates are removed)",
    )
    sampling: Literal["proportional", "even"] = Field(
        default="proportional",
        description="proportional: sources in proportion to their chunks; even: the same from each source",
    )
    min_chunk_chars: int = Field(default=200, ge=0, description="shorter chunks are never sampled")
    seed: int = Field(default=0, description="seed of the chunk sample and the evolution mix")
    chunk_size: int | None = Field(default=None, ge=16, description="default: the largest grid.chunk_size")
    chunk_overlap: float | None = Field(
        default=None, ge=0, description="default: the first grid.chunk_overlap"
    )
    embedding_model: str | None = Field(
        default=None, description="for related chunks, retrieval checks and near-duplicates; default: first"
    )
    generator: LLMEntry = Field(default=DEFAULT_LOCAL_LLM, description="writes questions and answers")
    critic: LLMEntry | None = Field(default=None, description="rates them; default: the generator")
    generator_defaults: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 300}, description="LLM settings shared by the generator"
    )
    critic_defaults: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 300}, description="LLM settings shared by the critic"
    )
    audience: str = Field(
        default="developers who use and look things up in this documentation",
        min_length=1,
        description="who the knowledge base is for: the generator writes for them, the relevance critic "
        "rates for them",
    )
    evolutions: dict[str, float] = Field(
        default_factory=lambda: {"simple": 0.4, "reasoning": 0.2, "conditional": 0.2, "multi_context": 0.2},
        description="share of answerable cases of each evolution type (shares add up to 1; the types are "
        "those of ragbench.testset.rubrics.EVOLUTIONS)",
    )
    unanswerable_share: float = Field(
        default=0.15,
        ge=0.0,
        lt=1.0,
        description="share of all cases whose answer is not in the knowledge base",
    )
    thresholds: dict[str, int] = Field(
        default_factory=dict,
        description="critic -> lowest rating (1-5) a kept case has (default 4 for a critic not named); every "
        "critic that rates a case must pass; the critics are those of ragbench.testset.rubrics.CRITICS",
    )
    retrieved_passages: int = Field(
        default=5, ge=1, description="passages of the whole knowledge base the unanswerable critic sees"
    )
    duplicate_similarity: float = Field(
        default=0.9, gt=0.0, le=1.0, description="questions at least this similar (cosine) are duplicates"
    )
    max_good_words: int = Field(default=3, ge=0, description="keyword candidates per case")
    filters: list[Literal["roundtrip", "critics"]] = Field(
        default=["roundtrip"],
        min_length=1,
        description="what decides which cases are kept (a case must pass every filter listed): "
        "roundtrip, the critic model answering each question back as a reader (docs/how-to/eval-sets.md); "
        "critics, its 1-5 ratings against testset.thresholds",
    )
    roundtrip_f1: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="token F1 from which a reader's answer agrees with the proposed one",
    )
    roundtrip_short_answer_tokens: int = Field(
        default=12,
        ge=1,
        description="a proposed answer of more tokens is long: where word overlap cannot decide, the critic "
        "model says whether two answers state the same facts",
    )
    labels: str | None = Field(
        default=None,
        description="a file of a person's verdicts on candidates ({id, question, human_keep, reason}, "
        "YAML or JSONL): each filter's precision, recall and kappa against them are reported",
    )

    @model_validator(mode="after")
    def _check_mix(self) -> TestsetConfig:
        if any(not math.isfinite(share) or share < 0 for share in self.evolutions.values()):
            raise ValueError("testset.evolutions: shares must be numbers of at least 0")
        if abs(sum(self.evolutions.values()) - 1.0) > 1e-6:
            raise ValueError(f"testset.evolutions: shares add up to {sum(self.evolutions.values()):g}, not 1")
        if any(not 1 <= value <= 5 for value in self.thresholds.values()):
            raise ValueError("testset.thresholds: ratings are 1-5")
        for role, entry, defaults in (
            ("generator", self.generator, self.generator_defaults),
            ("critic", self.critic_entry, self.critic_defaults),
        ):
            try:
                llm_settings(entry, defaults)
            except ValidationError as error:
                raise ValueError(f"testset.{role} {entry!r}: {_format_validation_error(error)}") from None
        return self

    @property
    def critic_entry(self) -> LLMEntry:
        return self.generator if self.critic is None else self.critic

    def generator_settings(self) -> LLMSettings:
        return llm_settings(self.generator, self.generator_defaults)

    def critic_settings(self) -> LLMSettings:
        return llm_settings(self.critic_entry, self.critic_defaults)


# A config's name keys its history (run names, tags, schedules, eval sets, output folders): lowercase so
# that no two names can meet in a case-insensitive store, no character that a run name template, a path, a
# tag filter or a crontab line would read, and short enough for ZenML's run names.
CONFIG_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"
CONFIG_NAME_RULE = "1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


def suggested_name(text: str) -> str:
    """A valid name close to `text`, for the message that refuses it."""
    name = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-._")[:64]
    return name or "my-benchmark"


class BenchmarkConfig(_Strict):
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
        description="where eval cases come from; default: the 50 packaged cases on the Python language "
        "reference (configs/eval_cases/python_reference.yaml). A string is short for {path: ...}",
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
    regression: RegressionConfig = RegressionConfig()
    testset: TestsetConfig = TestsetConfig()
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
    output_dir: str = Field(
        default="output", description="where run.py writes reports, comparisons, eval sets"
    )

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

    @field_validator("eval_cases", mode="before")
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
        size, tokens = self.testset_chunking()
        if tokens >= size:
            raise ValueError(
                f"testset: chunk overlap ({tokens} tokens) must be smaller than chunk size ({size} tokens)"
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
                    problem = _format_validation_error(error)
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
    def _check_systems(self) -> BenchmarkConfig:
        names = [system.name for system in self.systems]
        if duplicated := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"systems: names must be unique, {duplicated} repeat")
        if not self.benchmark_grid and not self.systems:
            raise ValueError("benchmark_grid: false leaves nothing to benchmark: add `systems`")
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

    def testset_chunking(self) -> tuple[int, int]:
        """(chunk size, overlap in tokens) of the chunks cases are written from: by default the grid's
        largest chunks, so a benchmark run has usually made them already (ZenML reuses the step)."""
        size = self.testset.chunk_size or max(self.grid.chunk_size)
        overlap = (
            self.grid.chunk_overlap[0] if self.testset.chunk_overlap is None else self.testset.chunk_overlap
        )
        return size, overlap_tokens(size, overlap)

    @property
    def testset_embedding_model(self) -> str:
        return self.testset.embedding_model or self.grid.embedding_model[0]


def overlap_tokens(chunk_size: int, overlap: float) -> int:
    """A share of the chunk size (below 1) or a number of tokens (1 or more)."""
    return round(chunk_size * overlap) if overlap < 1 else int(overlap)


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


def _format_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"  {location}: {message}")
    return "invalid config:\n" + "\n".join(lines)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> BenchmarkConfig:
    """Read YAML, apply `--set` overrides, validate everything at once. Relative paths in the file
    resolve against its folder (so a scheduled run works from any directory), in `--set` values against
    the current directory."""
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
        raise ConfigError(_format_validation_error(error)) from None
