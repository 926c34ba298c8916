"""`config`: the effective config as YAML, or the reference of every key."""

from __future__ import annotations

import argparse

import yaml

from cli.command import Command, add_config_options, config_of


class ConfigCommand(Command):
    name = "config"
    help = (
        "print the effective config, every default filled in (--reference: every key; --schema: the config's "
        "JSON Schema; --models: the packaged models and where they come from)"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_config_options(parser)
        shown = parser.add_mutually_exclusive_group()
        shown.add_argument(
            "--reference", action="store_true", help="print the reference of every key instead"
        )
        shown.add_argument(
            "--schema",
            action="store_true",
            help="print the JSON Schema of a config file instead (docs/reference/config.schema.json), for an "
            "editor's YAML language server",
        )
        shown.add_argument(
            "--models",
            action="store_true",
            help="list every packaged model instead: the PyPI packages that carry it, its file's sha256, the "
            "upstream model and its licence",
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.reference:
            from ragbench.config.reference import reference_markdown

            print(reference_markdown(), end="")
            return 0
        if args.schema:
            from ragbench.config.reference import config_schema_text

            print(config_schema_text(), end="")
            return 0
        if args.models:
            print(models_text(), end="")
            return 0
        print(yaml.safe_dump(config_of(args).model_dump(mode="json"), sort_keys=False), end="")
        return 0


def models_text() -> str:
    """Every packaged model as `config --models` lists it: what carries it, its file, where it comes from."""
    from ragbench.models.registry import PACKAGED_MODELS

    blocks = []
    for spec in PACKAGED_MODELS:
        alias = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
        file = (
            f"{spec.verify_file}, {spec.size:,} bytes, sha256 {spec.sha256}"
            if spec.sha256
            else f"{spec.verify_file}, built here (its sha256 is recorded when it is built)"
        )
        blocks.append(
            f"{spec.name}{alias}: {spec.summary}\n"
            f"  PyPI packages: {spec.carriers}\n"
            f"  file:          {file}\n"
            f"  upstream:      {spec.upstream} (licence {spec.licence})\n"
            f"  checked:       {spec.checked}\n"
        )
    return "\n".join(blocks)
