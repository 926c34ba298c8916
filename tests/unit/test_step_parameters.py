"""Every step takes the typed model it needs, never a dict it would validate again: a new `dict`-typed (or
`Mapping`-typed) step parameter fails here, however it is nested (`dict | None`, `list[dict]`)."""

import collections.abc
import importlib
import pkgutil
import typing
from pathlib import Path

import pytest
from zenml.steps import BaseStep

STEPS_DIR = Path(__file__).resolve().parents[2] / "steps"
STEP_MODULES = sorted(f"steps.{info.name}" for info in pkgutil.iter_modules([str(STEPS_DIR)]))
UNTYPED = (
    dict,
    collections.abc.Mapping,
    collections.abc.MutableMapping,
    typing.Mapping,
    typing.MutableMapping,
)


def steps_of(module_name: str) -> list[BaseStep]:
    module = importlib.import_module(module_name)
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, BaseStep) and obj.entrypoint.__module__ == module_name
    ]


def untyped(annotation: object) -> bool:
    """A dict or a mapping, alone or inside a union, a list or any other generic."""
    if annotation in UNTYPED or typing.get_origin(annotation) in UNTYPED:
        return True
    return any(untyped(argument) for argument in typing.get_args(annotation))


def test_every_step_module_is_inspected() -> None:
    found = {step.name for module in STEP_MODULES for step in steps_of(module)}
    assert {"build_results_table", "retrieve_cell", "judge_answers_cell", "assemble_eval_set"} <= found


@pytest.mark.parametrize(
    "annotation", [dict, dict[str, int], dict | None, list[dict], typing.Mapping[str, int]]
)
def test_the_check_sees_a_dict_however_it_is_spelled(annotation: object) -> None:
    assert untyped(annotation)


@pytest.mark.parametrize("module_name", STEP_MODULES)
def test_no_step_parameter_is_a_dict(module_name: str) -> None:
    for step in steps_of(module_name):
        hints = typing.get_type_hints(step.entrypoint)
        loose = sorted(name for name, hint in hints.items() if name != "return" and untyped(hint))
        assert not loose, f"step {step.name} takes {loose} as a dict: give it the typed model it needs"


def test_the_results_step_takes_at_most_six_inputs() -> None:
    from steps.results import build_results_table

    assert len(typing.get_type_hints(build_results_table.entrypoint)) - 1 <= 6
