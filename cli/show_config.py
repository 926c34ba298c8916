"""`config`: the effective config as YAML, or the reference of every key."""

from __future__ import annotations

import argparse

import yaml

from cli.command import Command, add_config_options, config_of


class ConfigCommand(Command):
    name = "config"
    help = "print the effective config, every default filled in (--reference: every key)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        parser.add_argument(
            "--reference", action="store_true", help="print the reference of every key instead"
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.reference:
            from ragbench.config.reference import reference_markdown

            print(reference_markdown(), end="")
            return 0
        print(yaml.safe_dump(config_of(args).model_dump(mode="json"), sort_keys=False), end="")
        return 0
