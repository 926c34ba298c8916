"""The grid model: one expansion, stage keys that share work, ids that stay unique and readable."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbench.config.expand import expand_grid
from ragbench.config.model import ConfigError, load_config
from ragbench.grid.cell import CellSpec, cell_label, cell_labels, distinct_at, varying_axes
from ragbench.retrieval.retrievers import lexical_keys, row_step_ids

SWEEP = [
    "grid.retriever=dense",
    "grid.embedding_model=[sentence-transformers/all-MiniLM-L6-v2, sentence-transformers/all-mpnet-base-v2]",
    "grid.reranker=[off, true]",
]


def config(tmp_path, *overrides):
    """The default config swept over 2 chunk sizes x 2 embeddings x rerank off/on (dense), with overrides."""
    return load_config(None, [*SWEEP, *overrides])


def test_default_grid_shares_indexes_and_answer_sets():
    cells = expand_grid(load_config())
    assert len(cells) == 2 * 3  # chunk size x retriever
    assert len(distinct_at(cells, "chunk")) == 2
    assert len(distinct_at(cells, "index")) == 2  # dense and hybrid share one exact index per chunk size
    assert len(lexical_keys(cells)) == 2  # bm25 and hybrid share one BM25 index per chunk size
    assert len(distinct_at(cells, "answer")) == 6
    assert varying_axes(cells) == ["chunk_size", "retriever"]
    assert {cell.chunk_overlap for cell in cells} == {13, 26}  # 10 % of each size, in tokens
    assert not any(cell.reranker for cell in cells)  # no stand-in in the default grid


def test_every_axis_is_a_list_and_a_scalar_is_one_value(tmp_path):
    grid = config(
        tmp_path,
        "grid.chunk_size=64",
        "grid.chunk_overlap=[0, 8]",
        "grid.top_k=[5, 10]",
        "grid.top_n=[2, 3]",
        "grid.reranker=off",
        "grid.judge=[local/qwen2.5-coder-1.5b-instruct, local/qwen2.5-coder-0.5b-instruct]",
    )
    cells = expand_grid(grid)
    assert len(cells) == 1 * 2 * 2 * 2 * 2 * 1 * 1 * 1 * 2
    assert varying_axes(cells) == ["chunk_overlap", "embedding_model", "top_k", "top_n", "judge"]
    # two judges grade the same answer sets: answers are keyed without the judge
    assert len(distinct_at(cells, "answer")) == len(cells) // 2
    assert len(distinct_at(cells, "index")) == 4  # top_k, top_n and judge never rebuild an index


def test_ids_are_unique_across_providers_and_api_bases(tmp_path):
    grid = config(
        tmp_path,
        "grid.reader=[openai/gpt-4o-mini, azure/gpt-4o-mini, "
        "{model: openai/gpt-4o-mini, api_base: 'http://127.0.0.1:9/v1'}]",
        "grid.chunk_size=[64]",
        "grid.embedding_model=[sentence-transformers/all-MiniLM-L6-v2]",
        "grid.reranker=off",
    )
    cells = expand_grid(grid)
    assert len(cells) == 3
    assert len({cell.id for cell in cells}) == 3
    assert "openai_gpt_4o_mini" in cells[0].id and "azure_gpt_4o_mini" in cells[1].id
    assert len({cell.step_id("answer") for cell in cells}) == 3
    assert len({cell.step_id("index") for cell in cells}) == 1


def test_ids_are_stable_and_change_with_any_setting(tmp_path):
    first = expand_grid(config(tmp_path))
    again = expand_grid(config(tmp_path))
    assert [c.id for c in first] == [c.id for c in again]
    longer = expand_grid(config(tmp_path, "generation.reader={max_tokens: 64}"))
    assert first[0].step_id("index") == longer[0].step_id("index")
    assert first[0].step_id("answer") != longer[0].step_id("answer")


def test_named_prompts_are_an_axis(tmp_path):
    grid = config(
        tmp_path,
        "prompts={terse: {system: 'Answer in five words or say {refusal}', "
        "user: 'Passages: {passages} Question: {question}'}}",
        "grid.prompt=[default, terse]",
        "grid.chunk_size=[64]",
    )
    cells = expand_grid(grid)
    assert {cell.prompt.name for cell in cells} == {"default", "terse"}
    terse = next(cell for cell in cells if cell.prompt.name == "terse")
    system, user = terse.prompt.messages("Why?", "[1] text")
    assert system["content"] == "Answer in five words or say The context does not say."
    assert user["content"] == "Passages: [1] text Question: Why?"


def test_retrieval_only_grid_has_no_answer_stage_but_sweeps_its_rerankers(tmp_path):
    cells = expand_grid(config(tmp_path, "grid.reader=[]"))
    assert len(cells) == 8  # 4 retrieve keys, each with reranker off and colbert-ir/colbertv2.0
    assert all(cell.judge is None and cell.top_n is None for cell in cells)
    assert {cell.last_stage for cell in cells if cell.reranker is None} == {"retrieve"}
    assert {cell.last_stage for cell in cells if cell.reranker is not None} == {"rerank"}
    assert distinct_at(cells, "answer") == []
    assert len(distinct_at(cells, "rerank")) == 4
    off = next(cell for cell in cells if cell.reranker is None)
    assert off == off.upto("retrieve") and off.value_text("reranker") == "off"
    assert "rerank off" in cell_label(off.axis_columns(), varying_axes(cells))


def test_labels_name_only_the_varying_axes(tmp_path):
    cells = expand_grid(config(tmp_path))
    varying = varying_axes(cells)
    assert cell_label(cells[0].axis_columns(), varying) == "cs128 · all-MiniLM-L6-v2 · rerank off"
    assert set(CellSpec.axes()) <= set(cells[0].axis_columns())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["grid.chunk_sizes=[128]"], "grid.chunk_sizes is now grid.chunk_size"),
        (["grid.chunk_overlap=[128]", "grid.chunk_size=[128]"], "must be smaller than chunk size"),
        (["grid.chunk_overlap=[2.5]"], "grid.chunk_overlap"),
        (["grid.top_n=[40]"], "every grid.top_n must be at most every grid.top_k"),
        (["grid.prompt=[nope]"], "not defined in prompts"),
        (["prompts={bad: {system: 'x', user: 'no placeholders'}}"], "must contain {passages}"),
        (["grid.reader=[{model: x, temprature: 1}]"], "temprature"),
        (["grid.embedding_model=[a, a]"], "duplicates"),
    ],
)
def test_bad_axes_are_refused_with_a_message_naming_them(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as raised:
        config(tmp_path, *overrides)
    assert message in str(raised.value)


MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MPNET = "sentence-transformers/all-mpnet-base-v2"


def test_bm25_cells_have_no_embedding_and_hybrid_shares_the_dense_index(tmp_path):
    cells = expand_grid(
        config(
            tmp_path,
            "grid.chunk_size=[128]",
            "grid.retriever=[dense, bm25, hybrid]",
            f"grid.embedding_model=[{MINILM}, {MPNET}]",
            "grid.index=[flat, hnsw]",
            "grid.reranker=off",
        )
    )
    bm25 = [cell for cell in cells if cell.retriever == "bm25"]
    assert len(bm25) == 1 and bm25[0].embedding_model is None and bm25[0].index is None
    assert len(cells) == 1 + 2 * 2 * 2  # bm25 once; dense and hybrid per embedding and index type
    # indexes: one exact and one HNSW per embedding, shared by dense and hybrid; one BM25 per chunk set
    assert {key.step_id("index") for key in distinct_at(cells, "index")} == {
        cell.upto("index").step_id("index") for cell in cells if cell.embedding_model
    }
    assert len(distinct_at(cells, "index")) == 4
    assert len(lexical_keys(cells)) == 1
    assert len(distinct_at(cells, "retrieve")) == len(cells)
    hybrid_hnsw = next(c for c in cells if c.retriever == "hybrid" and c.index == "hnsw")
    assert row_step_ids(hybrid_hnsw)[:2] == [hybrid_hnsw.step_id("index"), hybrid_hnsw.lexical_step_id]
    assert hybrid_hnsw.exact_index_key.index is None
    assert varying_axes(cells) == ["retriever", "embedding_model", "index"]
    labels = {cell_label(cell.axis_columns(), varying_axes(cells)) for cell in cells}
    assert "bm25" in labels and "hybrid · all-MiniLM-L6-v2 · index hnsw" in labels
    assert bm25[0].value_text("retriever") == "bm25" and bm25[0].value_text("index") == ""


def test_dense_flat_cells_keep_the_ids_they_had_before_the_retriever_and_index_axes(tmp_path):
    """Ids are the gate's history: a config that does not use the new axes must compare with old runs."""
    cell = CellSpec(chunk_size=128, chunk_overlap=13, embedding_model=MINILM, top_k=30)
    assert cell.value_text("retriever") == "dense" and cell.value_text("index") == "flat"
    assert "retriever" not in cell.identity() and "index" not in cell.identity()
    (expanded,) = expand_grid(
        config(
            tmp_path,
            "grid.chunk_size=128",
            "grid.retriever=dense",
            f"grid.embedding_model={MINILM}",
            "grid.reader=[]",
            "grid.reranker=off",
        )
    )
    assert expanded.id == cell.id


