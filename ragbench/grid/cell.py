"""The grid model: one typed cell specification, expanded in one place and read by everything else.

A cell is one value of every axis. Axes belong to the stage that first needs them (chunk, index,
retrieve, rerank, answer, judge), so a stage's work is keyed by the axes up to it: every index is built
once per (chunk size, overlap, embedding), every reranked ranking once per (retrieve key, reranker)
however many readers read it, every answer set once per reader setting however many judges grade it,
and adding a value to any axis creates only the new keys. Each axis is declared once, as an
`ragbench.grid.axes.Axis` entry (stage, values from the config, id and label text, consumer): the
built-in ones here beside their fields, another package's (or a test's) with `AXES.register`. A new
built-in axis is one field here with its entry (`_axis`), one list field of the same name in
`GridConfig` (ragbench/config/grid.py), plus its consumer: the stage code that reads the value (a step
that gets no `spec`, chunk or index, also gets it as a parameter). Nothing else names an axis: the
expansion, ids, stage keys, labels, results columns and the dry run read the entries.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragbench.grid.axes import AXES, STAGES, Axis, Stage
from ragbench.hashing import canonical_json, short_hash
from ragbench.llm.prompts import PromptTemplate
from ragbench.llm.types import RESULT_FIELDS, LLMSettings, llm_settings

# The retriever of a cell whose `retriever` is None: ids of dense cells stay as they were before the axis.
DEFAULT_RETRIEVER = "dense"
# The values that mean "not set" of the index and rewrite axes: ragbench.retrieval's FLAT_INDEX and OFF,
# which the grid may not import (tests/unit/test_grid_axes.py keeps them equal).
FLAT_INDEX = "flat"
OFF = "off"

# Each built-in axis's entry, in field order: `_declare_builtin_axes` names them after the fields.
_DECLARED: list[dict[str, Any]] = []


def _axis(stage: Stage, tag: str, label: str, consumer: str, description: str = "", **entry: Any) -> Any:
    """A cell field (None: the axis is not set) and its axis entry (`Axis`, less the name)."""
    _DECLARED.append({"stage": stage, "tag": tag, "label": label, "consumer": consumer, **entry})
    return Field(None, description=description)


def _overlaps(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    return config.grid.overlap_tokens(cell["chunk_size"])  # shares of the chunk size become tokens


def _embeddings(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    """A retriever that reads no dense index has no embedding (nor, then, an index)."""
    return list(config.grid.embedding_model) if config.grid.reads_dense_index(cell["retriever"]) else [None]


def _indexes(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    if not cell["embedding_model"]:
        return [None]
    return [None if name == FLAT_INDEX else name for name in config.grid.index]


def _readers(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    return [llm_settings(entry, config.generation.reader) for entry in config.grid.reader]


def _prompts(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    templates = config.prompt_templates()
    return [templates[name] for name in config.grid.prompt]


def _judges(config: Any, cell: Mapping[str, Any]) -> list[Any]:
    return [llm_settings(entry, config.evaluation.judge) for entry in config.grid.judge] or [None]


class CellSpec(BaseModel):
    """Every axis value of one grid cell; fields of stages a cell does not reach are None. A registered
    axis (`AXES.register`) is an extra field of the same name, None where it is not set."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # An external system (`systems` in the config) answers by itself: its cells have only this and a judge.
    external: str | None = _axis(
        "chunk", "ext-", "external ", "ragbench.generation.external (a system's answer step)",
        "a system's name; None = the grid's",
        values=lambda config, cell: [None],  # one cell per system is added beside the grid's
    )  # fmt: skip
    chunk_size: int | None = _axis("chunk", "cs", "cs", "ragbench.inputs.chunking")
    chunk_overlap: int | None = _axis(
        "chunk", "o", "overlap ", "ragbench.inputs.chunking", "tokens", values=_overlaps
    )
    # Before the embedding (a retriever that reads no dense index has none) but keyed at retrieve: dense and
    # hybrid share one index. What a retriever is and reads is `ragbench.retrieval.retrievers`'s to say.
    retriever: str | None = _axis(
        "retrieve", "", "", "ragbench.retrieval.retrievers", "a registered retriever's name; None = dense",
        off=DEFAULT_RETRIEVER, off_text=DEFAULT_RETRIEVER, shows_off=lambda cell: True,
    )  # fmt: skip
    embedding_model: str | None = _axis(
        "index", "", "", "ragbench.retrieval.index", values=_embeddings, short_in_id=True, short_in_label=True
    )
    index: str | None = _axis(
        "index", "ix-", "index ", "ragbench.retrieval.ann", "an IndexSpec name; None = exact (flat)",
        values=_indexes, off_text=FLAT_INDEX, shows_off=lambda cell: cell.embedding_model is not None,
    )  # fmt: skip
    top_k: int | None = _axis("retrieve", "k", "top_k ", "ragbench.retrieval.search")
    # What is searched for a case (`ragbench.retrieval.rewrite`): before the search, so keyed at retrieve.
    query_rewrite: str | None = _axis(
        "retrieve", "qr-", "rewrite ", "ragbench.retrieval.rewrite",
        "condense, hyde or multi_query; None = off (the question as is)", off=OFF, off_text=OFF,
    )  # fmt: skip
    top_n: int | None = _axis("answer", "n", "top_n ", "ragbench.generation.answers")
    # "off" in every cell that retrieves, with or without a reader; in the ids of the cells that answer
    reranker: str | None = _axis(
        "rerank", "rr-", "rerank ", "ragbench.retrieval.rerank_stage",
        "ColBERT checkpoint as configured; None = off",
        off_text=OFF, in_id_when_off=lambda cell: cell.reader is not None, short_in_id=True,
    )  # fmt: skip
    reader: LLMSettings | None = _axis("answer", "", "", "ragbench.generation.reader", values=_readers)
    prompt: PromptTemplate | None = _axis(
        "answer", "p-", "prompt ", "ragbench.generation.reader", values=_prompts
    )
    judge: LLMSettings | None = _axis("judge", "j-", "judge ", "ragbench.scoring.judge", values=_judges)

    @model_validator(mode="before")
    @classmethod
    def _registered_axes(cls, data: Any) -> Any:
        """Every registered axis present (None where not set, so two cells compare equal whichever way
        they were made); any other unknown field refused, as a closed model would."""
        if not isinstance(data, dict):
            return data
        registered = AXES.registered()
        if unknown := sorted(set(data) - set(cls.model_fields) - set(registered)):
            raise ValueError(f"{', '.join(unknown)}: not a grid axis ({', '.join(AXES.names())})")
        return {**dict.fromkeys(registered), **data}

    @classmethod
    def axes(cls) -> list[str]:
        return AXES.names()

    @classmethod
    def stage_of(cls, axis: str) -> Stage:
        return AXES[axis].stage

    @property
    def last_stage(self) -> Stage:
        """The deepest stage this cell reaches (retrieve or rerank for a retrieval-only grid)."""
        if self.reader is None and self.external is None:
            return "rerank" if self.reranker is not None else "retrieve"
        return "judge" if self.judge is not None else "answer"

    def upto(self, stage: Stage) -> CellSpec:
        """This cell seen from `stage`: the axes of later stages cleared, i.e. the key of its work there."""
        keep = STAGES[: STAGES.index(stage) + 1]
        return self.model_copy(update={axis: None for axis in self.axes() if self.stage_of(axis) not in keep})

    def value_text(self, axis: str) -> str:
        """The axis value as people read it: a model's name, a prompt's name, 'off' for no reranker."""
        value = getattr(self, axis)
        if value is None and self.external is not None:
            return ""  # an external system has none of the grid's settings, not their defaults
        if isinstance(value, LLMSettings):
            return value.model
        if isinstance(value, PromptTemplate):
            return value.name
        if value is None:
            entry = AXES[axis]
            return entry.off_text if entry.shows_off(self) else ""
        return str(value)

    def _slug(self, axis: str) -> str:
        text = self.value_text(axis)
        entry = AXES[axis]
        if entry.short_in_id:
            text = text.rstrip("/").split("/")[-1]  # Hub names: the org adds length, the hash uniqueness
        return re.sub(r"[^A-Za-z0-9]+", "_", f"{entry.tag}{text}").strip("_")

    def identity(self) -> dict[str, Any]:
        """The axes this cell uses, each by what can change its results (an LLM by its `result_fields`,
        not its concurrency, timeouts or retries). Ids hash exactly this, so tuning a provider or adding
        an axis that a cell does not use renames no step and no cell."""
        identity: dict[str, Any] = {}
        for axis in self.axes():
            value = getattr(self, axis)
            if isinstance(value, LLMSettings):
                identity[axis] = value.result_fields()
            elif isinstance(value, PromptTemplate):
                identity[axis] = value.model_dump(mode="json")
            elif value is not None:
                identity[axis] = value
        return identity

    def with_operations(self, operations: dict[str, dict[str, Any]]) -> CellSpec:
        """This cell with its LLMs' operational settings (see `llm_operations`) put back: a step gets its
        identity as a (cache-keyed) parameter and the operations beside it, outside the cache key."""
        return self.model_copy(
            update={
                axis: value.model_copy(update=operations.get(value.result_key, {}))
                for axis in self.axes()
                if isinstance(value := getattr(self, axis), LLMSettings)
            }
        )

    @property
    def digest(self) -> str:
        """A short hash of the identity, so ids stay unique when readable names collide."""
        return short_hash(canonical_json(self.identity(), compact=True), length=8)

    @property
    def id(self) -> str:
        """Readable and unique (`openai/x` and `azure/x` differ, so do two api_bases): a step-id suffix."""
        parts = [
            self._slug(axis)
            for axis in self.axes()
            if getattr(self, axis) is not None
            or ((shown := AXES[axis].in_id_when_off) is not None and shown(self))
        ]
        return "_".join([*parts, self.digest])

    def step_id(self, stage: Stage) -> str:
        """The ZenML step id of this cell's work at `stage` (shared by every cell with the same key)."""
        return f"{stage}_{self.upto(stage).id}"

    @property
    def ranking_stage(self) -> Stage:
        """The stage whose ranking the reader reads and the unprefixed retrieval metrics measure: the rerank
        stage's for a cell with a reranker, else the first stage's. `off` has no rerank step: passing the
        first-stage ranking through a step would copy every case's candidates into a second artifact and
        launch a step per retrieve key for nothing, so the answer step reads the retrieve step's output
        directly; everything that needs "the ranking the reader reads" asks this property."""
        return "rerank" if self.reranker is not None else "retrieve"

    def encodings_step_id(self, number: int) -> str:
        """The step that encodes this cell's chunk set with the grid's `number`-th reranker checkpoint (see
        `reranker_numbers`): once per (checkpoint, chunk set), shared by every rerank key on them."""
        return f"colbert_{number}_{self.upto('chunk').id}"

    @property
    def exact_index_key(self) -> CellSpec:
        """The index-stage key of the flat index this cell's vectors are in (an approximate index is built
        from it, and its recall measured against it)."""
        return self.upto("index").model_copy(update={"index": None})

    @property
    def uses_dense_index(self) -> bool:
        return self.embedding_model is not None

    @property
    def lexical_step_id(self) -> str:
        """The BM25 index's step: one per chunk set, whatever the embedding."""
        return f"bm25_{self.upto('chunk').id}"

    def step_ids(self, *, lexical: bool) -> list[str]:
        """Every step after chunking whose output this cell's row is made of; `lexical`: whether its
        retriever reads the BM25 index, which only the retriever knows (`retrievers.row_step_ids`)."""
        last = STAGES.index(self.last_stage)
        if self.external is not None:
            return [self.step_id(stage) for stage in ("answer", "judge") if STAGES.index(stage) <= last]
        ids = [self.step_id("index")] if self.uses_dense_index else []
        ids += [self.lexical_step_id] if lexical else []
        stages = [s for s in STAGES[STAGES.index("retrieve") : last + 1] if s != "rerank" or self.reranker]
        return ids + [self.step_id(stage) for stage in stages]

    def value_key(self, axis: str) -> str:
        """What tells this cell's value of `axis` from another: an LLM by every setting that can change
        its output (two readers of one model at two temperatures differ), anything else by its text."""
        value = getattr(self, axis)
        return value.result_key if isinstance(value, LLMSettings) else self.value_text(axis)

    def axis_columns(self, names: AxisNames | None = None) -> dict[str, Any]:
        """Every axis as a results-table column: numbers as numbers, models and prompts by name (`names`:
        the grid's names of its LLMs, which add the settings that tell two of one model apart)."""
        columns = {}
        for axis in self.axes():
            value = getattr(self, axis)
            if isinstance(value, int):
                columns[axis] = value
            elif isinstance(value, LLMSettings) and names is not None:
                columns[axis] = names.get((axis, value.result_key), self.value_text(axis))
            else:
                columns[axis] = self.value_text(axis)
        return columns


