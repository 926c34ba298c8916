"""How long the benchmark's dry run takes to start, check and plan, against importing the command line and
reading the config alone (what every command pays before it does anything).

Each measure runs in a fresh process, a few times, with a ZenML configuration folder of its own that holds
no store (a machine where ZenML never ran: the dry run then opens none): `python run.py --dry-run` of the
config, and `import cli.main` plus `load_config` of the same config. It prints the median wall and CPU
seconds of each (CPU: the process's user and system time, which a busy machine inflates less than wall
time), their ratio, and the dry run's CPU time against the goal.

    python bench/bench_dry_run.py [--config configs/default.yaml] [--repeats 3] [--goal 5] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from ragbench.report.pages import rows_to_text  # noqa: E402

# The smoke run's project: one document, one case, one cell.
TINY_CONFIG = """name: bench-dry-run-smoke
knowledge_base: {kind: folder, path: kb}
eval_cases: cases.jsonl
output_dir: out
grid: {chunk_size: [64], top_k: [5], top_n: [1]}
evaluation: {judge_check: null}
"""
TINY_CASE = (
    '{"id": "break", "question": "How do I leave a loop early?", "expected_sources": ["loops.md"], '
    '"reference_answer": "Use break."}\n'
)


def tiny_project(folder: Path) -> Path:
    """The smoke run's config file, with its knowledge base and eval cases beside it."""
    (folder / "kb").mkdir()
    (folder / "kb" / "loops.md").write_text("# Loops\nThe break statement ends the innermost loop.\n")
    (folder / "cases.jsonl").write_text(TINY_CASE)
    (folder / "config.yaml").write_text(TINY_CONFIG)
    return folder / "config.yaml"


def timed(command: list[str], cwd: Path, zenml_folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of `command` in a fresh process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=cwd,
        env=os.environ | {"ZENML_CONFIG_PATH": str(zenml_folder), "ZENML_ANALYTICS_OPT_IN": "false"},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measure (the median is shown)")
    parser.add_argument("--goal", type=float, default=5.0, help="the dry run's CPU seconds at most")
    parser.add_argument("--smoke", action="store_true", help="a one-cell project, one run each, no goal")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        config = tiny_project(folder) if args.smoke else args.config.resolve()
        repeats = 1 if args.smoke else args.repeats
        measures = {
            "config_alone": [
                sys.executable,
                "-c",
                "import sys; import cli.main; "
                "from ragbench.config.model import load_config; load_config(sys.argv[1], [])",
                str(config),
            ],
            "dry_run": [sys.executable, str(ROOT / "run.py"), "--config", str(config), "--dry-run"],
        }
        medians: dict[str, tuple[float, float]] = {}
        for name, command in measures.items():
            runs = [timed(command, config.parent, folder / f"zenml-{name}-{k}") for k in range(repeats)]
            medians[name] = (
                statistics.median(wall for wall, _ in runs),
                statistics.median(cpu for _, cpu in runs),
            )
    shown = "a one-cell project" if args.smoke else config
    print(f"{repeats} run(s) each on {shown}, fresh processes, no ZenML store")
    print(
        rows_to_text(
            [
                {"measure": name, "median_wall_s": round(wall, 2), "median_cpu_s": round(cpu, 2)}
                for name, (wall, cpu) in medians.items()
            ]
        )
    )
    (_, alone), (_, dry) = medians["config_alone"], medians["dry_run"]
    print(f"\ndry run / config alone (CPU): {dry / alone:.2f}x")
    met = dry < args.goal
    verdict = ("met" if met else "missed") + (", not enforced (smoke)" if args.smoke else "")
    print(f"dry run CPU {dry:.2f} s (goal < {args.goal:g} s): {verdict}")
    return 0 if met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
