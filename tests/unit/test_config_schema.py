"""The config's JSON Schema (`run.py config --schema`, committed as docs/reference/config.schema.json and kept
fresh by test_reference_pages.py) is what an editor checks a config against: every packaged config and the
starter `init` writes validate against it (shorthands included), a misspelt key is refused with its path as
pydantic refuses it, and the starter points the YAML language server at the committed file."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

import run
from ragbench.config.model import BenchmarkConfig
from ragbench.config.reference import SCHEMA_PATH, config_schema
from ragbench.config.starter import starter_config
from ragbench.grid.axes import AXES, Axis

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    """A validator of the committed schema, itself checked against its dialect's meta-schema."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.Draft202012Validator, data: object) -> list[tuple[list, str]]:
    return [(list(error.absolute_path), error.message) for error in validator.iter_errors(data)]


@pytest.mark.parametrize("path", CONFIGS, ids=[path.name for path in CONFIGS])
def test_every_packaged_config_validates(validator, path):
    assert errors(validator, yaml.safe_load(path.read_text(encoding="utf-8"))) == []


def test_the_starter_validates_and_points_the_editor_at_the_committed_schema(validator):
    text = starter_config(Path("my.yaml"))
    first = text.splitlines()[0]
    assert first == f"# yaml-language-server: $schema={SCHEMA_PATH.as_uri()}"
    assert SCHEMA_PATH.is_file() and SCHEMA_PATH == ROOT / "docs" / "reference" / "config.schema.json"
    assert errors(validator, yaml.safe_load(text)) == []
    assert errors(validator, BenchmarkConfig().model_dump(mode="json")) == []  # a dump loads again


@pytest.mark.parametrize(
    ("written", "path", "key"),
    [
        ({"grid": {"chunk_sise": [128]}}, ["grid"], "chunk_sise"),
        ({"evaluation": {"judge_check": {"case": 4}}}, ["evaluation", "judge_check"], "case"),
        ({"knowlege_base": {"kind": "pydoc_topics"}}, [], "knowlege_base"),
    ],
)
def test_a_misspelt_key_is_refused_with_its_path_as_the_model_refuses_it(validator, written, path, key):
    # the error an editor shows first: inside an optional section's `anyOf`, the object branch's
    best = jsonschema.exceptions.best_match(validator.iter_errors(written))
    assert list(best.absolute_path) == path and f"'{key}' was unexpected" in best.message
    with pytest.raises(ValidationError) as refused:
        BenchmarkConfig.model_validate(written)
    ((location, kind),) = [(error["loc"], error["type"]) for error in refused.value.errors()]
    assert list(location) == [*path, key] and kind == "extra_forbidden"


def test_every_object_of_the_schema_refuses_unknown_keys():
    schema = config_schema()
    objects = [schema, *schema["$defs"].values()]
    open_ones = [
        s.get("title") for s in objects if "properties" in s and s.get("additionalProperties") is not False
    ]
    assert open_ones == []


def test_a_registered_axis_is_a_grid_key_of_the_schema_it_is_made_with():
    axis = Axis(name="toy_schema_axis", stage="answer", consumer="tests", value_type=int)
    AXES.register(axis)
    try:
        grid = config_schema()["$defs"]["GridConfig"]["properties"]
    finally:
        AXES.unregister(axis.name)
    validator = jsonschema.Draft202012Validator({"$defs": {}, **grid["toy_schema_axis"]})
    assert validator.is_valid(3) and validator.is_valid([3, None]) and not validator.is_valid("three")
    assert "toy_schema_axis" not in config_schema()["$defs"]["GridConfig"]["properties"]


def test_the_command_prints_the_schema():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run.main(["config", "--schema"]) == 0
    assert json.loads(out.getvalue()) == config_schema()