@pytest.mark.parametrize(
    ("written", "canonical"),
    [("hnsw", "hnsw"), ("ivf(nprobe=8)", "ivf(nprobe=8)"), ("flat", "flat")],
)
def test_index_types_are_validated_and_canonical(tmp_path, written, canonical):
    assert config(tmp_path, f"grid.index=[{written}]").grid.index == [canonical]


def test_unknown_index_type_or_retriever_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="annoy"):
        config(tmp_path, "grid.index=[annoy]")
    with pytest.raises(ConfigError, match="retriever"):
        config(tmp_path, "grid.retriever=[splade]")


def test_two_readers_of_one_model_get_labels_that_say_how_they_differ(tmp_path):
    cells = expand_grid(
        load_config(
            None,
            [
                "grid.chunk_size=[128]",
                "grid.retriever=dense",
                "grid.reader=[{model: openai/m, temperature: 0.0}, {model: openai/m, temperature: 0.7},"
                " {model: openai/m, temperature: 0.7, api_base: 'http://127.0.0.1:9/v1'}, openai/other]",
                "grid.judge=[{model: openai/j, seed: 1}, {model: openai/j, seed: 2}]",
            ],
        )
    )
    labels = cell_labels(cells)
    assert len(set(labels.values())) == len(cells) == 8
    assert "reader" in varying_axes(cells) and "judge" in varying_axes(cells)
    texts = sorted({label.split(" · ")[0] for label in labels.values()})
    assert texts == [
        "openai/m (api_base http://127.0.0.1:9/v1, temperature 0.7)",
        "openai/m (api_base none, temperature 0.0)",
        "openai/m (api_base none, temperature 0.7)",
        "openai/other",
    ]
    assert {label.split(" · ")[1] for label in labels.values()} == {
        "judge openai/j (seed 1)",
        "judge openai/j (seed 2)",
    }


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "model": st.sampled_from(["openai/a", "openai/b"]),
                "temperature": st.sampled_from([0.0, 0.5]),
                "max_tokens": st.sampled_from([64, 512]),
                "seed": st.sampled_from([None, 0, 7]),
                "api_base": st.sampled_from([None, "http://127.0.0.1:8000/v1"]),
            }
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=60, deadline=None)
def test_no_two_cells_ever_share_a_label(readers):
    from ragbench.llm.types import LLMSettings

    cells = list(
        {
            cell.id: cell
            for cell in (
                CellSpec(chunk_size=128, embedding_model="m", top_k=5, top_n=3, reader=LLMSettings(**reader))
                for reader in readers
            )
        }.values()
    )
    labels = cell_labels(cells)
    assert len(set(labels.values())) == len(cells)


