"""`schedule`: run a config's benchmark on a cron schedule. Where a schedule lives follows the active
orchestrator: ZenML registers it when the orchestrator schedules (ZenML's `is_schedulable`), the crontab
holds it otherwise. --list and --remove look at both, the crontab only where a crontab command exists, so an
orchestrator that schedules never needs cron."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cli.command import Command, RunStopped, add_config_options, config_of
from cli.launch import open_store
from ragbench.config.expand import expand_grid
from ragbench.config.model import BenchmarkConfig
from ragbench.config.preflight import run_preflight
from ragbench.runs import schedule

# Where run.py is: the crontab entry runs it from there.
REPO = Path(__file__).resolve().parent.parent


class ScheduleCommand(Command):
    name = "schedule"
    help = "run the config's benchmark on a schedule (ZenML's when the orchestrator schedules, else cron)"
    dry_run = "with --cron or --remove: check, and say what would be installed or removed; change nothing"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument(
            "--cron",
            metavar="EXPRESSION",
            help='install (or replace) the schedule: a cron expression, e.g. "0 3 * * *"',
        )
        what.add_argument("--list", action="store_true", help="list the installed schedules")
        what.add_argument("--remove", action="store_true", help="remove this config's schedule")

    def run(self, args: argparse.Namespace) -> int:
        if args.list and args.dry_run:
            raise RunStopped("--dry-run: --list changes nothing")
        if args.cron is not None and args.overrides:
            raise RunStopped("a schedule runs the config file as it is: put the --set values into the file")
        config = config_of(args)
        cron = None
        if args.cron is not None:
            try:
                cron = schedule.check_cron(args.cron)
            except schedule.ScheduleError as error:
                raise RunStopped(str(error)) from None
        open_store()
        from pipelines import schedules as zenml_schedules

        try:
            if args.list:
                return list_schedules()
            if cron is None:
                return remove_schedules(config, args.dry_run)
            if zenml_schedules.orchestrator_schedules():
                return install_in_zenml(config, cron, args.dry_run)
            config_file = Path(args.config or REPO / "configs" / "default.yaml").resolve()
            return install_in_crontab(config, cron, config_file, args.dry_run)
        except zenml_schedules.ZenMLScheduleError as error:
            raise RunStopped(str(error)) from None


def _crontab(*args: str, text: str | None = None) -> str:
    """Run the user's crontab command (RAGBENCH_CRONTAB overrides which one, for tests)."""
    command = os.environ.get("RAGBENCH_CRONTAB", "crontab")
    if shutil.which(command) is None:
        raise RunStopped(
            f"{command!r} not found: install cron (Debian: apt-get install cron) to schedule runs"
        )
    done = subprocess.run([command, *args], input=text, capture_output=True, text=True, check=False)
    if args == ("-l",) and done.returncode != 0 and "no crontab" in done.stderr.lower():
        return ""
    if done.returncode != 0:
        raise RunStopped(f"{command} {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def _has_crontab() -> bool:
    return shutil.which(os.environ.get("RAGBENCH_CRONTAB", "crontab")) is not None


def list_schedules() -> int:
    from pipelines import schedules as zenml_schedules

    lines = schedule.entries(_crontab("-l")) if _has_crontab() else []
    lines += [installed.line() for installed in zenml_schedules.list_schedules()]
    print("\n".join(lines) or "no ragbench schedule installed")
    return 0


def remove_schedules(config: BenchmarkConfig, dry_run: bool) -> int:
    """Remove the config's crontab entry and its ZenML schedule, whichever exist."""
    from pipelines import schedules as zenml_schedules

    done = []
    if _has_crontab():
        text, removed = schedule.without_entry(_crontab("-l"), config.name)
        if removed:
            if not dry_run:
                _crontab("-", text=text)
            done.append(f"{'would remove' if dry_run else 'removed'} the crontab entry of {config.name!r}")
    if dry_run:
        if (found := zenml_schedules.find_schedule(config.name)) is not None:
            done.append(f"would remove the ZenML schedule {found.line()}")
    elif (removal := zenml_schedules.remove_schedule(config.name)) is not None:
        done.append(removal.text())
    print("\n".join(done) or f"no schedule of {config.name!r}")
    return 0


def install_in_zenml(config: BenchmarkConfig, cron: str, dry_run: bool) -> int:
    """Register the schedule in ZenML, replacing the config's own; refused now if it cannot run where its
    steps will (keys checked in the secrets it names)."""
    from pipelines import schedules as zenml_schedules
    from pipelines.inputs import plan_snapshots
    from pipelines.options import step_environment
    from ragbench.config.plan import make_run_plan

    plan = make_run_plan(config, step_environment=step_environment(config))
    if dry_run:
        previous = zenml_schedules.schedule_to_replace(config.name)
        print(
            f"would register the ZenML schedule {zenml_schedules.schedule_name(config.name)!r} ({cron}) of "
            f"{config.name!r} on {zenml_schedules.active_orchestrator()}"
            + (f", replacing {previous.line()}" if previous is not None else "")
            + "; changed nothing"
        )
        return 0
    installed, replaced = zenml_schedules.install_schedule(config, cron, plan_snapshots(plan))
    if replaced is not None:
        print(replaced.text())
    print(
        f"registered the ZenML schedule {installed.name!r} ({cron}) of {config.name!r} on "
        f"{installed.orchestrator}; it runs the config as it is now: install again after editing it"
    )
    frozen = [
        label
        for label, on_client in (
            ("knowledge base", config.knowledge_base.on_client),
            ("eval cases", config.eval_cases.on_client),
        )
        if on_client
    ]
    if frozen:
        print(
            f"its {' and '.join(frozen)} are files on this machine, stored with the schedule as they "
            "are now: give them as URIs (s3://, gs://...) for scheduled runs to read them anew"
        )
    try:  # the crontab is only read for a hint here: without one (or unreadable), no hint
        in_crontab = _has_crontab() and schedule.without_entry(_crontab("-l"), config.name)[1]
    except RunStopped:
        in_crontab = False
    if in_crontab:
        print(f"your crontab schedules {config.name!r} too: `crontab -e` to delete that entry")
    return 0


def install_in_crontab(config: BenchmarkConfig, cron: str, config_file: Path, dry_run: bool) -> int:
    """Add (or replace) the config's crontab entry: the benchmark, then `compare`, from this checkout."""
    from pipelines import schedules as zenml_schedules

    # a schedule of a config that cannot run is refused now; the command's one expansion of the grid
    run_preflight(config, cells=expand_grid(config), plan_only=True)
    current = _crontab("-l")
    log = Path(config.output_dir).resolve() / "schedule.log"
    command = schedule.benchmark_command(REPO, sys.executable, config_file, log)
    line = schedule.entry_line(cron, command, config.name)
    why = f"the {zenml_schedules.active_orchestrator()} orchestrator cannot schedule"
    if dry_run:
        replaces = schedule.without_entry(current, config.name)[1]
        print(f"would {'replace the entry' if replaces else 'install'} in your crontab ({why}):\n{line}")
        print("changed nothing")
        return 0
    _crontab("-", text=schedule.with_entry(current, line, config.name))
    print(f"installed in your crontab ({why}):\n{line}")
    if (other := zenml_schedules.find_schedule(config.name)) is not None:
        print(f"ZenML schedules it too ({other.line()}): `run.py schedule --remove` removes both")
    return 0
