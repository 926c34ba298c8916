"""The one config model: validated in full before any model loads, so bad input fails fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragbench.eval_cases import EvalCase
from ragbench.llm.types import LLMSettings

DEFAULT_LOCAL_LLM = "local/qwen2.5-coder-1.5b-instruct"

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


class ConfigError(ValueError):
    """A config that cannot be run; the message names the offending key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KnowledgeBaseConfig(_Strict):
    """Where documents come from; `kind` selects which of the other fields apply."""

    kind: Literal["pydoc_topics", "folder", "file", "hf_dataset"] = "pydoc_topics"
    path: str | None = Field(default=None, description="folder (kind=folder) or data file (kind=file)")
    dataset: str | None = Field(default=None, description="Hugging Face dataset name (kind=hf_dataset)")
    split: str = "train"
    revision: str | None = None
    text_column: str = "text"
    source_column: str = "source"
    limit: int | None = Field(default=None, gt=0, description="keep only the first N documents")

    @model_validator(mode="after")
    def _check_kind_fields(self) -> KnowledgeBaseConfig:
        if self.kind in {"folder", "file"} and not self.path:
            raise ValueError(f"knowledge_base.path is required when kind is {self.kind!r}")
        if self.kind == "hf_dataset" and not self.dataset:
            raise ValueError("knowledge_base.dataset is required when kind is 'hf_dataset'")
        return self


class EvalCasesConfig(_Strict):
    """Where eval cases come from: a file in ragbench's schema (.yaml/.json/.jsonl), or a table whose
    columns are mapped onto that schema (a .jsonl/.json/.csv/.parquet file with `columns`, or a
    Hugging Face dataset such as the cookbook's ``m-ric/huggingface_doc_qa_eval``)."""

    path: str | None = Field(default=None, description="eval case file")
    dataset: str | None = Field(default=None, description="Hugging Face dataset name or local dataset folder")
    split: str = "train"
    revision: str | None = None
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="eval-case field -> column of the table, e.g. {reference_answer: answer}; "
        "unmapped fields are read from the column of the same name when it exists",
    )
    limit: int | None = Field(default=None, gt=0, description="keep only the first N cases")

    @model_validator(mode="after")
    def _check_source(self) -> EvalCasesConfig:
        if (self.path is None) == (self.dataset is None):
            raise ValueError("eval_cases needs exactly one of path or dataset")
        unknown = sorted(set(self.columns) - set(EvalCase.model_fields))
        if unknown:
            raise ValueError(
                f"eval_cases.columns: unknown field(s) {unknown}; fields: {sorted(EvalCase.model_fields)}"
            )
        return self

    @property
    def label(self) -> str:
        return self.path or f"dataset {self.dataset}"


class ChunkingConfig(_Strict):
    """One tokenizer for all embeddings, so every model is compared on identical chunks."""

    tokenizer: str | None = Field(
        default=None, description="model whose tokenizer measures chunk length; default: first embedding"
    )
    overlap_ratio: float = Field(default=0.1, ge=0.0, lt=1.0)
    overlap: int | None = Field(default=None, ge=0, description="absolute overlap in tokens; wins over ratio")

    def overlap_for(self, chunk_size: int) -> int:
        return self.overlap if self.overlap is not None else round(chunk_size * self.overlap_ratio)


class GridConfig(_Strict):
    chunk_sizes: list[int] = Field(default=[128, 256], min_length=1)
    embedding_models: list[str] = Field(
        default=["sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"],
        min_length=1,
    )

    rerank: list[bool] = Field(default=[False], min_length=1, description="ColBERT reranking off/on")
    readers: list[str] = Field(
        default=[DEFAULT_LOCAL_LLM], description="reader LLMs (litellm model strings); empty = retrieval only"
    )

    @model_validator(mode="after")
    def _check_values(self) -> GridConfig:
        if any(size < 16 for size in self.chunk_sizes):
            raise ValueError("grid.chunk_sizes must all be at least 16 tokens")
        for name, values in (
            ("chunk_sizes", self.chunk_sizes),
            ("embedding_models", self.embedding_models),
            ("rerank", self.rerank),
            ("readers", self.readers),
        ):
            if len(set(values)) != len(values):
                raise ValueError(f"grid.{name} has duplicates: {values}")
        return self


