"""The files a run leaves beside the ZenML store (written whole or not at all), and the Markdown summary a
CI job shows."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ragbench.config.model import BenchmarkConfig


def write_folder(root: Path, name: str, files: dict[str, str]) -> Path:
    """Write into a temporary folder and rename, so a crash never leaves a half-written folder."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    for file_name, content in files.items():
        (staging / file_name).write_text(content, encoding="utf-8")
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    return final


def write_outputs(config: BenchmarkConfig, run_name: str, files: dict[str, str]) -> Path:
    """The run's report folder, and `latest` pointing at it."""
    output_root = Path(config.output_dir)
    final = write_folder(output_root, run_name, files)
    latest_tmp = output_root / f".latest-{os.getpid()}"
    latest_tmp.unlink(missing_ok=True)
    latest_tmp.symlink_to(final.name)
    latest_tmp.replace(output_root / "latest")  # atomic: another run never sees it missing
    return final


# The file GitHub Actions shows as a job's summary: each step appends Markdown to the one it is given.
STEP_SUMMARY_ENV_VAR = "GITHUB_STEP_SUMMARY"


def append_step_summary(markdown: str) -> Path | None:
    """Append the gate's Markdown summary to `$GITHUB_STEP_SUMMARY` when it is set (a GitHub Actions step),
    where the job's page shows it; None elsewhere."""
    if not (target := os.environ.get(STEP_SUMMARY_ENV_VAR)):
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as summary:
        summary.write(markdown + "\n")
    return path
