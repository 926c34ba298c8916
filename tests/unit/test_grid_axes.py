"""Every axis declared once, as an `Axis` entry: the built-in ones keep every id they had, and an axis
registered from outside the core (here, from this test) is in the config, the grid, the stage keys, the
labels and the dry run with no core edit. The real pipeline run of one is
tests/integration/test_registered_axis_pipeline.py."""

from __future__ import annotations

import importlib.util

import pytest

import ragbench.grid.cell as grid_cell
from ragbench.config.dry_run import plan_rows
from ragbench.config.expand import expand_grid
from ragbench.config.model import BenchmarkConfig, ConfigError, load_config
from ragbench.grid.axes import AXES, STAGES, Axis
from ragbench.grid.cell import CellSpec, cell_labels, distinct_at, varying_axes
from ragbench.inputs.eval_cases import EvalCase
from ragbench.retrieval.ann import FLAT_INDEX
from ragbench.retrieval.rewrite import OFF

# The default config's cell ids and the first cell's step ids, recorded on main before the axis registry
# (f095b19): the registry must rename no cell and no step, so every earlier run's steps are reused.
DEFAULT_CELL_IDS = [
    "cs128_o13_all_MiniLM_L6_v2_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_f518cb69",
    "cs128_o13_bm25_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_842a6a70",
    "cs128_o13_hybrid_all_MiniLM_L6_v2_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_8783623f",
    "cs256_o26_all_MiniLM_L6_v2_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_427ce1b3",
    "cs256_o26_bm25_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_13e16b96",
    "cs256_o26_hybrid_all_MiniLM_L6_v2_k30_n3_rr_off_local_qwen2_5_coder_1_5b_instruct_p_default_j_local_qwen2_5_coder_1_5b_instruct_0f1ef912",
]
DEFAULT_FIRST_CELL_STEPS = {
    "chunk": "chunk_cs128_o13_3b7ec6ea",
    "index": "index_cs128_o13_all_MiniLM_L6_v2_63801128",
    "retrieve": "retrieve_cs128_o13_all_MiniLM_L6_v2_k30_7d6baa2c",
    "rerank": "rerank_cs128_o13_all_MiniLM_L6_v2_k30_7d6baa2c",
    "answer": "answer_cs128_o13_all_MiniLM_L6_v2_k30_n3_rr_off_"
    "local_qwen2_5_coder_1_5b_instruct_p_default_798c01f6",
    "judge": DEFAULT_CELL_IDS[0].replace("cs128", "judge_cs128", 1),
}

# A toy axis as another package would declare it: a retrieve-stage setting, off by default.
TOY = Axis(
    name="toy_mode",
    stage="retrieve",
    consumer="tests.unit.test_grid_axes (read as part of the retrieve step's key)",
    tag="toy-",
    label="toy ",
    off="off",
    off_text="off",
    default=["off"],
)


@pytest.fixture
def toy_axis():
    AXES.register(TOY)
    yield TOY
    AXES.unregister(TOY.name)


def test_the_default_config_keeps_every_cell_id_and_step_id():
    cells = expand_grid(load_config())
    assert [cell.id for cell in cells] == DEFAULT_CELL_IDS
    assert {stage: cells[0].step_id(stage) for stage in STAGES} == DEFAULT_FIRST_CELL_STEPS


def test_every_builtin_axis_is_a_cell_field_and_a_grid_key_with_a_known_stage():
    assert AXES.names()[: len(CellSpec.model_fields)] == list(CellSpec.model_fields)
    grid_keys = set(BenchmarkConfig.model_fields["grid"].annotation.model_fields)
    assert grid_keys == set(CellSpec.model_fields) - {"external"}  # systems are their own section
    assert all(AXES[name].stage in STAGES for name in AXES.names())
    # each names the module of the stage that reads its value
    assert all(importlib.util.find_spec(AXES[name].consumer.split()[0]) for name in AXES.names())
    # the values that mean "off" are the retrieval package's own
    assert grid_cell.FLAT_INDEX == FLAT_INDEX and grid_cell.OFF == OFF
    assert AXES["index"].off_text == FLAT_INDEX and AXES["query_rewrite"].off == OFF


