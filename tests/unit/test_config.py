from collections.abc import Iterator
from typing import Any

import pytest

from ragbench.config.model import DEFAULT_CONFIG_PATH, BenchmarkConfig, ConfigError, load_config
from ragbench.inputs.chunking import overlap_tokens
from ragbench.inputs.tables import load_yaml, read_utf8


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


# Where configs/default.yaml departs from the code's defaults on purpose, and why (its comments and
# docs/concepts/stages.md say the same): every other value it sets is the code's default.
DEFAULT_YAML_CHOICES = {
    "name": "a config file's own history",
    "chunking.tokenizer": "spelled out: the code's default (none) means the first embedding model, this one",
    "grid.retriever": "the offline default config sweeps the retrievers",
    "grid.embedding_model": "one model, to fit the cold run's 12-minute budget (mpnet adds 6 minutes)",
    "grid.top_n": "3 passages, to fit the time budget (docs/concepts/stages.md)",
    "generation.sample_size": "3 cases end to end, to fit the time budget",
    "evaluation.rubrics": "correctness only: the local 1.5B judge does not tell the context criteria apart",
    "evaluation.judge_check.cases": "2, to fit the time budget (a hosted judge: the default 8)",
    "output_dir": "relative to configs/, the repository's output folder",
    "testset.thresholds.standalone": "the local critic's standalone ratings were noise",
}


def set_values(data: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted keys of a YAML mapping's values; a mapping of LLM settings is one value."""
    for key, value in data.items():
        if isinstance(value, dict) and key not in ("reader", "judge", "eval_cases"):
            yield from set_values(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def at(data: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def test_the_code_defaults_are_the_default_configs_values_but_its_documented_choices():
    written = load_yaml(read_utf8(DEFAULT_CONFIG_PATH), DEFAULT_CONFIG_PATH)
    loaded = load_config().model_dump(mode="json")
    defaults = BenchmarkConfig().model_dump(mode="json")
    keys = list(set_values(written))
    assert set(DEFAULT_YAML_CHOICES) <= set(keys)
    differ = {key for key in keys if at(loaded, key) != at(defaults, key)}
    assert differ == set(DEFAULT_YAML_CHOICES), {key: (at(loaded, key), at(defaults, key)) for key in differ}
    assert defaults["generation"]["reader"] == {"max_tokens": 200}
    assert defaults["evaluation"]["judge"] == {"max_tokens": 300}


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


def test_a_relative_labels_file_resolves_against_the_configs_folder_from_any_cwd(tmp_path, monkeypatch):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = write(project, "name: x\nevaluation: {label_correction: {labels: review_labels.jsonl}}\n")
    config = load_config(path)
    assert config.evaluation.label_correction.labels == str(project / "review_labels.jsonl")
    assert config.evaluation.labels_source == str(project / "review_labels.jsonl")
    both = (
        "name: x\nevaluation: {label_correction: {labels: labels/r.jsonl}, "
        "judge_alignment: {labels: labels/r.jsonl}}\n"
    )
    (project / "both.yaml").write_text(both)
    aligned = load_config(project / "both.yaml").evaluation  # one source, resolved alike: not two
    assert (
        aligned.judge_alignment.labels == aligned.label_correction.labels == str(project / "labels/r.jsonl")
    )
    # on the command line, a relative labels file is the shell's: the current folder
    overridden = load_config(path, ["evaluation.label_correction.labels=mine.jsonl"])
    assert overridden.evaluation.label_correction.labels == str(elsewhere / "mine.jsonl")
