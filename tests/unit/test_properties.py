"""Property-based tests of the input loaders: whatever a user writes, the config and eval-case loaders
either return validated objects or raise their own error (ConfigError, EvalCaseError) with a message,
never a stray TypeError or ValueError from deep inside YAML or pydantic.

Inputs are built around the real schemas (known keys, plausible values, the default config with
random edits, YAML that PyYAML parses into dates or refuses half-way) so that many examples get past
the first check and successful loads are checked too. Each test keeps to 60 derandomised examples
with no example database, so the suite stays fast and every run sees the same inputs.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbench.config.model import (
    DEFAULT_CONFIG_PATH,
    BenchmarkConfig,
    ChunkingConfig,
    ConfigError,
    GenerationConfig,
    GridConfig,
    KnowledgeBaseConfig,
    RetrievalConfig,
    load_config,
)
from ragbench.inputs.eval_cases import (
    EvalCase,
    EvalCaseError,
    EvalCasesConfig,
    cases_from_rows,
    load_eval_cases,
)
from ragbench.llm.types import LLMSettings
from ragbench.scoring.registry import EvaluationConfig

# The same examples every run, so a failure is reproducible.
FAST = settings(max_examples=60, deadline=None, database=None, derandomize=True, report_multiple_bugs=False)

# PyYAML's constructors raise ValueError, AttributeError or IndexError (not YAMLError) for explicit tags
# they cannot build and for impossible dates; both loaders catch only YAMLError today.
YAML_CONSTRUCTOR_CRASHES = ["2001-02-30", "0000-00-00", "!!int x", "!!int", "!!float x", "!!timestamp x"]

# -- values a user could write ----------------------------------------------------------------------

SECTIONS: dict[str, type] = {
    "knowledge_base": KnowledgeBaseConfig,
    "eval_cases": EvalCasesConfig,
    "chunking": ChunkingConfig,
    "grid": GridConfig,
    "retrieval": RetrievalConfig,
    "generation": GenerationConfig,
    "evaluation": EvaluationConfig,
}
# Every key the config knows, as a dotted path, including LLM settings where a section holds them.
KNOWN_PATHS = sorted(
    set(BenchmarkConfig.model_fields)
    | {f"{section}.{field}" for section, model in SECTIONS.items() for field in model.model_fields}
    | {
        f"{role}.{field}"
        for role in ("generation.reader", "evaluation.judge")
        for field in LLMSettings.model_fields
    }
    | {"prompts.terse", "prompts.terse.system", "prompts.terse.user", "prompts.default.system"}
    | {f"eval_cases.columns.{field}" for field in EvalCase.model_fields}
)
KEY_NAMES = sorted({part for path in KNOWN_PATHS for part in path.split(".")})
PLAUSIBLE_STRINGS = [
    "off",
    "default",
    "terse",
    "openai/gpt-4o-mini",
    "local/qwen2.5-coder-1.5b-instruct",
    "sentence-transformers/all-MiniLM-L6-v2",
    "colbert-ir/colbertv2.0",
    "folder",
    "file",
    "hf_dataset",
    "pydoc_topics",
    "correctness",
    "context",
    "Answer: {refusal}",
    "{passages}\n\nQuestion: {question}",
    "http://127.0.0.1:8000/v1",
    "OPENAI_API_KEY",
]
# YAML scalars that PyYAML turns into dates, refuses half-way through a constructor, or reads as specials.
TRICKY_YAML = [
    "2001-01-01",
    "2001-02-30",
    "2001-12-14t21:59:43.10-05:00",
    "!!int x",
    "!!float x",
    "!!timestamp x",
    "!!binary x",
    "!!set {a}",
    "!!python/name:os.system",
    "&a [*a]",
    "*undefined",
    "{a: 1",
    ".nan",
    "-.inf",
    "~",
    "yes",
    "0x1F",
    "1e400",
    "'",
]

keys = st.sampled_from(KEY_NAMES) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.integers(0, 600)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(PLAUSIBLE_STRINGS)
    | st.dates()
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
dotted_keys = st.sampled_from(KNOWN_PATHS) | st.lists(keys, min_size=1, max_size=3).map(".".join)
# Values that fit some key, so that an edited default config often stays valid and is checked in full.
plausible_values = (
    st.integers(1, 64)
    | st.floats(0, 0.5)
    | st.booleans()
    | st.sampled_from(PLAUSIBLE_STRINGS)
    | st.lists(st.integers(16, 512), min_size=1, max_size=3, unique=True)
    | st.lists(st.sampled_from(PLAUSIBLE_STRINGS), min_size=1, max_size=2, unique=True)
)


def default_config_data() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))


def with_edit(data: dict[str, Any], dotted_key: str, value: Any) -> dict[str, Any]:
    """`data` with `value` at `dotted_key`, replacing whatever stood in the way (a copy)."""
    data = copy.deepcopy(data)
    node = data
    *parents, last = dotted_key.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[last] = value
    return data


MODELS = ["openai/gpt-4o-mini", "local/qwen2.5-coder-1.5b-instruct", "ollama/llama3"]
llm_entries = st.sampled_from(MODELS) | st.fixed_dictionaries(
    {"model": st.sampled_from(MODELS)},
    optional={"temperature": st.floats(0, 2), "max_tokens": st.integers(1, 1000), "api_base": st.text()},
)
# Edits of the default config that are mostly valid, so that successful loads are checked too.
sweeps = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=20),
        "grid.chunk_size": st.lists(st.integers(16, 1024), min_size=1, max_size=3, unique=True),
        "grid.chunk_overlap": st.lists(st.floats(0, 0.9) | st.integers(0, 15), min_size=1, max_size=2),
        "grid.top_k": st.lists(st.integers(5, 50), min_size=1, max_size=2, unique=True),
        "grid.top_n": st.lists(st.integers(1, 5), min_size=1, max_size=2),
        "grid.reranker": st.lists(
            st.sampled_from([None, False, "off", True, "colbert-ir/colbertv2.0"]), max_size=2
        ),
        "grid.reader": st.lists(llm_entries, max_size=2),
        "grid.judge": st.lists(llm_entries, max_size=2),
        "generation.sample_size": st.none() | st.integers(1, 100),
        "evaluation.rubrics": st.lists(st.sampled_from(["correctness", "context"]), max_size=2),
    },
)


@st.composite
def config_mappings(draw: st.DrawFn) -> dict[str, Any]:
    """The default config with a sweep's edits, or with a few plausible edits and perhaps one wild one,
    or a mapping of random keys."""
    data = default_config_data()
    branch = draw(st.sampled_from(["sweep", "edits", "random"]))
    if branch == "random":
        return draw(st.dictionaries(keys, yaml_values, max_size=6))
    if branch == "sweep":
        edits = list(draw(sweeps).items())
    else:
        edits = draw(st.lists(st.tuples(st.sampled_from(KNOWN_PATHS), plausible_values), max_size=2))
        edits += draw(st.lists(st.tuples(dotted_keys, yaml_values), max_size=1))
    for dotted_key, value in edits:
        data = with_edit(data, dotted_key, value)
    return data


def flow_yaml(value: Any) -> str:
    """`value` as one line of YAML, as a user types it after ``--set key=``."""
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf).removesuffix("\n...\n").strip()


override_values = yaml_values.map(flow_yaml) | st.text(max_size=20) | st.sampled_from(TRICKY_YAML)
overrides = st.builds("{}={}".format, dotted_keys, override_values) | st.text(max_size=30)

not_utf8 = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.binary(max_size=30),
    st.sampled_from([b"\xff", b"\xfe", b"\x80", b"\xc3\x28", b"\xed\xa0\x80"]),
    st.binary(max_size=30),
).filter(lambda data: not _decodes(data))


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- the config -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


def assert_config_or_config_error(path: Path, set_overrides: list[str] | None = None) -> None:
    """`load_config` returns a config whose JSON form is stable, or raises ConfigError; nothing else."""
    try:
        config = load_config(path, set_overrides)
    except ConfigError as error:
        assert str(error).strip()
        return
    assert isinstance(config, BenchmarkConfig)
    # The pipeline receives the config as JSON (model_dump(mode="json")) and validates it again.
    as_json = config.model_dump(mode="json")
    assert BenchmarkConfig.model_validate(as_json).model_dump(mode="json") == as_json


@FAST
@given(data=config_mappings())
def test_any_yaml_mapping_gives_a_config_or_a_config_error(workdir: Path, data: dict[str, Any]) -> None:
    path = workdir / "mapping.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert_config_or_config_error(path)


@FAST
@given(text=st.text(max_size=200) | st.sampled_from(TRICKY_YAML).map("key: {}\n".format))
def test_any_text_gives_a_config_or_a_config_error(workdir: Path, text: str) -> None:
    path = workdir / "text.yaml"
    path.write_text(text, encoding="utf-8")
    assert_config_or_config_error(path)


@FAST
@given(set_overrides=st.lists(overrides, max_size=4))
def test_any_overrides_give_a_config_or_a_config_error(workdir: Path, set_overrides: list[str]) -> None:
    path = workdir / "default.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    assert_config_or_config_error(path, set_overrides)


@FAST
@given(content=not_utf8)
def test_a_config_that_is_not_utf8_is_a_config_error_naming_the_file(workdir: Path, content: bytes) -> None:
    path = workdir / "latin1.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="not UTF-8") as error:
        load_config(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("scalar", YAML_CONSTRUCTOR_CRASHES)
def test_yaml_that_pyyaml_cannot_build_is_a_config_error(workdir: Path, scalar: str) -> None:
    path = workdir / "unbuildable.yaml"
    path.write_text(f"name: {scalar}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_config(path)


@pytest.mark.parametrize("scalar", YAML_CONSTRUCTOR_CRASHES)
def test_a_set_value_that_pyyaml_cannot_build_is_a_config_error(scalar: str) -> None:
    with pytest.raises(ConfigError, match="name"):
        load_config(None, [f"name={scalar}"])


def test_a_date_in_a_reader_mapping_gives_a_config_or_a_config_error(workdir: Path) -> None:
    path = workdir / "default.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    assert_config_or_config_error(path, ["grid.reader=[{model: openai/x, extra: {since: 2001-01-01}}]"])


@pytest.mark.parametrize("scalar", YAML_CONSTRUCTOR_CRASHES)
def test_a_prompt_file_pyyaml_cannot_build_is_a_config_error(workdir: Path, scalar: str) -> None:
    prompt_file = workdir / "terse.yaml"
    prompt_file.write_text(f"system: {scalar}\nuser: '{{passages}} {{question}}'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"prompts.terse: {prompt_file}: not valid YAML")):
        load_config(None, [f"prompts.terse={prompt_file}"])


def test_a_prompt_mapping_cannot_rename_its_prompt() -> None:
    with pytest.raises(ConfigError, match="'name' is not a template field"):
        load_config(None, ["prompts.terse={name: other, system: Be brief.}"])


# -- eval cases -------------------------------------------------------------------------------------

LIST_FIELDS = ("expected_sources", "good_words", "bad_words", "bad_first_words", "tags")
case_ids = st.sampled_from(["a", "b", "case-1", "case-2"]) | st.text(max_size=8) | st.integers() | st.none()
questions = (
    st.sampled_from(["", "   ", "\n\t", "What does pass do?", "  Why?  "])
    | st.text(max_size=30)
    | st.integers()
    | st.none()
    | st.lists(st.text(max_size=5), max_size=2)
)
words = st.lists(st.text(max_size=8), max_size=3) | st.text(max_size=8) | st.integers() | st.none()
cell_values = scalars.filter(lambda value: not isinstance(value, float) or math.isfinite(value)) | st.lists(
    st.text(max_size=8), max_size=3
)
any_row = st.fixed_dictionaries(
    {},
    optional={
        "id": case_ids,
        "question": questions,
        "reference_answer": st.text(max_size=20) | st.none() | st.integers(),
        **dict.fromkeys(LIST_FIELDS, words),
        "match": st.sampled_from(["word", "substring", "regex"]) | st.integers(),
        "extra": cell_values,
    },
)
valid_row = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=8), "question": st.text(min_size=1, max_size=30).filter(str.strip)},
    optional={
        "reference_answer": st.text(max_size=20),
        **dict.fromkeys(LIST_FIELDS, st.lists(st.text(max_size=8))),
    },
)
rows = st.lists(valid_row, max_size=5) | st.lists(valid_row | any_row, max_size=6)


def assert_valid_cases(cases: list[EvalCase], count: int) -> None:
    assert len(cases) == count
    assert all(isinstance(case, EvalCase) for case in cases)
    ids = [case.id for case in cases]
    assert len(set(ids)) == len(ids)
    for case in cases:
        assert case.question and case.question == case.question.strip()


def load_or_eval_case_error(path: Path, count: int) -> None:
    try:
        cases = load_eval_cases(path)
    except EvalCaseError as error:
        assert str(path) in str(error)
        return
    assert_valid_cases(cases, count)


@FAST
@given(case_rows=rows, wrapped=st.booleans())
def test_any_yaml_case_file_gives_cases_or_an_eval_case_error(
    workdir: Path, case_rows: list[dict[str, Any]], wrapped: bool
) -> None:
    path = workdir / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": case_rows} if wrapped else case_rows), encoding="utf-8")
    load_or_eval_case_error(path, len(case_rows))


@FAST
@given(case_rows=rows, blank_lines=st.integers(0, 2))
def test_any_jsonl_case_file_gives_cases_or_an_eval_case_error(
    workdir: Path, case_rows: list[dict[str, Any]], blank_lines: int
) -> None:
    path = workdir / "cases.jsonl"
    lines = [json.dumps(row, default=str) for row in case_rows] + ["  "] * blank_lines
    path.write_text("\n".join(lines), encoding="utf-8")
    load_or_eval_case_error(path, len(case_rows))


@FAST
@given(text=st.text(max_size=200) | st.sampled_from(TRICKY_YAML), suffix=st.sampled_from([".yaml", ".jsonl"]))
def test_any_text_case_file_gives_cases_or_an_eval_case_error(workdir: Path, text: str, suffix: str) -> None:
    path = workdir / f"text{suffix}"
    path.write_text(text, encoding="utf-8")
    try:
        cases = load_eval_cases(path)
    except EvalCaseError as error:
        assert str(path) in str(error)
        return
    assert_valid_cases(cases, len(cases))


@FAST
@given(content=not_utf8, suffix=st.sampled_from([".yaml", ".jsonl", ".json"]))
def test_a_case_file_that_is_not_utf8_is_an_eval_case_error_naming_the_file(
    workdir: Path, content: bytes, suffix: str
) -> None:
    path = workdir / f"latin1{suffix}"
    path.write_bytes(content)
    with pytest.raises(EvalCaseError, match="not UTF-8") as error:
        load_eval_cases(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("scalar", YAML_CONSTRUCTOR_CRASHES)
def test_a_case_file_that_pyyaml_cannot_build_is_an_eval_case_error(workdir: Path, scalar: str) -> None:
    path = workdir / "unbuildable.yaml"
    path.write_text(f"- id: a\n  question: {scalar}\n", encoding="utf-8")
    with pytest.raises(EvalCaseError, match=re.escape(str(path))):
        load_eval_cases(path)


# A table in the cookbook's shape: its columns mapped onto case fields, ids sometimes missing.
COOKBOOK_COLUMNS = {"question": "q", "reference_answer": "answer", "expected_sources": "source"}
cookbook_tables = st.lists(
    st.fixed_dictionaries(
        {
            "q": st.text(min_size=1, max_size=30).filter(str.strip),
            "id": st.none() | st.uuids().map(str),
            "answer": st.none() | st.text(max_size=20),
            "source": st.text(max_size=8) | st.lists(st.text(max_size=8), max_size=2),
        }
    ),
    min_size=1,
    max_size=6,
).map(lambda table: (table, COOKBOOK_COLUMNS))


@st.composite
def random_tables(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Rows of one table (every row has every column, as `datasets` gives them) and a column mapping."""
    columns = draw(
        st.lists(
            st.sampled_from([*EvalCase.model_fields, "q", "answer", "source"]) | keys, max_size=5, unique=True
        )
    )
    table = draw(
        st.lists(st.fixed_dictionaries({column: cell_values | questions for column in columns}), max_size=6)
    )
    mapping = (
        draw(
            st.dictionaries(
                st.sampled_from(list(EvalCase.model_fields)) | keys,
                st.sampled_from(columns) | keys,
                max_size=3,
            )
        )
        if columns
        else {}
    )
    return table, mapping


@FAST
@given(table=cookbook_tables | random_tables())
def test_any_table_gives_cases_or_an_eval_case_error(
    table: tuple[list[dict[str, Any]], dict[str, str]],
) -> None:
    table_rows, columns = table
    try:
        cases = cases_from_rows(table_rows, columns, "table.csv")
    except EvalCaseError as error:
        assert str(error).startswith("table.csv: ")
        return
    assert_valid_cases(cases, len(table_rows))
    for number, (row, case) in enumerate(zip(table_rows, cases, strict=True), start=1):
        id_column = columns.get("id", "id")
        if row.get(id_column) is None:
            assert case.id == f"case-{number}"
        for field in LIST_FIELDS:
            assert all(isinstance(item, str) for item in getattr(case, field))