def _declare_builtin_axes() -> None:
    for name, entry in zip(CellSpec.model_fields, _DECLARED, strict=True):
        AXES.declare(Axis(name=name, **entry))


_declare_builtin_axes()

# (axis, LLMSettings.result_key) -> how people read that LLM in this grid, see `llm_names`
AxisNames = dict[tuple[str, str], str]


def llm_names(cells: list[CellSpec]) -> AxisNames:
    """Each reader's and judge's name in this grid: its model, plus the settings that differ among the
    grid's LLMs of that model on that axis (``openai/gpt-4o-mini (temperature 0.7)``), so two cells never
    share a name only because their LLMs share a model."""
    by_model: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for cell in cells:
        for axis in cell.axes():
            if isinstance(settings := getattr(cell, axis), LLMSettings):
                by_model.setdefault((axis, settings.model), {})[settings.result_key] = (
                    settings.result_fields()
                )
    names: AxisNames = {}
    for (axis, model), variants in by_model.items():
        differing = [
            field
            for field in RESULT_FIELDS
            if field != "model" and len({json.dumps(v[field], sort_keys=True) for v in variants.values()}) > 1
        ]
        for key, fields in variants.items():
            shown = ", ".join(f"{field} {_setting_text(fields[field])}" for field in differing)
            names[(axis, key)] = f"{model} ({shown})" if shown else model
    return names


