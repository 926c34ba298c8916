"""How long the benchmark's dry run takes to start, check and plan, without and with a ZenML store holding
an earlier run, against importing the command line and reading the config alone (what every command pays
before it does anything).

First one real run of the config, made cheap (BM25 alone, no reader or judge, its first chunk size: the same
documents and eval cases, so the same fingerprints) fills a store in a scratch ZenML folder. Then each
measure runs in fresh processes, a few times: `import cli.main` plus `load_config` of the config
(config_alone); `python run.py --dry-run` where ZenML never ran (dry_run_no_store: it opens no store); the
dry run with that store, whose run remembered the answers the dry run asks (dry_run_store:
`cli.store_memo`); and the same with the memo removed before each run, as after a schedule or another
client wrote to the store (dry_run_store_changed: ZenML is imported and asked). The two with a store must
print the same plan. It prints the median wall and CPU seconds of each (CPU: the process's user and system
time, which a busy machine inflates less than wall time), and each dry run's CPU against the goal.

Compiled modules are cached as Python does by default (in a scratch folder, whatever
PYTHONDONTWRITEBYTECODE says) and each measure's first, compiling, start is not timed;
`--no-bytecode-cache` compiles every import in every process instead.

    python bench/bench_dry_run.py [--config configs/default.yaml] [--repeats 3] [--goal 5] [--smoke]
        [--no-bytecode-cache]
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

from cli.store_memo import MEMO_NAME  # noqa: E402
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


# What makes the earlier run cheap (no model but the chunking tokenizer, no LLM call), on the config's own
# documents and eval cases: its fingerprints, and so the steps the dry run finds finished, are the config's.
CHEAP_RUN = ["grid.retriever=[bm25]", "grid.reader=[]", "grid.judge=[]", "grid.reranker=[off]"]
CHEAP_RUN += ["grid.query_rewrite=[off]", "evaluation.judge_check=null"]


def environment(zenml_folder: Path, bytecode: Path | None) -> dict[str, str]:
    """The measured processes' environment: their own ZenML folder; with `bytecode`, Python's default of
    caching compiled modules (here in a scratch folder, whatever PYTHONDONTWRITEBYTECODE says), else every
    import compiled from source in every process."""
    cached = (
        {"PYTHONPYCACHEPREFIX": str(bytecode)} if bytecode is not None else {"PYTHONDONTWRITEBYTECODE": "1"}
    )
    base = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    return base | cached | {"ZENML_CONFIG_PATH": str(zenml_folder), "ZENML_ANALYTICS_OPT_IN": "false"}


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one run of `command` in a fresh process, and what it
    printed; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def earlier_run(config: Path, folder: Path, env: dict[str, str]) -> None:
    """One real run of the config, made cheap (`CHEAP_RUN`, its first chunk size), into the store of `env`:
    the store then holds one earlier run on the config's documents and eval cases, whose end remembered
    the answers the next dry run asks (`cli.store_memo`)."""
    from ragbench.config.model import load_config

    chunk_size = load_config(config, []).grid.chunk_size[0]
    overrides = [*CHEAP_RUN, f"grid.chunk_size=[{chunk_size}]", f"output_dir={folder / 'earlier-run'}"]
    sets = [part for override in overrides for part in ("--set", override)]
    timed([sys.executable, str(ROOT / "run.py"), "--config", str(config), *sets], config.parent, env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measure (the median is shown)")
    parser.add_argument("--goal", type=float, default=5.0, help="the dry run's CPU seconds at most")
    parser.add_argument("--smoke", action="store_true", help="a one-cell project, one run each, no goal")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="compile every import in every process (as PYTHONDONTWRITEBYTECODE=1 does), no warm-up run",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        config = tiny_project(folder) if args.smoke else args.config.resolve()
        repeats = 1 if args.smoke else args.repeats
        bytecode = None if args.no_bytecode_cache else folder / "bytecode"
        store = folder / "zenml-store"
        earlier_run(config, folder, environment(store, bytecode))
        dry_run = [sys.executable, str(ROOT / "run.py"), "--config", str(config), "--dry-run"]
        memo = store / "local_stores" / "default_zen_store" / MEMO_NAME
        # name: (command, its ZenML folder for run k, what to do before each run)
        measures = {
            "config_alone": (
                [
                    sys.executable,
                    "-c",
                    "import sys; import cli.main; "
                    "from ragbench.config.model import load_config; load_config(sys.argv[1], [])",
                    str(config),
                ],
                lambda k: folder / f"zenml-alone-{k}",
                lambda: None,
            ),
            "dry_run_no_store": (dry_run, lambda k: folder / f"zenml-none-{k}", lambda: None),
            "dry_run_store": (dry_run, lambda k: store, lambda: None),
            # the store changed since its answers were remembered (a schedule ran): ZenML is asked
            "dry_run_store_changed": (dry_run, lambda k: store, lambda: memo.unlink(missing_ok=True)),
        }
        medians: dict[str, tuple[float, float]] = {}
        printed: dict[str, set[str]] = {}
        for name, (command, zenml_folder, before) in measures.items():
            if bytecode is not None and not args.smoke:  # the first start compiles: not measured
                before()
                timed(command, config.parent, environment(zenml_folder(-1), bytecode))
            runs = []
            for k in range(repeats):
                before()
                runs.append(timed(command, config.parent, environment(zenml_folder(k), bytecode)))
            medians[name] = (
                statistics.median(wall for wall, _, _ in runs),
                statistics.median(cpu for _, cpu, _ in runs),
            )
            printed[name] = {out for _, _, out in runs}
    if printed["dry_run_store"] != printed["dry_run_store_changed"] or len(printed["dry_run_store"]) != 1:
        raise SystemExit("the remembered answers gave another plan than asking the store")
    if " reused from earlier runs" not in next(iter(printed["dry_run_store"])):
        raise SystemExit("the dry run with a store printed no plan")
    shown = "a one-cell project" if args.smoke else config
    compiled = (
        "every import compiled in every process"
        if bytecode is None
        else "bytecode cached" + (", first starts timed too (smoke)" if args.smoke else ", warm")
    )
    print(f"{repeats} run(s) each on {shown}, fresh processes ({compiled})")
    print("store: one earlier run of the config (" + ", ".join(CHEAP_RUN) + ", its first chunk size)")
    print(
        rows_to_text(
            [
                {"measure": name, "median_wall_s": round(wall, 2), "median_cpu_s": round(cpu, 2)}
                for name, (wall, cpu) in medians.items()
            ]
        )
    )
    alone = medians["config_alone"][1]
    met = True
    print()
    for name in ("dry_run_no_store", "dry_run_store"):
        cpu = medians[name][1]
        print(f"{name} / config alone (CPU): {cpu / alone:.2f}x")
        met &= cpu < args.goal
        verdict = ("met" if cpu < args.goal else "missed") + (", not enforced (smoke)" if args.smoke else "")
        print(f"{name} CPU {cpu:.2f} s (goal < {args.goal:g} s): {verdict}")
    return 0 if met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
