"""The config reference, generated from the config model so it cannot drift: every key with its type,
default, allowed values and description (`run.py config --reference`, and the docs site's reference page,
which the docs build generates from it)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ragbench.config.model import BenchmarkConfig
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.types import LLMSettings

# The committed schema (`make reference` writes it, tests/unit/test_reference_pages.py checks it is fresh):
# the starter config points the YAML language server at this file of the clone ragbench runs from.
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "reference" / "config.schema.json"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def config_schema() -> dict[str, Any]:
    """The JSON Schema of a config file (`run.py config --schema`), as pydantic generates it from the config
    model for validation: what a YAML file may hold, shorthands included (a validator that takes one declares
    its input type), unknown keys refused (`additionalProperties: false`, as every section forbids them).
    Registered axes (`ragbench.grid.axes.AXES`) are in it as they are registered where it is made."""
    return {"$schema": SCHEMA_DIALECT, **BenchmarkConfig.model_json_schema()}


def config_schema_text() -> str:
    """`config_schema()` as the committed file holds it: indented JSON, one trailing newline."""
    return json.dumps(config_schema(), indent=2, ensure_ascii=False) + "\n"


HEADER = """\
# Config reference

Generated from the config model (`ragbench/config/model.py`): `run.py config --reference` prints it and
`make reference` writes this page, which a test checks against the model (the docs build only renders
it), so it cannot disagree with the model. A config file is YAML; every key is optional and a key
left out takes the default below, which is the model's default, not `configs/default.yaml`'s (that file is one
config among others: copy it, or start from nothing). Unknown keys are refused. Relative paths resolve
against the config file's folder (`--set` values against the current directory). A config without
`name` is named after its file (`nightly.yaml` -> `nightly`).
"""

LLM_SECTION = """\
## LLM settings

