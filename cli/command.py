"""What every command is (`Command`), the options several commands share (defined once here), and the
errors a command ends with as one line and exit code 2 instead of a traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import ClassVar

from ragbench.config.model import BenchmarkConfig, ConfigError, load_config
from ragbench.config.preflight import PreflightError
from ragbench.inputs.eval_cases import EvalCaseError
from ragbench.inputs.knowledge_base import KnowledgeBaseError
from ragbench.llm.types import LLMConfigError
from ragbench.models.errors import ModelResolutionError
from ragbench.review.labels import LabelFileError
from ragbench.runs.dashboard import DashboardError
from ragbench.runs.review import ReviewSourceError

# Every exit code of `run.py` and what it means (the command-line reference lists them from here): a CI job
# acts on these without reading the text.
OVER_BUDGET_EXIT_CODE = 3
EXIT_CODES = {
    0: "done: the gate passed (or there was no baseline yet); a dry run whose plan is within its budget",
    1: "the regression gate failed: a regression, a missing value, nothing to compare, or a run on traces "
    "too small to tell (run, compare)",
    2: "bad input, or a run that could not finish or is incomplete; the message says which and why",
    OVER_BUDGET_EXIT_CODE: "a dry run whose plan is over the config's budget (it prints `OVER, a real run is "
    "refused`: the real run would stop with 2 before any model loads)",
}


def program() -> str:
    """How the user started this process, for the commands a message suggests: the installed `ragbench`
    command, else `python run.py` (a clone's shim, and every in-process caller such as the tests)."""
    return "ragbench" if Path(sys.argv[0]).name == "ragbench" else "python run.py"


class RunStopped(RuntimeError):
    """The pipeline ran but could not finish (a provider down), or a whole cell has no answers."""


USER_ERRORS = (
    RunStopped,
    ReviewSourceError,
    LabelFileError,
    ConfigError,
    EvalCaseError,
    KnowledgeBaseError,
    LLMConfigError,
    ModelResolutionError,
    PreflightError,
    DashboardError,
)


class Command:
    """One command of `run.py`: its name, its own options and what it does. A new command is a subclass
    in a module of its own, listed once in `cli.main.COMMANDS`.

    `dry_run`: what `--dry-run` shows, for a command that changes state and can plan without acting;
    None for a command with nothing to preview, whose parser then refuses `--dry-run` with an error
    rather than ignoring it."""

    name: ClassVar[str]
    help: ClassVar[str]
    dry_run: ClassVar[str | None] = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The command's own options (the shared ones through `add_config_options` and the like)."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the command; the exit code. Bad input raises one of USER_ERRORS."""
        raise NotImplementedError


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """The config a command reads: a file and overrides."""
    parser.add_argument("--config", metavar="FILE", help="YAML config (default: configs/default.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set grid.chunk_size=[128,256] (repeatable)",
    )


def add_cache_option(parser: argparse.ArgumentParser) -> None:
    """For the commands that run a pipeline."""
    parser.add_argument(
        "--no-cache", action="store_true", help="recompute every step (the LLM cache is still used)"
    )


def add_run_tag_option(parser: argparse.ArgumentParser) -> None:
    """For the commands whose runs carry the config's `tags`."""
    parser.add_argument(
        "--tag", dest="run_tag", metavar="TAG", help="tag the run with this too (beside the config's `tags`)"
    )


def config_of(args: argparse.Namespace) -> BenchmarkConfig:
    """The config `--config` and `--set` name, with `--tag` (where the command has it) among its tags."""
    config = load_config(args.config, args.overrides)
    if tag := getattr(args, "run_tag", None):
        config = config.model_copy(update={"tags": [*config.tags, tag]})
    return config
