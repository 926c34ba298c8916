"""Planning imports no litellm (seconds of CPU): a fresh interpreter that imports the LLM client, the
pricing and the dry run, estimates a local model's calls, and runs the starter config's dry run has not
loaded it. Only a fresh process shows this; in the test session's own process, whether litellm is in
`sys.modules` depends on which tests ran before (tests/unit/test_llm_providers.py checks the same calls
in process, with litellm made unimportable)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import ragbench.llm.client, ragbench.llm.pricing, ragbench.config.dry_run
assert "litellm" not in sys.modules, "imported by importing the client, pricing or the dry run"
from ragbench.llm.pricing import estimate_cost
from ragbench.llm.types import LLMSettings
estimate = estimate_cost(LLMSettings(model="local/qwen2.5-coder-1.5b-instruct"), ["How do I sort a list?"])
assert estimate["prompt_tokens"] > 0 and estimate["cost_usd"] == 0.0
assert "litellm" not in sys.modules, "imported by a local model's estimate"
import run
assert run.main(["init", "my.yaml"]) == 0
code = run.main(["--config", "my.yaml", "--dry-run"])
assert code == 0, code
print("litellm loaded:", "litellm" in sys.modules)
"""


def test_a_dry_run_of_local_models_loads_no_litellm(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text(SCRIPT)  # ZenML wants a main module with a file
    env = {**os.environ, "ZENML_CONFIG_PATH": str(tmp_path / "zenml"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "check.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "local/qwen2.5-coder-1.5b-instruct  new" in done.stdout  # the dry run's table
    assert done.stdout.rstrip().endswith("litellm loaded: False")
