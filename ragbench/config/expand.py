"""The grid expanded from the composed config: every cell, in axis order. The one place the grid reads the
whole config; every stage reads the cells (`ragbench.grid.cell`), never the config."""

from __future__ import annotations

from typing import Any

from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import AXES, CellSpec
from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.llm.types import LLMSettings, llm_settings
from ragbench.retrieval.rewrite import OFF


def axis_values(config: BenchmarkConfig, axis: str, cell: dict[str, Any]) -> list[Any]:
    """The values of one axis for a cell whose earlier axes are set, as its entry (`AXES`) makes them
    from `grid.<axis>` (overlap shares become tokens, model strings settings, prompt names templates)."""
    if CellSpec.stage_of(axis) in ("answer", "judge") and not config.grid.reader:
        return [None]  # a retrieval-only grid still sweeps its rerankers: the rerank stage is retrieval
    return AXES[axis].config_values(config, cell)


def expand_grid(config: BenchmarkConfig) -> list[CellSpec]:
    """Every cell of the grid, in axis order (equal cells, e.g. two overlaps rounding alike, once), then
    one cell per external system and judge."""
    partial: list[dict[str, Any]] = [{}] if config.benchmark_grid else []
    for axis in CellSpec.axes():
        partial = [{**cell, axis: value} for cell in partial for value in axis_values(config, axis, cell)]
    judges = [llm_settings(entry, config.evaluation.judge) for entry in config.grid.judge] or [None]
    partial += [{"external": system.name, "judge": judge} for system in config.systems for judge in judges]
    cells = {spec.id: spec for spec in (CellSpec(**cell) for cell in partial)}
    return list(cells.values())


def rewriter_settings(config: BenchmarkConfig) -> LLMSettings | None:
    """The LLM that rewrites queries (`grid.query_rewrite`): `retrieval.rewriter`, else the grid's first
    reader with the readers' shared settings (a rewrite is the assistant's own work, done by its model),
    else the packaged local model; None when every cell searches the question as is."""
    if all(mode == OFF for mode in config.grid.query_rewrite) or not config.benchmark_grid:
        return None
    entry = config.retrieval.rewriter or (config.grid.reader[0] if config.grid.reader else DEFAULT_LOCAL_LLM)
    return llm_settings(entry, config.generation.reader)
