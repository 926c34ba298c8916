"""ragbench as a user installs it: `pip install -e .` into a fresh virtual environment gives a `ragbench`
command (`--version`, `init`, a dry run); a plugin package that depends on ragbench installs beside it and
its scorer, found through the `ragbench.scorers` entry point only, is scored in a real run of that command;
site-packages holds no module named `cli` or `steps`, and a wheel of the repository is refused.

The fresh environment has no packages of its own: a `.pth` file gives it the shared venv's (torch, ZenML,
...), as a `--system-site-packages` venv gives the base interpreter's, so nothing is downloaded; the
shared venv's pip installs into it (`pip --python`), offline (`--no-index`, `--no-build-isolation`: the
build backend is the setuptools the shared venv has)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import ragbench
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import THREE_TOPIC_CASES, THREE_TOPICS, write_project

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).resolve().parents[1] / "plugin_package"
ANSWER = "The answer is in errors.md [1]."


def pip(python: Path, *arguments: str) -> subprocess.CompletedProcess:
    """The shared venv's pip, installing into the environment of `python`, with no index."""
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index"]
    return subprocess.run(
        [*command, "--no-build-isolation", *arguments], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding ragbench (editable) and the plugin package: its root."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    (site_packages(root) / "shared-venv.pth").write_text(
        "\n".join(sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})) + "\n"
    )
    python = root / "bin" / "python"
    installed = pip(python, "--no-deps", "-e", str(REPO_ROOT))
    assert installed.returncode == 0, installed.stderr
    plugin = tmp_path_factory.mktemp("plugin") / "ragbench-answer-words"
    shutil.copytree(PLUGIN, plugin)
    # with its dependencies: `ragbench` is found installed (editable), ragbench's own in the shared venv
    installed = pip(python, str(plugin))
    assert installed.returncode == 0, installed.stderr
    return root


def site_packages(root: Path) -> Path:
    return root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def ragbench_command(venv: Path, *arguments: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The installed `ragbench` command in a clean working folder, on the session's ZenML store (made once
    per session: a store of its own would cost the run its creation)."""
    return subprocess.run(
        [str(venv / "bin" / "ragbench"), *arguments],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_command_prints_its_version_writes_a_starter_and_plans_it(venv, tmp_path):
    version = ragbench_command(venv, "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"ragbench {ragbench.__version__}"

    init = ragbench_command(venv, "init", "my.yaml", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert "`ragbench --config my.yaml --dry-run`" in init.stdout
    plan = ragbench_command(venv, "--config", "my.yaml", "--dry-run", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "1 cells: 1 new" in plan.stdout


def test_no_generic_module_lands_at_the_top_of_site_packages(venv):
    top = {path.name for path in site_packages(venv).iterdir()}
    assert not top & {"cli", "steps", "pipelines", "materializers", "run.py", "ragbench"}
    assert f"__editable__.ragbench-{ragbench.__version__}.pth" in top
    assert "ragbench_answer_words" in top  # the plugin's own package, a normal install


@pytest.mark.slow
def test_a_plugin_packages_scorer_is_scored_in_a_real_run(venv, tmp_path):
    with FakeOpenAIServer(responder=lambda request: ANSWER) as server:
        llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
        write_project(
            tmp_path,
            THREE_TOPICS,
            THREE_TOPIC_CASES,
            f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
            "reader: [openai/reader], judge: [openai/judge]}\n"
            f"generation: {{reader: {llm}}}\n"
            f"evaluation: {{judge: {llm}, rubrics: [], keyword_tests: false, metrics: [answer_words], "
            "judge_check: null}\n",
        )
        run = ragbench_command(venv, "--config", "config.yaml", cwd=tmp_path, OPENAI_API_KEY="sk-test-DUMMY")
        assert run.returncode == 0, run.stderr[-3000:]
    assert server.request_count == len(THREE_TOPIC_CASES)  # the reader's answers; the scorer asks nothing
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        (row,) = list(csv.DictReader(file))
    assert float(row["answer_words"]) == len(ANSWER.split())
    assert "answer words" in (tmp_path / "out" / "latest" / "results.html").read_text()


def test_a_wheel_of_the_repository_is_refused_with_what_to_run_instead(venv):
    refused = pip(venv / "bin" / "python", "--no-deps", str(REPO_ROOT))
    assert refused.returncode != 0
    assert "pip install -e <clone>" in refused.stderr + refused.stdout
