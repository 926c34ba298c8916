"""The dry run starts light: on a machine where ZenML never ran it imports no step, no pipeline and no
ZenML, and opens (creates) no store: there is no earlier run to reuse. Where a local store holds earlier
runs, it reads what they finished from the answers remembered beside the store (`cli.store_memo`), again
without ZenML, and only while the store is unchanged: a run deleted by another process is not reused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Run the dry run in this process's interpreter, then name the modules it imported that it must not.
PROBE = """
import sys
import run
code = run.main(["--config", "config.yaml", "--dry-run"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("steps", "zenml") or m == "pipelines.benchmark")
print("HEAVY", heavy)
sys.exit(code)
"""


# Delete the newest benchmark run, as another client of the store would.
DELETE = """
from zenml.client import Client
client = Client()
client.delete_pipeline_run(client.get_pipeline("rag_benchmark").last_run.id)
"""


def project(root: Path, grid: str = "{chunk_size: [64], top_k: [5], top_n: [1]}") -> None:
    (root / "kb").mkdir()
    (root / "kb" / "loops.md").write_text("# Loops\nThe break statement ends the innermost loop.\n")
    case = {"id": "break", "question": "How do I leave a loop?", "expected_sources": ["loops.md"]}
    (root / "cases.jsonl").write_text(json.dumps(case) + "\n")
    (root / "config.yaml").write_text(
        "name: light\nknowledge_base: {kind: folder, path: kb}\neval_cases: cases.jsonl\noutput_dir: out\n"
        f"grid: {grid}\nevaluation: {{judge_check: null}}\n"
    )


def script(root: Path, name: str, text: str) -> str:
    """`text` as the file `root/name`: ZenML finds its source root from the main module's file."""
    (root / name).write_text(text)
    return str(root / name)


def python(root: Path, *arguments: str) -> str:
    """What `python *arguments` printed, run in `root` with the store in `root/zenml`; it must succeed."""
    done = subprocess.run(
        [sys.executable, *arguments],
        cwd=root,
        env={**os.environ, "ZENML_CONFIG_PATH": str(root / "zenml"), "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def test_a_dry_run_where_zenml_never_ran_imports_no_step_and_opens_no_store(tmp_path):
    project(tmp_path)
    printed = python(tmp_path, script(tmp_path, "probe.py", PROBE))
    assert " new, 0 reused from earlier runs" in printed
    assert "HEAVY []" in printed, printed
    assert not (tmp_path / "zenml").exists()  # no store was created


@pytest.mark.slow
def test_a_dry_run_after_a_run_reuses_its_steps_without_zenml_until_the_store_changes(tmp_path):
    project(tmp_path, "{chunk_size: [64], top_k: [5], retriever: [bm25], reader: [], judge: []}")  # no model
    python(tmp_path, str(REPO_ROOT / "run.py"), "--config", "config.yaml")
    probe = script(tmp_path, "probe.py", PROBE)
    printed = python(tmp_path, probe)
    assert "1 cells: 0 new, 1 reused from earlier runs" in printed, printed
    assert "HEAVY []" in printed, printed  # the run remembered the answers: no ZenML imported
    python(tmp_path, script(tmp_path, "delete.py", DELETE))  # another client changed the store
    printed = python(tmp_path, probe)
    assert "1 cells: 1 new, 0 reused from earlier runs" in printed, printed  # the memo was not served
    assert "'zenml'" in printed  # the store was asked
    printed = python(tmp_path, probe)
    assert "1 cells: 1 new, 0 reused" in printed and "HEAVY []" in printed, printed  # remembered again
