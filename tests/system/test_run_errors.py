"""A run that fails before ZenML has a run of its name (the pipeline raises while compiling, or ZenML
never makes the run) ends in one clear message and exit code 2, not in a KeyError traceback."""

from __future__ import annotations

import pytest

import cli.benchmark
import cli.testset
import pipelines
import pipelines.inputs
import pipelines.testset
import run

SECRET = "sk-test-SECRET-never-printed-42"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A config on a one-document folder; pre-flight (models, keys) is not what these tests are about."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "doc.md").write_text("# Doc\nThe break statement ends the innermost loop.\n")
    (tmp_path / "config.yaml").write_text(
        "name: broken\noutput_dir: out\nknowledge_base: {kind: folder, path: kb}\n"
    )
    monkeypatch.setattr(cli.benchmark, "benchmark_preflight", lambda *args, **kwargs: None)
    monkeypatch.setattr(cli.testset, "run_testset_preflight", lambda *args, **kwargs: 1)
    return tmp_path


def fail_while_compiling(*args, **kwargs):
    raise ValueError(f"cannot snapshot the knowledge base with key {SECRET}")


@pytest.mark.parametrize("command", [[], ["testset"]], ids=["benchmark", "testset"])
def test_a_pipeline_that_raises_while_compiling_exits_2_with_one_message(
    project, monkeypatch, capsys, command
):
    # both pipelines call it in their body, before ZenML creates the run
    monkeypatch.setattr(pipelines.inputs, "knowledge_base_snapshot", fail_while_compiling)
    monkeypatch.setattr(pipelines.testset, "knowledge_base_snapshot", fail_while_compiling)
    code = run.main([*command, "--config", "config.yaml"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    pipeline = "rag_testset" if command else "rag_benchmark"
    assert lines[0].startswith(f"error: run {pipeline}-broken-") and " did not start: " in lines[0]
    assert "ValueError: cannot snapshot the knowledge base with key <OPENAI_API_KEY>" in lines[0]
    assert SECRET not in err
    assert "Traceback" not in err and "KeyError" not in err


class _NoRunPipeline:
    """A pipeline whose launch returns without ZenML having made the run (ZenML refused it quietly)."""

    def with_options(self, **options):
        return lambda **kwargs: None


@pytest.mark.parametrize(
    ("command", "name"), [([], "rag_benchmark"), (["testset"], "rag_testset")], ids=["benchmark", "testset"]
)
def test_a_launch_that_returns_without_a_run_exits_2_with_one_message(
    project, monkeypatch, capsys, command, name
):
    monkeypatch.setattr(pipelines, name, _NoRunPipeline())
    code = run.main([*command, "--config", "config.yaml"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: run {name}-broken-" in err and "did not start: ZenML has no run of that name" in err
    assert "Traceback" not in err and "KeyError" not in err
