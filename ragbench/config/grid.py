"""The grid section of the config (`grid`): one list field per built-in axis, named like the cell's field
(`ragbench.grid.cell.CellSpec`), and the values of every registered axis (`ragbench.grid.axes.AXES`) under
their own names. How a list becomes cell values is each axis's entry's to say (`ragbench.config.expand`)."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PositiveInt,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from ragbench.grid.axes import AXES, Axis
from ragbench.grid.cell import DEFAULT_RETRIEVER
from ragbench.inputs.chunking import overlap_tokens
from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.llm.prompts import DEFAULT_PROMPT_NAME
from ragbench.llm.types import LLMEntry
from ragbench.retrieval.ann import FLAT_INDEX, IndexSpec
from ragbench.retrieval.rerank import DEFAULT_RERANKER
from ragbench.retrieval.retrievers import RETRIEVERS, retriever_class
from ragbench.retrieval.rewrite import OFF, QueryRewrite
from ragbench.section import Section

# Names the grid had before every axis became a list field of the same name as the cell's field.
_RENAMED_AXES = {
    "chunk_sizes": "chunk_size",
    "embedding_models": "embedding_model",
    "rerank": "reranker",
    "readers": "reader",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _one_or_a_list(schema: dict[str, Any], model: type) -> None:
    """The grid's JSON Schema as YAML is written (`_lists_and_renames`): every axis one value or a list of
    them, and each registered axis a key of its own (`_registered_axes`), so an editor completes them too."""
    properties = schema["properties"]
    for name, axis in AXES.registered().items():
        properties[name] = TypeAdapter(list[axis.value_type | None]).json_schema()
    for name, field in list(properties.items()):
        if field.get("type") == "array":
            properties[name] = {"anyOf": [field["items"], field], **_described(name, field)}


def _described(name: str, field: dict[str, Any]) -> dict[str, Any]:
    return {key: field[key] for key in ("title", "description", "default") if key in field}


def _registered_values(axis: Axis, written: Any) -> list[Any]:
    """A registered axis's list, each value of its type or None (not set), once each; a bare YAML `off`
    (false) is its `off`."""
    values = [
        axis.off if value is False and isinstance(axis.off, str) else value for value in _as_list(written)
    ]
    try:
        values = TypeAdapter(list[axis.value_type | None]).validate_python(values)
    except ValidationError as error:
        raise ValueError(f"grid.{axis.name}: {error.errors()[0]['msg']}") from None
    if not values:
        raise ValueError(f"grid.{axis.name} needs at least one value")
    if len({json.dumps(value, sort_keys=True, default=str) for value in values}) != len(values):
        raise ValueError(f"grid.{axis.name} has duplicates: {values}")
    return values


class GridConfig(Section):
    """Every field is an axis and the grid is their product (see `ragbench.grid.cell`); a single value
    may be written without brackets. Field names match `CellSpec`'s, one field per axis; a registered axis
    (`ragbench.grid.axes.AXES`) is written the same way, `grid.<name>`, and kept beside the fields."""

    model_config = ConfigDict(json_schema_extra=_one_or_a_list)

    chunk_size: list[int] = Field(default=[128, 256], min_length=1, description="chunk sizes in tokens")
    chunk_overlap: list[float] = Field(
        default=[0.1], min_length=1, description="below 1: a share of the chunk size; 1 or more: tokens"
    )
    embedding_model: list[str] = Field(
        default=["sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"],
        min_length=1,
        description="sentence-transformers models (Hub names, packaged names or local folders)",
    )
    retriever: list[str] = Field(
        default=[DEFAULT_RETRIEVER],
        min_length=1,
        description="dense (the embedding's FAISS index), bm25 (lexical: bm25s, see "
        "ragbench.retrieval.lexical), hybrid (reciprocal-rank fusion of both) or one another installed "
        "package registers in the entry point group ragbench.retrievers; a cell whose retriever reads no "
        "dense index (bm25) has no embedding_model or index",
    )
    index: list[str] = Field(
        default=[FLAT_INDEX],
        min_length=1,
        description="FAISS index types: flat (exact), hnsw, ivf, or with parameters, e.g. "
        "hnsw(m=32,ef_search=128), ivf(nlist=1024,nprobe=16,encoding=sq8) (see ragbench.retrieval.ann)",
    )
    top_k: list[PositiveInt] = Field(default=[30], min_length=1, description="chunks retrieved per question")
    query_rewrite: list[QueryRewrite] = Field(
        default=["off"],
        min_length=1,
        description="off, condense, hyde or multi_query (ragbench.retrieval.rewrite)",
    )
    top_n: list[PositiveInt] = Field(default=[7], min_length=1, description="passages given to the reader")
    reranker: list[str | bool | None] = Field(
        default=[None],
        min_length=1,
        description="off (null, false or 'off') or a ColBERT checkpoint; true = colbert-ir/colbertv2.0",
    )
    reader: list[LLMEntry] = Field(
        default=[DEFAULT_LOCAL_LLM],
        description="litellm model strings or LLMSettings mappings; empty = retrieval (and reranking) only",
    )
    prompt: list[str] = Field(default=[DEFAULT_PROMPT_NAME], min_length=1, description="names in `prompts`")
    judge: list[LLMEntry] = Field(
        default=[DEFAULT_LOCAL_LLM], description="judge models (strings or mappings); empty = no judge"
    )

    # A registered axis's values by its name: its `grid.<name>` is no field, since it is no built-in key.
    _registered: dict[str, list[Any]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _registered_axes(cls, data: Any, handler: ModelWrapValidatorHandler[GridConfig]) -> GridConfig:
        """Each registered axis's `grid.<name>` (its default where not written) taken out of the fields'
        data and kept beside them; any other unknown key is refused as before."""
        if not isinstance(data, dict) or not (registered := AXES.registered()):
            return handler(data)
        values = {
            name: _registered_values(axis, data.get(name, axis.default)) for name, axis in registered.items()
        }
        grid = handler({key: value for key, value in data.items() if key not in registered})
        grid._registered = values
        return grid

    @model_validator(mode="before")
    @classmethod
    def _lists_and_renames(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for old, new in _RENAMED_AXES.items():
            if old in data:
                raise ValueError(f"grid.{old} is now grid.{new} (every axis is named like the cell field)")
        return {key: _as_list(value) for key, value in data.items()}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """A registered axis dumped as it is written, so a dump loads again; none: the dump as before."""
        return {**handler(self), **self._registered}

    def values_of(self, axis: str) -> list[Any]:
        """The list written for `axis`, a built-in or a registered one (its default in a grid made before
        it was registered: the config's default grid, made when the config model was)."""
        if axis in type(self).model_fields:
            return getattr(self, axis)
        if axis in self._registered:
            return self._registered[axis]
        return _registered_values(AXES[axis], AXES[axis].default)

    def overlap_tokens(self, chunk_size: int) -> list[int]:
        """Each `chunk_overlap` in tokens of a chunk of `chunk_size` (a share below 1 is of the size)."""
        return [overlap_tokens(chunk_size, overlap) for overlap in self.chunk_overlap]

    def reads_dense_index(self, retriever: str | None) -> bool:
        """Whether a cell of `retriever` (None: the default) has an embedding and an index."""
        return "dense" in retriever_class(retriever).reads

    @field_validator(
        "query_rewrite", mode="before", json_schema_input_type=list[QueryRewrite | Literal[False]]
    )
    @classmethod
    def _off_as_written(cls, values: Any) -> Any:
        """YAML reads a bare `off` as false: it means off here, as for the reranker."""
        return [OFF if value is False else value for value in values] if isinstance(values, list) else values

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

    @field_validator("retriever")
    @classmethod
    def _known_retrievers(cls, values: list[str]) -> list[str]:
        RETRIEVERS.classes(values)
        return values

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
