"""The dry run starts light: on a machine where ZenML never ran it imports no step, no pipeline and no
ZenML, and opens (creates) no store: there is no earlier run to reuse."""

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_a_dry_run_where_zenml_never_ran_imports_no_step_and_opens_no_store(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "loops.md").write_text("# Loops\nThe break statement ends the innermost loop.\n")
    case = {"id": "break", "question": "How do I leave a loop?", "expected_sources": ["loops.md"]}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    (tmp_path / "config.yaml").write_text(
        "name: light\nknowledge_base: {kind: folder, path: kb}\neval_cases: cases.jsonl\noutput_dir: out\n"
        "grid: {chunk_size: [64], top_k: [5], top_n: [1]}\nevaluation: {judge_check: null}\n"
    )
    zenml = tmp_path / "zenml"
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env={**os.environ, "ZENML_CONFIG_PATH": str(zenml), "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert " new, 0 reused from earlier runs" in done.stdout
    assert "HEAVY []" in done.stdout, done.stdout
    assert not zenml.exists()  # no store was created
