"""Runs record their code: two runs of one config planned from two commits of a checkout show different code
in their metadata, and the gate and `compare` say the baseline ran other code; the gate's verdict lands
beside gate.html as JUnit XML and Markdown, and in GitHub's job summary."""

import subprocess
from pathlib import Path

import pytest
from junitparser import JUnitXml

import ragbench.provenance
import run
from ragbench.provenance import KEY_PACKAGES
from tests.projects import newest_run, write_project

DOCUMENTS = {
    "bread.md": "# Bread\nBread dough rises because yeast ferments sugar into carbon dioxide gas.",
    "tea.md": "# Tea\nGreen tea is best steeped at about eighty degrees Celsius.",
}
CASES = [
    {"id": "bread", "question": "Why does dough get bigger?", "expected_sources": ["bread.md"]},
    {"id": "tea", "question": "How hot should water be for green tea?", "expected_sources": ["tea.md"]},
]


def commit(root: Path, text: str) -> str:
    """Write `text` into the checkout's one file and commit it: the commit's id."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *arguments],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    if not (root / ".git").exists():
        git("init", "-q")
    (root / "scorer.py").write_text(text)
    git("add", ".")
    git("commit", "-qm", text)
    return git("rev-parse", "HEAD")


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """The checkout the client plans from: a git repository of its own standing in for ragbench's (a test
    cannot commit to the repository it runs from), read by the same code and the same `git` a run uses."""
    root = tmp_path / "checkout"
    root.mkdir()
    monkeypatch.setattr(ragbench.provenance, "SOURCE_ROOT", root)
    return root


def test_two_commits_show_as_other_code_in_metadata_gate_and_compare(tmp_path, checkout, monkeypatch, capsys):
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_project(
        project,
        DOCUMENTS,
        CASES,
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2,"
        " reader: []}\n"
        "retrieval: {metrics_k: 1}\n",
    )
    first_commit = commit(checkout, "x = 1\n")
    assert run.main(["--config", "config.yaml"]) == 0
    first = newest_run().run_metadata
    assert first["git_commit"] == first_commit and first["git_dirty"] is False
    assert first["ragbench_version"] == ragbench.__version__
    assert {"zenml", "torch", "sentence-transformers", "faiss-cpu"} <= set(first["package_versions"])
    assert set(first["package_versions"]) <= set(KEY_PACKAGES)
    report = (project / "out" / "latest" / "results.html").read_text()
    assert f"commit {first_commit[:12]}" in report and "zenml " in report

    second_commit = commit(checkout, "x = 2\n")
    capsys.readouterr()
    assert run.main(["--config", "config.yaml"]) == 0  # the same numbers: other code is reported, not failed
    out = capsys.readouterr().out
    second = newest_run().run_metadata
    assert second["git_commit"] == second_commit != first_commit
    other_code = f"OTHER CODE than the baseline: commit {first_commit[:12]} -> commit {second_commit[:12]}"
    assert other_code in out and "ran other code than this run" in out
    assert any("ran other code" in reason for reason in second["gate_reasons"])
    assert second["baseline_code_changes"] == [f"commit {first_commit[:12]} -> commit {second_commit[:12]}"]
    assert run.main(["compare", "--config", "config.yaml"]) == 0
    assert other_code in capsys.readouterr().out

    # the verdict beside gate.html, in CI's formats, and in the job summary of each command
    folder = project / "out" / "latest"
    suite = next(iter(JUnitXml.fromstring((folder / "gate.xml").read_text())))
    cells = second["cell_ids"]
    assert suite.tests == len(cells) + second["compared_metrics"] and suite.failures == suite.errors == 0
    markdown = (folder / "gate.md").read_text()
    assert markdown.startswith("## RAG benchmark gate: PASSED") and "[report](<results.html>)" in markdown
    assert summary.read_text().count("## RAG benchmark gate:") == 3  # two runs and compare, appended
    gate_artifact = newest_run().steps["regression_gate"].outputs["gate"][0]
    shown = {Path(visualization.uri).name for visualization in gate_artifact.visualizations or []}
    assert {"gate.html", "gate.md"} <= shown