def _setting_text(value: Any) -> str:
    if value is None:
        return "none"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def cell_labels(
    cells: list[CellSpec],
    varying: list[str] | None = None,
    columns: dict[str, dict[str, Any]] | None = None,
) -> dict[str, str]:
    """cell id -> a short name made of exactly the axes that vary in this grid (the LLMs named by
    `llm_names`; `columns`: cell id -> axis columns to name it by instead, e.g. the reranker really used);
    unique: should two names still meet, each gets its cell's digest."""
    varying = varying_axes(cells) if varying is None else varying
    names = llm_names(cells)
    columns = columns or {}
    labels = {
        cell.id: cell_label(columns.get(cell.id) or cell.axis_columns(names), varying) for cell in cells
    }
    counts = Counter(labels.values())
    return {
        cell.id: labels[cell.id] if counts[labels[cell.id]] == 1 else f"{labels[cell.id]} · #{cell.digest}"
        for cell in cells
    }


def cell_label(columns: dict[str, Any], varying: list[str]) -> str:
    """A short name from the axes that vary in this grid (the full values are table columns)."""
    parts = []
    for axis in varying:
        text = str(columns[axis])
        if not text:  # an axis this cell does not have (a bm25 cell's embedding)
            continue
        if AXES[axis].short_in_label:
            text = text.rstrip("/").split("/")[-1]
        parts.append(f"{AXES[axis].label}{text}")
    if parts:
        return " · ".join(parts)
    if columns.get("external"):
        return f"external {columns['external']}"
    return str(columns.get("reader") or columns["embedding_model"])


