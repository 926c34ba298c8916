"""`promote`: mark a run as its config's champion, the baseline `compare --against champion` uses."""

from __future__ import annotations

import argparse

from cli.command import Command, RunStopped, add_config_options
from cli.launch import open_store
from ragbench.config.model import BenchmarkConfig, load_config
from ragbench.runs.names import BENCHMARK_PIPELINE


class PromoteCommand(Command):
    name = "promote"
    help = "mark RUN as its config's champion (with --config: only a run of that config)"
    dry_run = "check RUN and say which run it would replace as champion; tag nothing"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run_name", metavar="RUN", help="the run to mark as champion")
        add_config_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        named = load_config(args.config, args.overrides) if args.config else None
        return promote_command(args.run_name, named, dry_run=args.dry_run)


def promote_command(run_name: str, config: BenchmarkConfig | None, dry_run: bool = False) -> int:
    """Mark a run as its config's champion: a tag exclusive per config, so every config keeps one. Only a
    completed benchmark run (never a testset run, which has no metrics to be a baseline with) of the config
    named by `--config`, when one is given. `dry_run`: every check, then what would change."""
    from zenml import Tag, add_tags

    from ragbench.runs.compare import champion_tag
    from steps.history import config_name_of, find_baseline
    from steps.store import ZenMLStore

    open_store()
    try:
        pipeline_run = ZenMLStore().run(run_name)
    except KeyError:
        raise RunStopped(f"no run named {run_name!r}") from None
    config_name = config_name_of(pipeline_run)
    if pipeline_run.pipeline is None or pipeline_run.pipeline.name != BENCHMARK_PIPELINE:
        kind = pipeline_run.pipeline.name if pipeline_run.pipeline is not None else "unknown"
        raise RunStopped(f"{run_name} is a {kind} run, not a benchmark run: only those can be champions")
    if pipeline_run.status.value != "completed" or not config_name:
        raise RunStopped(f"{run_name} is not a completed benchmark run: only those can be champions")
    if config is not None and config.name != config_name:
        raise RunStopped(
            f"{run_name} is a run of config {config_name!r}, not of {config.name!r} (--config): promote "
            "a run of the config whose champion it should be"
        )
    if dry_run:
        current = find_baseline(config_name, "champion", pipeline_run)
        if current is None:
            now = "it has none yet"
        else:
            now = "it already is" if current.id == pipeline_run.id else f"now {current.name}"
        print(
            f"would make {pipeline_run.name} the champion of config {config_name!r} ({now}); changed nothing"
        )
        return 0
    add_tags(tags=[Tag(name=champion_tag(config_name), exclusive=True)], run=pipeline_run.id)
    print(f"{pipeline_run.name} is the champion of config {config_name!r}")
    return 0
