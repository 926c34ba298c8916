"""Relative config paths resolve against the config's folder, `--set` paths against the current directory."""

import copy
from pathlib import Path

import pytest

from ragbench.config.paths import resolve_override_paths, resolve_paths

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A config folder holding a local embedding model and a local GGUF file."""
    (tmp_path / "models" / "my-embedder").mkdir(parents=True)
    (tmp_path / "models" / "m.gguf").write_bytes(b"")
    return tmp_path


def test_knowledge_base_folder_and_eval_file_resolve_against_base(base: Path) -> None:
    data = {"knowledge_base": {"kind": "folder", "path": "docs/"}, "eval_cases": {"path": "cases.yaml"}}
    out = resolve_paths(data, base)
    assert out["knowledge_base"] == {"kind": "folder", "path": str(base / "docs")}
    assert out["eval_cases"] == {"path": str(base / "cases.yaml")}


def test_eval_cases_string_shorthand_resolves(base: Path) -> None:
    out = resolve_paths({"eval_cases": "sets/cases.yaml"}, base)
    assert out["eval_cases"] == str(base / "sets/cases.yaml")


def test_output_and_cache_dirs_resolve_even_if_missing(base: Path) -> None:
    out = resolve_paths({"output_dir": "output", "llm_cache_dir": "../cache"}, base)
    assert out == {"output_dir": str(base / "output"), "llm_cache_dir": str(base.parent / "cache")}


def test_prompt_file_resolves_and_inline_prompt_stays(base: Path) -> None:
    inline = {"system": "Answer.", "user": "{passages} {question}"}
    out = resolve_paths({"prompts": {"terse": "prompts/terse.yaml", "inline": inline}}, base)
    assert out["prompts"] == {"terse": str(base / "prompts/terse.yaml"), "inline": inline}


def test_hub_names_stay_and_existing_local_model_resolves(base: Path) -> None:
    data = {
        "chunking": {"tokenizer": MINILM},
        "grid": {"embedding_model": [MINILM, "models/my-embedder"], "reranker": ["colbert-ir/colbertv2.0"]},
        "eval_cases": {"dataset": "m-ric/huggingface_doc_qa_eval"},
        "testset": {"embedding_model": "models/my-embedder"},
    }
    out = resolve_paths(data, base)
    assert out["chunking"] == {"tokenizer": MINILM}
    assert out["grid"]["embedding_model"] == [MINILM, str(base / "models/my-embedder")]
    assert out["grid"]["reranker"] == ["colbert-ir/colbertv2.0"]
    assert out["eval_cases"] == {"dataset": "m-ric/huggingface_doc_qa_eval"}
    assert out["testset"] == {"embedding_model": str(base / "models/my-embedder")}


def test_explicit_relative_path_resolves_even_if_missing(base: Path) -> None:
    out = resolve_paths({"grid": {"reranker": [None, False, "off", "./ckpt"]}}, base)
    assert out["grid"]["reranker"] == [None, False, "off", str(base / "ckpt")]
    assert resolve_paths({"eval_cases": {"dataset": "../data"}}, base)["eval_cases"] == {
        "dataset": str(base.parent / "data")
    }


def test_reranker_off_stays_a_keyword_even_if_a_folder_off_exists(base: Path) -> None:
    (base / "off").mkdir()
    assert resolve_paths({"grid": {"reranker": "off"}}, base)["grid"]["reranker"] == "off"


def test_single_value_axis(base: Path) -> None:
    out = resolve_paths(
        {"grid": {"embedding_model": "./models/my-embedder", "reader": "local/./m.gguf"}}, base
    )
    assert out["grid"] == {
        "embedding_model": str(base / "models/my-embedder"),
        "reader": f"local/{base / 'm.gguf'}",
    }


@pytest.mark.parametrize(
    "value",
    ["/srv/docs", "~/docs", "s3://bucket/docs", "gs://bucket/docs", "file:///srv/docs", "https://x.org/d"],
)
def test_absolute_home_and_uri_values_stay(base: Path, value: str) -> None:
    data = {"knowledge_base": {"path": value}, "grid": {"embedding_model": [value]}, "output_dir": value}
    assert resolve_paths(data, base) == data


def test_non_strings_and_missing_keys_are_fine(base: Path) -> None:
    data = {"name": "x", "llm_cache_dir": None, "grid": {"chunk_size": [128]}, "eval_cases": {"path": 3}}
    assert resolve_paths(data, base) == data
    assert resolve_paths({}, base) == {}


def test_local_llm_paths_resolve_and_packaged_names_stay(base: Path) -> None:
    packaged = "local/qwen2.5-coder-1.5b-instruct"
    (base / "qwen2.5-coder-1.5b-instruct").mkdir()  # a same-named folder does not make it a path
    data = {
        "grid": {
            "reader": [packaged, "local/./models/m.gguf", {"model": "local/models/m.gguf", "max_tokens": 9}],
            "judge": ["openai/gpt-4o-mini", "local/missing.gguf", "local//abs/x.gguf", "local/~/x.gguf"],
        },
        "testset": {"generator": {"model": "local/../up.gguf"}, "critic": packaged},
    }
    out = resolve_paths(data, base)
    gguf = str(base / "models" / "m.gguf")
    assert out["grid"]["reader"] == [packaged, f"local/{gguf}", {"model": f"local/{gguf}", "max_tokens": 9}]
    assert out["grid"]["judge"] == data["grid"]["judge"]  # missing without ./, absolute, ~
    assert out["testset"] == {"generator": {"model": f"local/{base.parent / 'up.gguf'}"}, "critic": packaged}


def test_resolved_local_path_is_what_the_local_provider_opens(base: Path) -> None:
    """`ragbench.llm.local` strips ``local/`` and opens the rest; the rest must be the absolute file."""
    model = resolve_paths({"testset": {"generator": "local/./models/m.gguf"}}, base)["testset"]["generator"]
    assert model.startswith("local//")
    name = model.removeprefix("local/")  # as ragbench.llm.local.local_model_name does
    assert Path(name).is_absolute() and Path(name).is_file()


def test_input_is_not_mutated(base: Path) -> None:
    data = {
        "knowledge_base": {"kind": "folder", "path": "docs"},
        "grid": {"embedding_model": ["./models/my-embedder"], "reader": [{"model": "local/./models/m.gguf"}]},
        "prompts": {"p": "p.yaml"},
    }
    before = copy.deepcopy(data)
    out = resolve_paths(data, base)
    assert data == before
    assert out["grid"]["reader"][0] is not data["grid"]["reader"][0]


def test_overrides_resolve_against_cwd(base: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    cwd = tmp_path_factory.mktemp("cwd")
    assert resolve_override_paths("knowledge_base.path", "docs", cwd) == str(cwd / "docs")
    assert resolve_override_paths("eval_cases", "cases.yaml", cwd) == str(cwd / "cases.yaml")
    assert resolve_override_paths("grid.embedding_model", [MINILM, "./emb"], cwd) == [
        MINILM,
        str(cwd / "emb"),
    ]
    assert resolve_override_paths("grid", {"embedding_model": "./emb"}, cwd) == {
        "embedding_model": str(cwd / "emb")
    }
    assert resolve_override_paths("prompts.terse", "t.yaml", cwd) == str(cwd / "t.yaml")
    assert (
        resolve_override_paths("testset.generator.model", "local/./m.gguf", cwd) == f"local/{cwd / 'm.gguf'}"
    )
    # a local model existing under the config's folder but not under cwd is a name on the command line
    assert (
        resolve_override_paths("testset.embedding_model", "models/my-embedder", cwd) == "models/my-embedder"
    )
    assert resolve_override_paths("grid.chunk_size", [128], cwd) == [128]
    assert resolve_override_paths("name", "docs", cwd) == "docs"


def test_labels_files_resolve_even_if_missing_and_artifact_names_stay(base: Path) -> None:
    for section in ("label_correction", "judge_alignment"):
        out = resolve_paths({"evaluation": {section: {"labels": "review_labels.jsonl"}}}, base)
        assert out["evaluation"][section]["labels"] == str(base / "review_labels.jsonl")
        for name in ("review_labels", "review_labels:3"):
            kept = resolve_paths({"evaluation": {section: {"labels": name}}}, base)
            assert kept["evaluation"][section]["labels"] == name
