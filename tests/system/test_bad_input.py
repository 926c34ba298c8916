"""Bad input stops at the door: each probe a new user tried is refused with exit 2 and a message naming
the problem, before any model loads, and leaves no run behind that a later one would trust."""

from pathlib import Path

import pytest
from zenml.client import Client

import run
from tests.projects import write_project

DOCUMENTS = {
    f"topic{i}.md": f"# Topic {i}\nTopic {i} is about the number {i} and nothing else." for i in range(6)
}
CASES = [
    {"id": f"t{i}", "question": f"What is topic {i} about?", "expected_sources": [f"topic{i}.md"]}
    for i in range(6)
]
GRID = (
    "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 5, reader: []}\n"
)

# (overrides, what the message must name); run both as a real run and as a dry run
PROBES = [
    (["name={date}"], "name"),
    (["name=prod/rag"], "not a valid config name"),
    (["name=prod rag"], "e.g. 'prod-rag'"),
    (["name=Prod"], "not a valid config name"),
    (["name=" + "x" * 240], "not a valid config name"),
    (["name=''"], "not a valid config name"),
    (["tags=[nightly:1]"], "tag(s)"),
    (["grid.top_k=[0]"], "greater than 0"),
    (["grid.top_k=[-1]"], "greater than 0"),
    (["grid.reader=[openai/x]", "grid.top_n=[0]"], "greater than 0"),
    (["grid.index=[flat, 'ivf(encoding=pq,pq_m=7)']"], "pq_m (7) must divide the vector dimension (384)"),
    (["grid.index=[flat, 'ivf(nlist=100000)']"], "nlist=100000 lists need at least as many vectors"),
    (["grid.index=[flat, 'hnsw(M=0)']"], "greater than or equal to 2"),
    (["grid.reader=[{model: openai/x, api_base: 'https://u:p@h.example.com/v1'}]"], "carries a credential"),
    (["systems=[{name: s, http: {url: 'https://h.example.com/ask?key=abc'}}]"], "query parameter 'key'"),
    (["systems=[{name: s, http: {url: 'https://h.example.com/api?code=abc'}}]"], "query parameter 'code'"),
    (["systems=[{name: s, http: {url: 'https://h.example.com/b?sig=abc'}}]"], "query parameter 'sig'"),
    (["llm_cache_url=postgresql+psycopg://rb@db:5432/rb?password=abc"], "query parameter 'password'"),
    (["grid.embedding_model=[sentence-transformers/all-MiniLM-L6-v3]"], "all-MiniLM-L6-v3"),
    (["orchestration.docker={parent_imag: x}"], "unknown field(s) parent_imag"),
    (["orchestration.secrets=[no-such-secret]"], "no ZenML secret named 'no-such-secret'"),
    (["output_dir=/proc/ragbench-cannot-write"], "output_dir /proc/ragbench-cannot-write is not writable"),
    (["grid.chunk_size=[64]", "grid.chunk_overlap=[64]"], "must be smaller than chunk size"),
    (
        ["evaluation.rubrics=[context]", "evaluation.custom_rubrics=[{name: correctness, criteria: c}]"],
        "belong to built-in metrics",
    ),
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a model name this machine cannot resolve is unknown
    write_project(tmp_path, DOCUMENTS, CASES, GRID)
    return tmp_path


def loaded_models() -> None:
    raise AssertionError("a model was loaded before the input was refused")


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_every_probe_is_refused_before_any_work(project, monkeypatch, capsys, dry_run):
    import sentence_transformers

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", loaded_models)
    before = len(Client().list_pipeline_runs(size=1000).items)
    for overrides, named in PROBES:
        argv = ["--config", "config.yaml", *(f"--set={item}" for item in overrides)]
        code = run.main([*argv, "--dry-run"] if dry_run else argv)
        err = capsys.readouterr().err
        assert code == 2, (overrides, err)
        assert named in err, (overrides, err)
        assert "Traceback" not in err
    assert len(Client().list_pipeline_runs(size=1000).items) == before  # no run was started
    assert not (project / "out").exists() or not any((project / "out").iterdir())


def test_thresholds_merge_over_the_latency_default_and_the_readme_example_gates_what_it_says():
    from ragbench.runs.compare import compare_runs
    from ragbench.runs.gate import RegressionConfig
    from ragbench.runs.record import RunRecord

    regression = RegressionConfig(thresholds={"mrr": 0.1})
    assert regression.thresholds == {"latency_p95_s": 1.0, "mrr": 0.1}

    def record(name: str, latency: float) -> RunRecord:
        metadata = {"metric_directions": {"latency_p95_s": "lower"}, "latency_p95_s__c": latency}
        return RunRecord.from_metadata(name, "now", metadata, {})

    (row,) = compare_runs(record("b", 2.3), record("a", 2.0), regression.thresholds, 0.0).rows
    assert not row["regression"] and row["rule"] == "threshold only (no per-case values or intervals)"
    (row,) = compare_runs(record("b", 3.5), record("a", 2.0), regression.thresholds, 0.0).rows
    assert row["regression"]
    with pytest.raises(ValueError, match="0 or more"):
        RegressionConfig(thresholds={"mrr": -0.1})


def test_faiss_spellings_of_index_parameters_are_accepted():
    from ragbench.retrieval.ann import IndexSpec

    assert IndexSpec.parse("hnsw(M=16,efConstruction=80,efSearch=32)") == IndexSpec.parse(
        "hnsw(m=16,ef_construction=80,ef_search=32)"
    )


def test_init_writes_a_named_portable_config_that_plans_from_an_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run.main(["init", "my.yaml"]) == 0
    text = (tmp_path / "my.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=") and "\n# my:" in text
    assert "\nname: my " in text and "output_dir: output" in text
    assert run.main(["--config", "my.yaml", "--dry-run"]) == 0
    assert "1 cells: 1 new" in capsys.readouterr().out
    assert run.main(["init", "my.yaml"]) == 2  # never overwrites
    assert "exists" in capsys.readouterr().err
    assert run.main(["init", "My Bench.yaml"]) == 2
    assert "try my-bench.yaml" in capsys.readouterr().err
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run.main(["config", "--config", "../my.yaml"]) == 0
    assert f"output_dir: {tmp_path / 'output'}" in capsys.readouterr().out  # beside the config, not cwd


def test_the_dry_run_names_the_stand_in_that_would_run_and_what_it_cannot_check(project, capsys):
    argv = [
        "--config",
        "config.yaml",
        "--dry-run",
        "--set=grid.reader=[local/qwen2.5-coder-1.5b-instruct, openai/gpt-4o-mini]",
        "--set=grid.top_n=[2]",
        "--set=grid.reranker=[off, colbert-ir/colbertv2.0]",
    ]
    assert run.main(argv) == 0
    out = capsys.readouterr().out
    assert "rerank colbert-standin (UNTRAINED)" in out and "rerank colbert-ir" not in out
    assert "the UNTRAINED stand-in" in out and "would run for colbert-ir/colbertv2.0" in out
    assert "Checked only by a real run:" in out and "LLM openai/gpt-4o-mini: its provider's key" in out
