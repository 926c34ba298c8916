"""The parser (`build_parser`, also what the docs site's command-line page is generated from) and `main`.

argparse with one subparser per command, as lm-evaluation-harness does: the standard library already
gives per-command options and `--help`, so no CLI library is added to the pinned requirements, and the
tests call `main(argv)` in-process as before. A new command is one `Command` subclass, listed in
`COMMANDS`; nothing else dispatches on command names.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from cli.benchmark import RaceCommand, RunCommand
from cli.command import USER_ERRORS, Command, program
from cli.compare import CompareCommand
from cli.dashboard import DashboardCommand
from cli.init_config import InitCommand
from cli.launch import mark_runs_failed, mark_runs_failed_after_exit
from cli.promote import PromoteCommand
from cli.review import ReviewCommand
from cli.schedule import ScheduleCommand
from cli.show_config import ConfigCommand
from cli.testset import TestsetCommand
from cli.train_reranker import TrainRerankerCommand
from ragbench import __version__

# In the order `--help` lists them; the first is the default command.
COMMANDS: tuple[Command, ...] = (
    RunCommand(),
    RaceCommand(),
    InitCommand(),
    TestsetCommand(),
    CompareCommand(),
    PromoteCommand(),
    ScheduleCommand(),
    DashboardCommand(),
    ReviewCommand(),
    ConfigCommand(),
    TrainRerankerCommand(),
)
DEFAULT_COMMAND = COMMANDS[0].name
logger = logging.getLogger("ragbench")


class _RefuseDryRun(argparse.Action):
    """`--dry-run` on a command with nothing to preview: an error, never silently ignored."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[override]
        planners = ", ".join(command.name for command in COMMANDS if command.dry_run)
        parser.error(
            f"--dry-run: this command changes nothing a plan could preview (only {planners} take it)"
        )


def build_parser(prog: str = "run.py") -> argparse.ArgumentParser:
    """The whole command line: one subparser per command of COMMANDS, each with its own options. `prog`:
    the name `--help` shows (the installed command is `ragbench`; the reference page shows `run.py`)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="End-to-end RAG benchmark on a ZenML pipeline. Without a command: "
        f"{DEFAULT_COMMAND} (`run.py --config FILE` runs the benchmark). `run.py COMMAND --help`: "
        "the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"ragbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", title="commands")
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(sub)
        if command.dry_run:
            sub.add_argument("--dry-run", action="store_true", help=command.dry_run)
        else:
            sub.add_argument("--dry-run", nargs=0, action=_RefuseDryRun, help=argparse.SUPPRESS)
        sub.set_defaults(handler=command)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`argv` as the parser reads it, the default command put first when `argv` names none (every
    documented `run.py --config FILE ...` keeps working)."""
    parser = build_parser(program().removeprefix("python "))
    names = {command.name for command in COMMANDS}
    if not argv or (argv[0] not in names and argv[0] not in ("-h", "--help", "--version")):
        argv = [DEFAULT_COMMAND, *argv]
    return parser.parse_args(argv)


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record arrives (tests and ZenML swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def configure_logging() -> None:
    """Our messages once, on stderr; ZenML prints its own lines through its own handler."""
    if not logger.handlers:
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    for chatty in ("faiss", "faiss.loader", "sentence_transformers", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler or a user stopping the run): mark this process's run failed, then exit at
    once. Raising instead would let whichever code happens to be running swallow the interrupt.

    The handler runs wherever the main thread was stopped: possibly mid-write to stderr (a message then
    raises "reentrant call"), or inside the store's own write transaction (the update then finds the
    database locked). So a message that cannot be written is dropped rather than raised, and a marking
    that fails is handed to a detached process that marks the run once this one has exited."""
    logging.raiseExceptions = False  # a log line that cannot be written must not stop the marking
    try:
        logger.warning("stopped by signal %d: marking the run failed", signum)
        mark_runs_failed(abandoned=False)
    except BaseException as error:
        logger.warning("could not mark the run failed here (%s): a helper marks it after exit", error)
        mark_runs_failed_after_exit()
    finally:
        os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run one `run.py` command in this process and return its exit code.

    `argv` is the command line without the program name, e.g. `["compare", "--config", "my.yaml"]` (None:
    `sys.argv[1:]`); one that names no command runs the default command, `run`. Bad input returns 2 after
    one `error:` line on stderr; argparse's own errors, `--help` and `--version` raise SystemExit instead.
    It sets up ragbench's logging on stderr and a SIGTERM handler that marks a running pipeline failed and
    ends the process, so call it from the main thread."""
    configure_logging()
    signal.signal(signal.SIGTERM, _terminate)  # a stopped run is marked failed, not left "running"
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.handler.run(args)
    except USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
