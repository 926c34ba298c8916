"""`compare`: the regression gate by hand, the newest run of a config against a baseline."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.command import Command, RunStopped, add_config_options, config_of
from cli.launch import open_store
from cli.outputs import append_step_summary
from ragbench.config.model import BenchmarkConfig
from ragbench.runs.gate import BASELINE_MODES


class CompareCommand(Command):
    name = "compare"
    help = "compare the newest run of the config with a baseline (exit 1 when the gate fails)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        parser.add_argument(
            "--against",
            metavar="BASELINE",
            help=f"{', '.join(BASELINE_MODES)} or a run name (default: regression.baseline)",
        )
        parser.add_argument(
            "--last", type=int, default=50, metavar="N", help="consider only the newest N runs"
        )
        parser.add_argument("--tag", help="consider only runs with this tag")

    def run(self, args: argparse.Namespace) -> int:
        return compare_command(config_of(args), args.against, args.last, args.tag)


def compare_command(config: BenchmarkConfig, against: str | None, last: int, tag: str | None) -> int:
    """The gate by hand: the newest run of the config, whatever its status, against `against` (default:
    the config's `regression.baseline`). Exit 1 when the gate fails, 0 when it passes, 2 (via
    RunStopped) on bad input."""
    from ragbench.runs.gate import judge_run
    from ragbench.runs.gate_formats import junit_xml, markdown_summary
    from steps.history import config_runs, failure_of, find_baseline, run_record
    from steps.store import ZenMLStore

    open_store()
    runs = config_runs(config.name, tag, last)
    if not runs:
        raise RunStopped(f"no run of config {config.name!r} to compare")
    current = runs[0]
    failure = failure_of(current)
    mode = against or config.regression.baseline
    if mode in BASELINE_MODES:
        baseline = find_baseline(config.name, mode, current, tag)
        if baseline is None and mode != "none" and failure is None:
            how = "promote one with `run.py promote RUN`" if mode == "champion" else "run it again"
            raise RunStopped(f"no {mode} run of config {config.name!r} to compare {current.name} with: {how}")
    else:
        try:
            baseline = ZenMLStore().run(mode)
        except KeyError:
            raise RunStopped(f"no run named {mode!r}") from None
    verdict = judge_run(
        run_record(current),
        run_record(baseline) if baseline is not None else None,
        config=config.name,
        baseline_mode=mode if mode in BASELINE_MODES else f"run {mode}",
        regression=config.regression,
        statistics=config.statistics,
        failure=failure,
    )
    print(verdict.text())
    comparison = verdict.comparison
    if comparison is not None:
        folder = Path(config.output_dir) / "compare"
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{current.name}__vs__{comparison.baseline}"
        links = {"gate page": f"{stem}.html", "report": f"../{current.name}/results.html"}
        markdown = markdown_summary(verdict, links)
        for suffix, content in (
            ("html", verdict.html()),
            ("csv", comparison.csv()),
            ("json", comparison.json()),
            ("md", markdown),
            ("xml", junit_xml(verdict)),
        ):
            (folder / f"{stem}.{suffix}").write_text(content, encoding="utf-8")
        append_step_summary(markdown)
        print(f"(written: {folder / stem}.html, .csv, .json, .md, .xml)")
    return verdict.exit_code
