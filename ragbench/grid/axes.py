"""The grid's axes, declared once each: one `Axis` entry per axis says which stage's key includes it, how the
config's list for it becomes cell values, how a cell's value is written in ids and labels, and which stage
reads it. `CellSpec` (`ragbench.grid.cell`) declares the built-in axes beside their fields; anything else
registers one with `AXES.register` (a plugin's module, a test) and its values are written as `grid.<name>`
like a built-in's. Everything the grid does per axis (expanding, ids, stage keys, labels, results columns)
reads these entries, so no code names an axis to know what it means.

Like the plugin registries (`ragbench.plugins`) and lm-evaluation-harness's, it is data: the registry holds
entries, not behaviour of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Stage = Literal["chunk", "index", "retrieve", "rerank", "answer", "judge"]
STAGES: tuple[Stage, ...] = ("chunk", "index", "retrieve", "rerank", "answer", "judge")

# (the composed BenchmarkConfig, the cell's earlier axes) -> this axis's values for that cell; the config is
# typed Any because the grid may not import the composition root that builds it.
Values = Callable[[Any, Mapping[str, Any]], list[Any]]


def _retrieves(cell: Any) -> bool:
    return cell.top_k is not None


@dataclass(frozen=True)
class Axis:
    """One axis of the grid. A cell's value None means "not set": it is left out of the cell's id and
    identity, so adding an axis whose default is off renames no step and no cell."""

    name: str
    # The first stage whose work depends on the value: every later stage's key includes it (`CellSpec.upto`).
    stage: Stage
    # What reads the value, for people and the docs: the module of the stage that consumes it.
    consumer: str
    # The prefix of the value in a cell's id and in its label ("cs" + 128, "rerank " + the checkpoint).
    tag: str = ""
    label: str = ""
    # How `grid.<name>` becomes this cell's values; None: the list as written, `off` read as None.
    values: Values | None = None
    # The config value that means "not set" (the cell's None), and how a cell shows None when `shows_off`
    # says it has the axis at all (a cell that retrieves has a reranker, "off"; a bm25 cell has no index).
    off: Any = None
    off_text: str = ""
    shows_off: Callable[[Any], bool] = _retrieves
    # Whether an unset value still takes a place in the id (the answer step ids say "rr_off").
    in_id_when_off: Callable[[Any], bool] | None = None
    # Hub names ("org/model"): the org dropped in ids / in labels, where the digest keeps them unique.
    short_in_id: bool = False
    short_in_label: bool = False
    # A registered axis's `grid.<name>`: one value's type and the list a config that does not write it has.
    value_type: Any = str
    default: list[Any] = field(default_factory=lambda: [None])

    def config_values(self, config: Any, cell: Mapping[str, Any]) -> list[Any]:
        """This axis's values for a cell whose earlier axes are `cell`."""
        if self.values is not None:
            return self.values(config, cell)
        return [None if value == self.off else value for value in config.grid.values_of(self.name)]


class AxisRegistry:
    """The grid's axes in order: the built-in ones (`CellSpec`'s fields), then the registered ones in the
    order they were registered (a registered axis's values may depend on every built-in one)."""

    def __init__(self) -> None:
        self._builtin: dict[str, Axis] = {}
        self._registered: dict[str, Axis] = {}

    def declare(self, axis: Axis) -> Axis:
        """A built-in axis, declared beside its `CellSpec` field."""
        self._builtin[axis.name] = axis
        return axis

    def register(self, axis: Axis) -> Axis:
        """An axis of another package (or a test): its values are `grid.<name>`, the cells carry it."""
        if axis.name in self._builtin or axis.name in self._registered:
            raise ValueError(f"grid axis {axis.name} is already declared")
        if axis.stage not in STAGES:
            raise ValueError(f"grid axis {axis.name}: stage {axis.stage!r} is not one of {', '.join(STAGES)}")
        self._registered[axis.name] = axis
        return axis

    def unregister(self, name: str) -> None:
        """Forget a registered axis (a built-in one cannot be)."""
        del self._registered[name]

    def names(self) -> list[str]:
        return [*self._builtin, *self._registered]

    def registered(self) -> dict[str, Axis]:
        return dict(self._registered)

    def __getitem__(self, name: str) -> Axis:
        return self._builtin.get(name) or self._registered[name]

    def __contains__(self, name: object) -> bool:
        return name in self._builtin or name in self._registered


AXES = AxisRegistry()