def test_pairwise_pairs_each_answer_set_with_the_baseline_of_its_own_reader_settings(tmp_path):
    """Two readers of one model are two counterparts: with retriever dense as the baseline, each hybrid
    answer set meets the dense one of its own temperature; a reader baseline is named as the table names
    it, and a model name two readers share is refused with those names."""
    from ragbench.grid.cell import pairwise_pairs

    cells = expand_grid(
        load_config(
            None,
            [
                "grid.chunk_size=[128]",
                "grid.retriever=[dense, hybrid]",
                "grid.embedding_model=[sentence-transformers/all-MiniLM-L6-v2]",
                "grid.reader=[{model: openai/m, temperature: 0.0}, {model: openai/m, temperature: 0.7}]",
                "grid.judge=[openai/j]",
            ],
        )
    )
    pairs = pairwise_pairs(cells, {"retriever": "dense"})
    assert len(pairs) == 2
    for candidate, baseline in pairs:
        assert candidate.retriever == "hybrid" and baseline.retriever is None
        assert candidate.reader == baseline.reader
    warm = "openai/m (temperature 0.7)"
    pairs = pairwise_pairs(cells, {"reader": warm})
    assert len(pairs) == 2 and all(baseline.reader.temperature == 0.7 for _, baseline in pairs)
    with pytest.raises(ValueError, match=r"no answer set of the grid has it.*openai/m \(temperature 0.0\)"):
        pairwise_pairs(cells, {"reader": "openai/m"})