def varying_axes(cells: list[CellSpec]) -> list[str]:
    """The axes a user varied: more than one value among cells that agree on every earlier axis
    (so an overlap given as a share of the chunk size does not count as varying with the size)."""
    axes = CellSpec.axes()
    varying = []
    for position, axis in enumerate(axes):
        seen: dict[tuple[str, ...], set[str]] = {}
        for cell in cells:
            earlier = tuple(cell.value_key(a) for a in axes[:position])
            seen.setdefault(earlier, set()).add(cell.value_key(axis))
        if any(len(values) > 1 for values in seen.values()):
            varying.append(axis)
    return varying


def llm_operations(cells: list[CellSpec]) -> dict[str, dict[str, Any]]:
    """Every reader's and judge's operational settings, by its `result_key`."""
    return {
        settings.result_key: settings.operations()
        for cell in cells
        for settings in (cell.reader, cell.judge)
        if settings is not None
    }


def distinct_at(cells: list[CellSpec], stage: Stage) -> list[CellSpec]:
    """The distinct keys of the cells' work at `stage`, in grid order (one pipeline step each); at the
    index stage, the dense indexes (a bm25 cell has none); at the rerank stage, the cells that rerank (see
    `CellSpec.ranking_stage`); an external system's cell from the answer stage on (it answers by itself)."""
    keys = {
        (key := cell.upto(stage)).id: key
        for cell in cells
        if STAGES.index(cell.last_stage) >= STAGES.index(stage)
        and (stage != "index" or cell.uses_dense_index)
        and (stage != "rerank" or cell.reranker is not None)
        and (cell.external is None or stage in ("answer", "judge"))
    }
    return list(keys.values())


