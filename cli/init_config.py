"""`init`: a starter config a new user can copy anywhere and run."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.command import Command, RunStopped, program


class InitCommand(Command):
    name = "init"
    help = "write a starter config that runs from any folder, every choice explained"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "file",
            nargs="?",
            default="ragbench.yaml",
            help="the config file to write (default ragbench.yaml)",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Write a starter config (named after its file) and say what to run next."""
        from ragbench.config.starter import write_starter

        path = Path(args.file)
        try:
            write_starter(path)
        except (ValueError, FileExistsError) as error:
            raise RunStopped(str(error)) from None
        print(f"wrote {path}: try `{program()} --config {path} --dry-run`, then without --dry-run")
        return 0
