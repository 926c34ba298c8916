"""Steps need nothing from the client: the tiny benchmark with every step in a fresh process of its own
(`tests.subprocess_orchestrator`: another cwd and HOME, none of the client's environment, an empty model
cache, the client's knowledge-base folder moved away while steps run) gets the same results as a normal
run. The reader's key reaches the steps only through a ZenML secret; pre-flight checks it there."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

import pytest
from zenml.client import Client

import run
from cli.launch import open_store
from tests.conftest import REPO_ROOT
from tests.fake_openai_server import FakeOpenAIServer
from tests.integration.test_gate import responder
from tests.projects import write_keyword_topics
from tests.stacks import orchestrator_stack
from tests.subprocess_orchestrator import FLAVOR

KEY_NAME = "HERMETIC_READER_KEY"
KEY_VALUE = "sk-hermetic-secret-3f9a"
# Columns that measure the machine, not the benchmark.
TIMING = ("latency", "seconds", "duration", "_s", "_ms")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder knowledge base on the client's disk; the eval cases in a 'bucket' read by URI."""
    root = tmp_path / "project"
    root.mkdir()
    write_keyword_topics(root, 3)
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (root / "cases.jsonl").rename(bucket / "cases.jsonl")
    return root


@pytest.fixture
def secret_name() -> str:
    name = f"hermetic-{uuid.uuid4().hex[:8]}"
    open_store()
    Client().create_secret(name=name, values={KEY_NAME: KEY_VALUE})
    yield name
    Client().delete_secret(name)


@pytest.fixture
def pod_stack(tmp_path: Path, project: Path):
    """Yields a function that activates the subprocess orchestrator's stack and returns the file its
    steps are recorded in."""
    records = tmp_path / "steps.jsonl"
    configuration = {
        "home": str(tmp_path / "pod-home"),
        "code_root": str(REPO_ROOT),
        "record_file": str(records),
        "hidden_paths": [str(project / "kb")],
    }
    source = "tests.subprocess_orchestrator.SubprocessOrchestratorFlavor"
    with orchestrator_stack(FLAVOR, source, configuration) as stack:

        def activate() -> Path:
            Client().activate_stack(stack.id)
            return records

        yield activate


def write_config(project: Path, base_url: str, secret: str, name: str) -> None:
    llm = f"{{model: openai/fake-reader, api_base: {base_url}, api_key_env: {KEY_NAME}}}"
    (project / "config.yaml").write_text(
        f"name: {name}\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        f"eval_cases: {(project.parent / 'bucket' / 'cases.jsonl').as_uri()}\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, top_n: 1,"
        f" reader: [{llm}], judge: [{llm}]}}\n"
        "retrieval: {metrics_k: 1}\n"
        "generation: {reader: {max_retries: 0}}\n"
        "evaluation: {judge: {max_retries: 0}, rubrics: [correctness]}\n"
        f"orchestration: {{secrets: [{secret}]}}\n"
        "regression: {baseline: none}\n"
        "output_dir: out\n"
    )


def snapshot_versions() -> list[str]:
    from pipelines.inputs import KNOWLEDGE_BASE_SNAPSHOT

    return [str(v.id) for v in Client().list_artifact_versions(artifact=KNOWLEDGE_BASE_SNAPSHOT, size=1000)]


def benchmark_rows(folder: Path) -> list[dict[str, str]]:
    (results,) = folder.glob("out/rag_benchmark-*/results.csv")
    with results.open() as file:
        rows = list(csv.DictReader(file))
    return [{k: v for k, v in row.items() if not any(t in k for t in TIMING)} for row in rows]