def reranker_numbers(cells: list[CellSpec]) -> dict[str, int]:
    """Each reranker checkpoint of the grid, as configured, by its number in grid order: what its steps'
    ids (`CellSpec.encodings_step_id`, the `reranker_<number>` choice) are named by."""
    names = dict.fromkeys(cell.reranker for cell in cells if cell.reranker is not None)
    return {name: number for number, name in enumerate(names)}


def pairwise_pairs(cells: list[CellSpec], baseline: dict[str, str]) -> list[tuple[CellSpec, CellSpec]]:
    """(candidate, baseline) answer keys: every answer set that differs from the baseline's values on the
    baseline's axes only, with the answer set that has them (a value as the results table names it);
    with `{external: <system>}`, every other answer set with that system's. Raises ValueError when there is
    none."""
    axes = [
        axis for axis in CellSpec.axes() if STAGES.index(CellSpec.stage_of(axis)) <= STAGES.index("answer")
    ]
    if unknown := sorted(set(baseline) - set(axes)):
        raise ValueError(
            f"evaluation.pairwise.baseline: {', '.join(unknown)} is not an axis an answer depends on "
            f"({', '.join(axes)})"
        )
    keys = distinct_at(cells, "answer")
    if "external" in baseline:  # a system shares no other axis: every other answer set is compared with it
        if len(baseline) > 1:
            raise ValueError(f"evaluation.pairwise.baseline {baseline}: an external system is named alone")
        system = next((key for key in keys if key.external == baseline["external"]), None)
        if system is None:
            raise ValueError(f"evaluation.pairwise.baseline {baseline}: no system of that name in `systems`")
        return [(key, system) for key in keys if key != system]

    # The baseline's values by the names the report gives them (a reader of a model that two readers share
    # is named with the setting that tells them apart); the other axes by their whole value, so the readers
    # of one model at two temperatures are two counterparts, not one.
    names = llm_names(keys)
    shown = {key.id: key.axis_columns(names) for key in keys}

    def others(key: CellSpec) -> tuple[str, ...]:
        return tuple(key.value_key(axis) for axis in axes if axis not in baseline)

    def is_baseline(key: CellSpec) -> bool:
        return all(str(shown[key.id][axis]) == value for axis, value in baseline.items())

    baselines = {others(key): key for key in keys if is_baseline(key)}
    if not baselines:
        seen = {axis: sorted({str(shown[key.id][axis]) for key in keys}) for axis in baseline}
        raise ValueError(
            f"evaluation.pairwise.baseline {baseline}: no answer set of the grid has it (grid: {seen})"
        )
    pairs = [
        (key, baselines[others(key)]) for key in keys if not is_baseline(key) and others(key) in baselines
    ]
    if not pairs:
        raise ValueError(f"evaluation.pairwise.baseline {baseline}: no other answer set to compare with it")
    return pairs