class RetrievalConfig(_Strict):
    top_k: int = Field(default=30, ge=1, description="chunks retrieved per question")
    metrics_k: int = Field(default=5, ge=1, description="cut-off for hit rate, recall and failure rate")

    @model_validator(mode="after")
    def _check_k(self) -> RetrievalConfig:
        if self.metrics_k > self.top_k:
            raise ValueError("retrieval.metrics_k cannot exceed retrieval.top_k")
        return self


class GenerationConfig(_Strict):
    """How the end-to-end part runs: context size, which cases, and the reader's LLM settings."""

    top_n: int = Field(default=7, ge=1, description="passages given to the reader (after reranking)")
    sample_size: int | None = Field(
        default=None, ge=1, description="cases answered end to end (seeded sample, same in every cell)"
    )
    seed: int = 42
    reranker: str = Field(default="colbert-ir/colbertv2.0", description="ColBERT checkpoint for rerank=true")
    reader: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 256},
        description="LLMSettings fields (except model) applied to every reader in grid.readers",
    )

    def reader_settings(self, model: str) -> LLMSettings:
        return LLMSettings(model=model, **self.reader)


class EvaluationConfig(_Strict):
    keyword_tests: bool = True
    judge: LLMSettings | None = Field(
        default=LLMSettings(model=DEFAULT_LOCAL_LLM, max_tokens=320), description="null disables the judge"
    )
    rubrics: list[Literal["correctness", "context"]] = Field(default=["correctness", "context"])


class BenchmarkConfig(_Strict):
    name: str = "default"
    knowledge_base: KnowledgeBaseConfig = KnowledgeBaseConfig()
    eval_cases: EvalCasesConfig = EvalCasesConfig(path="configs/eval_cases/python_reference.yaml")
    chunking: ChunkingConfig = ChunkingConfig()
    grid: GridConfig = GridConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    llm_cache_dir: str | None = Field(default=None, description="default: $RAGBENCH_CACHE_DIR/llm")
    output_dir: str = "output"

    @field_validator("eval_cases", mode="before")
    @classmethod
    def _path_shorthand(cls, value: Any) -> Any:
        """`eval_cases: cases.yaml` is short for `eval_cases: {path: cases.yaml}`."""
        return {"path": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_overlap(self) -> BenchmarkConfig:
        for size in self.grid.chunk_sizes:
            overlap = self.chunking.overlap_for(size)
            if overlap >= size:
                raise ValueError(
                    f"chunk overlap ({overlap} tokens) must be smaller than chunk size ({size} tokens)"
                )
        return self

    @model_validator(mode="after")
    def _check_generation(self) -> BenchmarkConfig:
        for model in self.grid.readers:
            try:
                self.generation.reader_settings(model)
            except ValidationError as error:
                problem = _format_validation_error(error)
                raise ValueError(f"generation.reader for {model}: {problem}") from None
        if self.grid.readers and self.generation.top_n > self.retrieval.top_k:
            raise ValueError("generation.top_n cannot exceed retrieval.top_k")
        return self

    @property
    def chunking_tokenizer(self) -> str:
        return self.chunking.tokenizer or self.grid.embedding_models[0]


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
        return key.strip(), yaml.safe_load(raw_value)
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {key}: value is not valid YAML: {error}") from error


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
    """Read YAML, apply `--set` overrides, validate everything at once."""
    config_path = Path(path) if path else DEFAULT_CONFIG_PATH
    if not config_path.is_file():
        raise ConfigError(f"config file not found: {config_path}")
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{config_path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"{config_path}: top level must be a mapping")
    for override in overrides or []:
        key, value = parse_override(override)
        _set_dotted(data, key, value)
    try:
        return BenchmarkConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error)) from None
