"""The config reference is generated from the config model: it lists every key and explains each."""

import importlib.util
import re
import typing
from pathlib import Path

from pydantic import BaseModel, Field

import run
from ragbench.config.model import BenchmarkConfig, GridConfig
from ragbench.config.reference import reference_markdown, rows, undescribed
from ragbench.llm.types import LLMSettings

REPO_ROOT = Path(__file__).resolve().parents[2]


def all_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key a config may hold: sections' keys, and the fields of list entries (`key[].field`) and
    of optional blocks, by the name YAML uses (an alias where the field has one)."""
    keys = set()
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        keys.add(key)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= all_fields(annotation, f"{key}.")
        # a list of entries, an optional block, or a union of blocks told apart by a key (`search`): each
        # block's keys
        for block in models_in(annotation):
            keys |= all_fields(block, f"{key}[]." if typing.get_origin(annotation) is list else f"{key}.")
    return keys


def models_in(annotation: object) -> list[type[BaseModel]]:
    """The models an annotation's arguments name, through Annotated and nested unions."""
    found = []
    for argument in typing.get_args(annotation):
        if typing.get_origin(argument) is typing.Annotated:
            argument = typing.get_args(argument)[0]
        if isinstance(argument, type) and issubclass(argument, BaseModel):
            found.append(argument)
        else:
            found += models_in(argument)
    return found


def test_run_py_and_the_docs_page_print_the_reference_the_model_generates(capsys):
    """`run.py config --reference` prints the reference, and the docs site's Config keys page
    (docs/reference/config.md, written by `make reference`: docs/generate_reference.py; kept fresh by
    tests/unit/test_reference_pages.py) is generated from it."""
    assert run.main(["config", "--reference"]) == 0
    assert capsys.readouterr().out == reference_markdown()
    spec = importlib.util.spec_from_file_location(
        "generate_reference", REPO_ROOT / "docs" / "generate_reference.py"
    )
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    page = generator.config_page()
    key = re.compile(r"^\| `([^`]+)` \|", re.M)
    assert key.findall(page) == key.findall(reference_markdown())
    assert not (REPO_ROOT / "CONFIG.md").exists(), "the config reference lives in the docs site now"


def test_every_key_is_listed_with_type_default_and_description():
    listed = {row["key"]: row for row in rows(BenchmarkConfig)}
    assert set(listed) == all_fields(BenchmarkConfig)
    assert {row["key"] for row in rows(LLMSettings)} == set(LLMSettings.model_fields)
    assert undescribed() == []
    assert listed["regression.baseline"]["type"] == 'one of: "previous", "champion", "none"'
    assert listed["regression.baseline"]["default"] == '"previous"'
    assert listed["grid.chunk_size"]["default"] == "[128, 256]" and listed["grid"]["type"] == "section"
    assert listed["evaluation.custom_suites[].assert"]["type"] == "str"
    assert listed["evaluation.pairwise.seed"]["default"] == "0"
    page = reference_markdown()
    assert "`knowledge_base.revision`" in page and "`timeout_s`" in page and "`llm_cache_dir`" in page


def test_a_key_of_several_search_strategies_is_one_row_naming_each_meaning():
    """`search.max_cells` is optional for staged (answered cells) and required for tpe (trials): one key in
    a YAML file, so one row, whose columns give each strategy's part."""
    keys = [row["key"] for row in rows(BenchmarkConfig)]
    assert len(keys) == len(set(keys)), "a key listed twice"
    row = {row["key"]: row for row in rows(BenchmarkConfig)}["search.max_cells"]
    assert row["type"] == "staged: int or null; tpe: int"
    assert row["default"] == "staged: null; tpe: (required)"
    meaning = "(strategy staged, tpe, each its own meaning) staged: answered cells"
    assert row["description"].startswith(meaning)
    assert " tpe: cells evaluated at most" in row["description"]
    assert {row["key"]: row for row in rows(BenchmarkConfig)}["search.seed"]["description"].startswith(
        "(strategy tpe) "
    )


def test_a_field_added_without_a_description_fails():
    class Extended(BenchmarkConfig):
        shiny_new_knob: int = 3
        grid: GridConfig = Field(default=GridConfig(), description="the grid")

    assert undescribed(Extended) == ["shiny_new_knob"]
