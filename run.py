"""Command line: validate the config, provision models, run the ZenML benchmark, write the report."""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ragbench.config import BenchmarkConfig, ConfigError, load_config
from ragbench.dry_run import estimate_llm_usage
from ragbench.eval_cases import EvalCaseError
from ragbench.judge import judge_warnings
from ragbench.knowledge_base import KnowledgeBaseError
from ragbench.llm import LLMConfigError
from ragbench.models import ModelResolutionError, resolve_model
from ragbench.preflight import PreflightError, run_preflight
from ragbench.report import rows_to_text, summary_rows

if TYPE_CHECKING:  # ragbench.generation pulls in the embedding stack; the CLI loads it only to run
    from ragbench.generation import AnswerEvaluation, AnswerSet

USER_ERRORS = (
    ConfigError,
    EvalCaseError,
    KnowledgeBaseError,
    LLMConfigError,
    ModelResolutionError,
    PreflightError,
)
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
    parser.add_argument(
        "--dry-run", action="store_true", help="print LLM calls, tokens and cost of the grid; call nothing"
    )
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


def cell_outputs(pipeline_run) -> list[tuple[AnswerSet, AnswerEvaluation]]:
    """Each end-to-end cell's answers and their evaluation, loaded from the run's artifacts."""
    pairs = []
    for name, step in pipeline_run.steps.items():
        if name.startswith("judge_"):
            evaluation = step.outputs["answer_evaluation"][0].load()
            answers = pipeline_run.steps["answer_" + name.removeprefix("judge_")].outputs["answers"][0].load()
            pairs.append((answers, evaluation))
    return pairs


def case_records(cells: list[tuple[AnswerSet, AnswerEvaluation]]) -> str:
    """Per-case answers, passages, keyword failures and judgements as JSONL, one line per (cell, case)."""
    lines = []
    for answers, evaluation in cells:
        judgements = {judgement.case_id: judgement for judgement in evaluation.judgements}
        failures = evaluation.keyword.failing if evaluation.keyword else []
        for answer in answers.answers:
            record = {
                "cell": answers.cell_id,
                "reranker": answers.reranker_label,
                **answer.model_dump(mode="json"),
                "keyword_failures": [f.model_dump() for f in failures if f.case_id == answer.case_id],
                "judgement": judgements[answer.case_id].model_dump()
                if answer.case_id in judgements
                else None,
            }
            lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")


def run_benchmark(config: BenchmarkConfig, use_cache: bool, dry_run: bool = False) -> int:
    preflight = run_preflight(config)
    if dry_run:
        usage = estimate_llm_usage(config, preflight.eval_cases)
        print(rows_to_text(usage))
        print("completion tokens assume every answer uses max_tokens; cost None = price unknown to litellm")
        return 0
    models = [config.chunking_tokenizer, *config.grid.embedding_models]
    if preflight.reranker is not None:
        models.append(preflight.reranker.used)
    for name in dict.fromkeys(models):
        resolve_model(name)  # provision offline models up front, with progress, before ZenML starts

    from pipelines import rag_benchmark

    sample = config.generation.sample_size
    answered = "all cases" if sample is None else f"a seeded sample of {sample} cases"
    notes = [
        f"Retrieval metrics use every case with expected sources; answers, keyword tests and the judge use "
        f"{answered} (seed {config.generation.seed}), the same in every cell; each *_cases column gives "
        "the number of cases behind its metric."
    ]
    pipeline_run = rag_benchmark.with_options(enable_cache=use_cache)(
        config=config.model_dump(mode="json"),
        knowledge_base_fingerprint=preflight.knowledge_base_fingerprint,
        eval_cases=[case.model_dump(mode="json") for case in preflight.eval_cases],
        eval_fingerprint=preflight.eval_fingerprint,
        reranker=preflight.reranker.model_dump(mode="json") if preflight.reranker else None,
        notes=notes,
        warnings=preflight.warnings,
    )
    results_step = pipeline_run.steps["build_results_table"]
    csv_text = results_step.outputs["results_csv"][0].load()
    html_text = results_step.outputs["results_html"][0].load()
    cells = cell_outputs(pipeline_run)
    files = {"results.csv": csv_text, "results.html": html_text, "cases.jsonl": case_records(cells)}
    folder = write_outputs(config, pipeline_run.name, files)
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    print()
    print(rows_to_text(summary_rows(rows)))
    print(f"(all columns: {folder}/results.csv)")
    for note in notes:
        print(note)
    judgements = [judgement for _, evaluation in cells for judgement in evaluation.judgements]
    for warning in [*preflight.warnings, *judge_warnings(judgements)]:
        print(f"WARNING: {warning}")
    print(f"\nZenML run: {pipeline_run.name}  report: {folder}/results.html")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = load_config(args.config, args.overrides)
        return run_benchmark(config, use_cache=not args.no_cache, dry_run=args.dry_run)
    except USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
