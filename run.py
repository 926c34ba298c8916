"""Command line: validate the config, provision models, run the ZenML benchmark, write the report."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ragbench.models import ModelResolutionError, resolve_model

from ragbench.config import BenchmarkConfig, ConfigError, load_config
from ragbench.eval_cases import EvalCaseError
from ragbench.knowledge_base import KnowledgeBaseError
from ragbench.preflight import PreflightError, run_preflight
from ragbench.report import rows_to_text

USER_ERRORS = (ConfigError, EvalCaseError, KnowledgeBaseError, ModelResolutionError, PreflightError)
logger = logging.getLogger("ragbench")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="End-to-end RAG benchmark on a ZenML pipeline.")
    parser.add_argument(
        "command", nargs="?", default="run", choices=["run"], help="what to do (default: run)"
    )
    parser.add_argument("--config", help="YAML config (default: configs/default.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set grid.chunk_sizes=[128,256] (repeatable)",
    )
    parser.add_argument("--no-cache", action="store_true", help="recompute every step")
    return parser.parse_args(argv)


def write_outputs(config: BenchmarkConfig, run_name: str, files: dict[str, str]) -> Path:
    """Write into a temporary folder and rename, so a crash never leaves a half-written report."""
    output_root = Path(config.output_dir)
    output_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=output_root))
    for name, content in files.items():
        (staging / name).write_text(content, encoding="utf-8")
    final = output_root / run_name
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    latest = output_root / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink() if latest.is_symlink() else shutil.rmtree(latest)
    latest.symlink_to(final.name)
    return final


def run_benchmark(config: BenchmarkConfig, use_cache: bool) -> int:
    preflight = run_preflight(config)
    for name in dict.fromkeys([config.chunking_tokenizer, *config.grid.embedding_models]):
        resolve_model(name)  # provision offline models up front, with progress, before ZenML starts

    from pipelines import rag_benchmark

    pipeline_run = rag_benchmark.with_options(enable_cache=use_cache)(
        config=config.model_dump(mode="json"),
        knowledge_base_fingerprint=preflight.knowledge_base_fingerprint,
        eval_cases=[case.model_dump(mode="json") for case in preflight.eval_cases],
        eval_fingerprint=preflight.eval_fingerprint,
    )
    results_step = pipeline_run.steps["build_results_table"]
    csv_text = results_step.outputs["results_csv"][0].load()
    html_text = results_step.outputs["results_html"][0].load()
    rows = [
        pipeline_run.steps[name].outputs["cell_result"][0].load().row()
        for name in pipeline_run.steps
        if name.startswith("evaluate_")
    ]
    folder = write_outputs(config, pipeline_run.name, {"results.csv": csv_text, "results.html": html_text})
    print()
    print(rows_to_text(rows))
    for warning in preflight.warnings:
        print(f"WARNING: {warning}")
    print(f"\nZenML run: {pipeline_run.name}  report: {folder}/results.html")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = load_config(args.config, args.overrides)
        return run_benchmark(config, use_cache=not args.no_cache)
    except USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
