"""Every script in bench/ runs on tiny data and prints the numbers it promises, so a refactor cannot
silently break a bench; a new bench script fails here until it has a smoke run in SMOKE_RUNS."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_SCRIPTS = sorted((REPO_ROOT / "bench").glob("*.py"))
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def parse_table(stdout: str) -> list[dict[str, str]]:
    """The rows of the fixed-width table `ragbench.pages.rows_to_text` printed (values hold no spaces)."""
    lines = stdout.splitlines()
    start = next(i for i in range(1, len(lines)) if re.fullmatch(r"-+( +-+)*", lines[i].strip()))
    header = lines[start - 1].split()
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(dict(zip(header, line.split(), strict=True)))
    assert rows, stdout
    assert list(rows[0]) == header
    return rows


def check_index_build(stdout: str) -> None:
    """One row for the one model; the counter matches the grid's chunks (two index steps share it)."""
    (row,) = parse_table(stdout)
    assert list(row) == [
        "embedding",
        "chunks_in_grid",
        "raw_chunks_per_s",
        "pipeline_chunks_per_s",
        "ratio",
        "chunk_texts_encoded",
        "one_encode_per_chunk",
    ]
    assert row["embedding"] == MINILM
    assert int(row["chunks_in_grid"]) == int(row["chunk_texts_encoded"]) > 0
    assert row["one_encode_per_chunk"] == "True"
    raw, pipeline = float(row["raw_chunks_per_s"]), float(row["pipeline_chunks_per_s"])
    assert raw > 0 and pipeline > 0
    assert float(row["ratio"]) == pytest.approx(pipeline / raw, rel=0.05)
    assert stdout.rstrip().endswith("(smoke: ratio not enforced) -> PASS")


def check_llm_concurrency(stdout: str) -> None:
    """Both batches made every call, the server saw the limit in flight, and the speed-up met its goal."""
    batches = re.findall(r"concurrency +(\d+): .* for (\d+) calls .* server saw max (\d+) in flight", stdout)
    assert batches == [("1", "8", "1"), ("4", "8", "4")], stdout
    speedup, goal = re.search(r"speed-up ([\d.]+)x \(goal >= ([\d.]+)x", stdout).groups()
    assert float(goal) == pytest.approx(3.2)
    assert float(speedup) >= float(goal)
    assert stdout.rstrip().endswith("PASS")


SMOKE_RUNS: dict[str, tuple[list[str], Callable[[str], None]]] = {
    # The first document ('assert') is the expected source of one case; two chunk sizes make two index
    # steps and two top_k values two retrieve steps per index, so re-embedding would show in the count.
    "bench_index_build.py": (
        [
            "--documents=1",
            "--set=grid.chunk_size=[128,256]",
            f"--set=grid.embedding_model=[{MINILM}]",
            "--set=grid.top_k=[5,10]",
            "--smoke",
        ],
        check_index_build,
    ),
    "bench_llm_concurrency.py": (
        ["--requests=8", "--latency=0.25", "--concurrency=4"],
        check_llm_concurrency,
    ),
}


def test_every_smoke_run_names_a_bench_script() -> None:
    assert set(SMOKE_RUNS) <= {script.name for script in BENCH_SCRIPTS}


@pytest.mark.parametrize("script", BENCH_SCRIPTS, ids=lambda script: script.stem)
def test_bench_script_smoke(script: Path, tmp_path: Path) -> None:
    assert script.name in SMOKE_RUNS, f"bench/{script.name} has no smoke run: add one to SMOKE_RUNS"
    args, check = SMOKE_RUNS[script.name]
    result = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=REPO_ROOT,
        env={**os.environ, "ZENML_CONFIG_PATH": str(tmp_path / "zenml")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    check(result.stdout)
