import pytest

from ragbench.config.model import DEFAULT_CONFIG_PATH, BenchmarkConfig, ConfigError, load_config
from ragbench.inputs.chunking import overlap_tokens


def write(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_default_config_is_valid_and_sweeps_chunk_size_and_retriever_with_real_models_only():
    config = load_config()
    assert config.grid.chunk_size == [128, 256]
    assert config.grid.retriever == ["dense", "bm25", "hybrid"]
    assert config.grid.reranker == [None]  # reranking is in configs/rerank_trained.yaml
    assert overlap_tokens(256, config.grid.chunk_overlap[0]) == 26


def test_the_reranking_example_config_is_valid_and_names_the_trained_reranker_it_trains():
    path = DEFAULT_CONFIG_PATH.parent / "rerank_trained.yaml"
    config = load_config(path)
    assert config.grid.reranker == [None, "trained:python-reference"]
    assert config.trained_reranker_name == "python-reference"
    assert "run.py train-reranker --config configs/rerank_trained.yaml" in path.read_text()


def test_set_overrides_parse_yaml_values(tmp_path):
    config = load_config(write(tmp_path, "name: x\n"), ["grid.chunk_size=[64, 96]", "grid.top_k=10"])
    assert config.grid.chunk_size == [64, 96]
    assert config.grid.top_k == [10]


@pytest.mark.parametrize(
    ("yaml_text", "overrides", "message"),
    [
        ("grid:\n  chunk_sizez: [128]\n", [], "grid.chunk_sizez: unknown key"),
        ("grid:\n  top_k: many\n", [], "grid.top_k"),
        ("grid:\n  chunk_overlap: 128\n", [], "must be smaller than chunk size"),
        ("name: x\n", ["chunking.overlap_ratio=0.1"], "chunking.overlap_ratio: unknown key"),
        ("grid:\n  chunk_size: []\n", [], "grid.chunk_size"),
        ("grid:\n  embedding_model: []\n", [], "grid.embedding_model"),
        ("knowledge_base:\n  kind: folder\n", [], "knowledge_base.path is required"),
        ("grid:\n  top_k: 3\nretrieval:\n  metrics_k: 5\n", [], "metrics_k cannot exceed"),
        ("name: x\n", ["grid.chunk_size"], "expects key=value"),
        ("name: x\n", ["name.sub=1"], "not a section"),
    ],
)
def test_invalid_configs_are_refused_with_a_message_naming_the_problem(
    tmp_path, yaml_text, overrides, message
):
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, yaml_text), overrides)
    assert message in str(raised.value)


def test_missing_file_and_non_mapping_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(write(tmp_path, "- a\n- b\n"))


def test_chunking_tokenizer_defaults_to_first_embedding_model():
    config = BenchmarkConfig.model_validate({"grid": {"embedding_model": ["a/b", "c/d"]}})
    assert config.chunking_tokenizer == "a/b"


@pytest.mark.parametrize(
    ("rubrics", "name"),
    [("[context]", "correctness"), ("[correctness]", "faithfulness"), ("[]", "toxicity_1to5_low_good")],
)
def test_a_custom_metric_never_takes_a_builtin_name_even_when_that_builtin_is_off(rubrics, name):
    with pytest.raises(ConfigError, match=f"{name}.*belong to built-in metrics"):
        load_config(
            None,
            [
                f"evaluation.rubrics={rubrics}",
                f"evaluation.custom_rubrics=[{{name: {name}, criteria: The answer is right.}}]",
            ],
        )
    with pytest.raises(ConfigError, match=r"good_answers.*belong to built-in metrics"):
        load_config(
            None,
            [
                "evaluation.keyword_tests=false",
                "evaluation.custom_suites=[{name: good_answers, assert: contains, value: x}]",
            ],
        )