@pytest.mark.slow
def test_every_step_in_a_fresh_process_gets_the_same_results(
    tmp_path, project, secret_name, pod_stack, monkeypatch, capsys
):
    with FakeOpenAIServer(responder=responder) as provider:
        write_config(project, provider.base_url, secret_name, f"hermetic-{uuid.uuid4().hex[:6]}")
        monkeypatch.chdir(project)
        # the normal run: the local orchestrator, steps in this process, the key in this environment
        monkeypatch.setenv(KEY_NAME, KEY_VALUE)
        assert run.main(["--config", "config.yaml", "--set", "llm_cache_dir=client-llm-cache"]) == 0
        normal = benchmark_rows(project)
        normal_calls = provider.request_count
        snapshots = snapshot_versions()
        (project / "out").rename(tmp_path / "normal-out")

        # the same config with every step in a fresh process: no key here, an empty model cache there
        monkeypatch.delenv(KEY_NAME)
        records = pod_stack()
        model_cache = tmp_path / "pod-models"
        code = run.main(["--config", "config.yaml", "--set", f"orchestration.model_cache={model_cache}"])
        assert code == 0, capsys.readouterr().err
        hermetic = benchmark_rows(project)
        assert (
            snapshot_versions() == snapshots
        )  # the unchanged folder's snapshot was reused, not stored again

    assert hermetic == normal and normal
    assert provider.request_count == 2 * normal_calls  # the steps' own LLM cache started empty too
    assert set(provider.authorizations) == {f"Bearer {KEY_VALUE}"}  # from the secret, in the steps
    steps = [json.loads(line) for line in records.read_text().splitlines()]
    assert {step["exit"] for step in steps} == {0} and len(steps) >= 8
    assert len({step["pid"] for step in steps}) == len(steps)  # one fresh process per step
    assert {step["cwd"] for step in steps} == {str(tmp_path / "pod-home")}
    assert (project / "kb").is_dir()  # moved away while the steps ran, back now
    (manifest,) = model_cache.glob("*/ragbench-manifest.json")  # provisioned in the step, where it ran
    assert "all-MiniLM-L6-v2" in manifest.parent.name


def test_preflight_checks_secrets_where_the_steps_run(project, secret_name, pod_stack, monkeypatch, capsys):
    """No run starts when a named secret is missing, or holds none of the keys the models need, even if
    the client's own environment has the key: a step elsewhere never sees the client's environment."""
    monkeypatch.setenv(KEY_NAME, KEY_VALUE)
    monkeypatch.chdir(project)
    pod_stack()
    write_config(project, "http://127.0.0.1:9/v1", "no-such-secret", f"preflight-{uuid.uuid4().hex[:6]}")
    assert run.main(["--config", "config.yaml"]) == 2
    assert "no ZenML secret named 'no-such-secret'" in capsys.readouterr().err
    Client().create_secret(name=f"{secret_name}-other", values={"UNRELATED": "x"})
    try:
        write_config(project, "http://127.0.0.1:9/v1", f"{secret_name}-other", "preflight-x")
        assert run.main(["--config", "config.yaml"]) == 2
        assert f"{KEY_NAME}, which is not set or empty where the steps run" in capsys.readouterr().err
    finally:
        Client().delete_secret(f"{secret_name}-other")
    assert not (project / "out").exists()


def test_preflight_warns_when_no_database_password_reaches_the_steps(tmp_path, caplog):
    from ragbench.config.expand import expand_grid
    from ragbench.config.model import load_config
    from ragbench.config.preflight import run_preflight
    from tests.projects import write_project

    write_project(
        tmp_path,
        {"a.md": "Some text about bread."},
        [{"id": "a", "question": "Bread?", "expected_sources": ["a.md"]}],
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 1, "
        "reader: []}\nretrieval: {metrics_k: 1}\nllm_cache_url: postgresql+psycopg://ragbench@db:5432/x\n",
    )
    config = load_config(tmp_path / "config.yaml")
    cells = expand_grid(config)
    warned = run_preflight(config, cells=cells, step_environment={}).warnings
    assert any("no PGPASSWORD where the steps run" in warning for warning in warned)
    assert not run_preflight(config, cells=cells, step_environment={"PGPASSWORD": "<secret>"}).warnings