An entry of `grid.reader`, `grid.judge`, `testset.generator` or `testset.critic` is a litellm model
string or a mapping of these fields; `generation.reader`, `evaluation.judge`,
`testset.generator_defaults` and `testset.critic_defaults` hold fields shared by every entry of their
role (an entry's own fields win). Only model, api_base, temperature, max_tokens, seed, json_mode and
extra can change an answer: they make up a cell's identity and the LLM cache key; the others only
change how the provider is reached.
"""


def type_text(annotation: Any) -> str:
    """A type as a reader of YAML thinks of it: `list[int]`, `one of: a, b`, `str or null`."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is Literal:
        return "one of: " + ", ".join(json.dumps(value) for value in arguments)
    if origin is typing.Annotated:  # a constrained type (PositiveInt): its base; the constraint is checked
        return type_text(arguments[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(argument) for argument in arguments)
    if origin is tuple and arguments[-1:] == (Ellipsis,):  # a YAML list either way
        return f"list[{type_text(arguments[0])}]"
    if origin in (list, dict, tuple):
        return f"{origin.__name__}[{', '.join(type_text(argument) for argument in arguments)}]"
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "(required)"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    return json.dumps(value, default=str)


def _section(model: type[BaseModel]) -> type[BaseModel] | None:
    """The model a field holds when it is a config section (a nested model), else None."""
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _entries(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model of a list of entries (`key[].field`) or of an optional block (`key.field`), else None."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is list and arguments and _section(arguments[0]):
        return arguments[0], "[]."
    if origin in (typing.Union, types.UnionType) and len(arguments) == 1 and _section(arguments[0]):
        return arguments[0], "."
    return None


def _variants(annotation: Any) -> list[type[BaseModel]]:
    """The sections of a block that is one of several, told apart by a tag field (`search:` by its
    `strategy`), else []."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(arguments) == 1 and typing.get_origin(arguments[0]) is typing.Annotated:
        arguments = list(typing.get_args(typing.get_args(arguments[0])[0]))
    sections = [a for a in arguments if _section(a)]
    return sections if len(sections) > 1 and len(sections) == len(arguments) else []


def _tag(model: type[BaseModel], field: str) -> str:
    return str(typing.get_args(model.model_fields[field].annotation)[0])


def _per_variant(parts: list[tuple[dict[str, str], list[str]]], column: str) -> str:
    """One column of a key the variants declare differently: the value every part shares, else each
    part's value named by the tags that declare it so."""
    values = {row[column] for row, _ in parts}
    if len(values) == 1:
        return values.pop()
    return "; ".join(f"{', '.join(tags)}: {row[column]}" for row, tags in parts)


def _variant_rows(variants: list[type[BaseModel]], prefix: str) -> list[dict[str, str]]:
    """The keys of a block that is one of `variants`: the tag field first, listing every tag, then each
    other key in one row (a key is one name in a YAML file, so one row of the reference). Its description
    says which variants have it when not all do; where variants declare it differently (`search.max_cells`:
    optional for staged, required for tpe), each column gives every variant's part, named by its tag."""
    tag = next(iter(variants[0].model_fields))
    found = [
        {
            "key": f"{prefix}{tag}",
            "type": "one of: " + ", ".join(json.dumps(_tag(v, tag)) for v in variants),
            "default": "(required)",
            "description": "; ".join(f"{v.model_fields[tag].description}" for v in variants),
        }
    ]
    by_key: dict[str, dict[str, list[str]]] = {}  # key -> its row as JSON -> the tags declaring it so
    for variant in variants:
        for row in rows(variant, prefix)[1:]:
            by_key.setdefault(row["key"], {}).setdefault(json.dumps(row), []).append(_tag(variant, tag))
    for key, shapes in by_key.items():
        parts = [(json.loads(shape), tags) for shape, tags in shapes.items()]
        every = [t for _, tags in parts for t in tags]
        if len(parts) == 1:
            row, tags = parts[0]
            if len(tags) < len(variants):
                row["description"] = f"({tag} {', '.join(tags)}) {row['description']}"
            found.append(row)
            continue
        found.append(
            {
                "key": key,
                "type": _per_variant(parts, "type"),
                "default": _per_variant(parts, "default"),
                "description": f"({tag} {', '.join(every)}, each its own meaning) "
                + " ".join(f"{', '.join(tags)}: {row['description']}." for row, tags in parts),
            }
        )
    return found


def rows(model: type[BaseModel], prefix: str = "") -> list[dict[str, str]]:
    """One row per key, sections first-level then their keys, in declaration order; the fields of a
    list's entries (`key[].field`), of an optional block and of a block that is one of several sections
    (`_variants`) follow their key."""
    found = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        section = _section(field.annotation)  # type: ignore[arg-type]
        variants = _variants(field.annotation)
        if variants:
            shown = "section by " + next(iter(variants[0].model_fields))
            kind = shown + (" or null" if type(None) in typing.get_args(field.annotation) else "")
        else:
            kind = "section" if section else type_text(field.annotation)
        found.append(
            {
                "key": key,
                "type": kind,
                "default": "" if section else default_text(field),
                "description": field.description or (section.__doc__ or "").strip().split("\n\n")[0],
            }
        )
        if section is not None:
            found += rows(section, f"{key}.")
        elif variants:
            found += _variant_rows(variants, f"{key}.")
        elif (entries := _entries(field.annotation)) is not None:
            found += rows(entries[0], f"{key}{entries[1]}")
    return found


def undescribed(model: type[BaseModel] = BenchmarkConfig) -> list[str]:
    """Keys without a description: the reference must explain every key it lists."""
    keys = [*rows(model), *rows(LLMSettings), *rows(EvalCase)]
    return [
        row["key"]
        for row in keys
        if not row["description"].strip() and not row["key"].startswith("provenance.")
    ]


def _table(entries: list[dict[str, str]]) -> str:
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    lines += [
        f"| `{e['key']}` | {cell(e['type'])} | {'`' + cell(e['default']) + '`' if e['default'] else ''} "
        f"| {cell(e['description'])} |"
        for e in entries
    ]
    return "\n".join(lines)


CASE_SECTION = """\
## Eval case fields

What one case of an eval-case file (YAML or JSONL) may hold; a metric is computed only where its fields are
present. `reference_from` and `expected_sources_from` are fetched by every run before any answer (see
*Knowledge that changes* in the eval-cases guide).
"""


def reference_markdown() -> str:
    keys, llm = _table(rows(BenchmarkConfig)), _table(rows(LLMSettings))
    case = _table([row for row in rows(EvalCase) if not row["key"].startswith("provenance.")])
    return f"{HEADER}\n## Keys\n\n{keys}\n\n{LLM_SECTION}\n{llm}\n\n{CASE_SECTION}\n{case}\n"