def test_a_registered_axis_is_a_grid_key_with_its_default_and_its_type(toy_axis):
    default = load_config()
    assert default.grid.values_of("toy_mode") == ["off"]
    assert [cell.id for cell in expand_grid(default)] == DEFAULT_CELL_IDS  # off: no cell renamed
    config = load_config(None, ["grid.toy_mode=[a, b]"])
    assert config.grid.values_of("toy_mode") == ["a", "b"]
    assert config.model_dump(mode="json")["grid"]["toy_mode"] == ["a", "b"]  # dumped as written
    assert BenchmarkConfig.model_validate(config.model_dump(mode="json")) == config
    no_grid = BenchmarkConfig.model_validate({"name": "no-grid"})  # the default grid, made before the axis
    assert no_grid.grid.values_of("toy_mode") == ["off"] and expand_grid(no_grid)[0].toy_mode is None
    with pytest.raises(ConfigError, match="toy_mode has duplicates"):
        load_config(None, ["grid.toy_mode=[a, a]"])
    with pytest.raises(ConfigError, match="toy_mode needs at least one value"):
        load_config(None, ["grid.toy_mode=[]"])
    with pytest.raises(ConfigError, match=r"grid\.not_an_axis: unknown key"):
        load_config(None, ["grid.not_an_axis=[a]"])


def test_an_axis_not_registered_is_no_grid_key_and_no_cell_field():
    with pytest.raises(ConfigError, match=r"grid\.toy_mode: unknown key"):
        load_config(None, ["grid.toy_mode=[a, b]"])
    with pytest.raises(ValueError, match="toy_mode: not a grid axis"):
        CellSpec(chunk_size=64, toy_mode="a")


def test_a_registered_axis_is_in_the_grid_its_stage_keys_and_the_labels(toy_axis):
    config = load_config(None, ["grid.toy_mode=[off, a, b]", "grid.chunk_size=[64]", "grid.retriever=dense"])
    cells = expand_grid(config)
    assert [cell.toy_mode for cell in cells] == [None, "a", "b"]  # `off` is None: the ids of before
    assert (
        cells[0].id == expand_grid(load_config(None, ["grid.chunk_size=[64]", "grid.retriever=dense"]))[0].id
    )
    assert "toy_a" in cells[1].id and "toy_b" in cells[2].id
    assert cells[1].identity()["toy_mode"] == "a"
    # keyed from its stage on: one chunk set and one index for all three, a retrieve step and on per value
    for stage in ("chunk", "index"):
        assert len({cell.step_id(stage) for cell in cells}) == 1
        assert len(distinct_at(cells, stage)) == 1
    for stage in ("retrieve", "answer", "judge"):
        assert len({cell.step_id(stage) for cell in cells}) == 3
    assert CellSpec.model_validate(cells[1].identity()) == cells[1]  # a step's spec makes the same cell
    assert cells[1].upto("index") == cells[0].upto("index")
    assert varying_axes(cells) == ["toy_mode"]
    assert list(cell_labels(cells).values()) == ["toy off", "toy a", "toy b"]
    assert [cell.axis_columns()["toy_mode"] for cell in cells] == ["off", "a", "b"]


def test_the_dry_run_shows_a_registered_axis(toy_axis):
    config = load_config(None, ["grid.toy_mode=[a, b]", "grid.chunk_size=[64]", "grid.retriever=dense"])
    cases = [EvalCase(id="one", question="What is it?", expected_sources=["a.md"])]
    rows = plan_rows(config, cases, set(), cells=expand_grid(config))
    assert [row["cell"] for row in rows] == ["toy a", "toy b"]
    assert all(row["status"] == "new" for row in rows)


def test_a_registered_axis_may_compute_its_values_from_the_earlier_axes(toy_axis):
    per_size = Axis(
        name="toy_window",
        stage="chunk",
        consumer="the test",
        tag="w",
        values=lambda config, cell: [cell["chunk_size"] // 2, cell["chunk_size"]],
    )
    AXES.register(per_size)
    try:
        cells = expand_grid(load_config(None, ["grid.chunk_size=[64, 128]", "grid.retriever=dense"]))
        assert [(cell.chunk_size, cell.toy_window) for cell in cells] == [
            (64, 32),
            (64, 64),
            (128, 64),
            (128, 128),
        ]
        assert len(distinct_at(cells, "chunk")) == 4
        with pytest.raises(ValueError, match="already declared"):
            AXES.register(per_size)
    finally:
        AXES.unregister(per_size.name)
