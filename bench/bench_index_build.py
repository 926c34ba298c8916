"""Index-build throughput of the real pipeline vs raw sentence-transformers encode, on the same chunks.

Prints, per embedding model: raw encode chunks/s, the pipeline's index-build chunks/s (from the index
manifests of a real ZenML run with caching off), their ratio (goal >= 0.9), and how many chunk texts
were encoded per model during the whole grid (goal: exactly the number of chunks, i.e. one encode each).

The grid is run retrieval only (`grid.reader=[]` is applied after any --set), so no LLM is loaded.
The eval cases are cut to those whose expected sources lie in the first N documents.

`--smoke` is for tests on a few documents, where a timing of milliseconds is noise: it runs everything
and prints the ratio, but only the one-encode-per-chunk goal decides PASS/FAIL.

    python bench/bench_index_build.py [--documents 25] [--set grid.chunk_size=[128,256]] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
os.chdir(REPO_ROOT)
os.environ.setdefault("ZENML_CONFIG_PATH", tempfile.mkdtemp(prefix="ragbench-bench-zenml-"))
os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("ZENML_LOGGING_VERBOSITY", "WARN")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ragbench.config.expand import expand_grid  # noqa: E402
from ragbench.config.model import BenchmarkConfig, load_config  # noqa: E402
from ragbench.config.preflight import run_preflight  # noqa: E402
from ragbench.grid.cell import distinct_at  # noqa: E402
from ragbench.inputs.eval_cases import EvalCasesConfig, load_eval_source  # noqa: E402
from ragbench.inputs.knowledge_base import load_corpus  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.retrieval.index import ENCODE_BATCH_SIZE, load_embedder  # noqa: E402

RATIO_GOAL = 0.9


def cases_within(config: BenchmarkConfig, folder: Path) -> EvalCasesConfig:
    """The eval cases whose expected sources survive the document limit (the pipeline needs some)."""
    sources = {document.source for document in load_corpus(config.knowledge_base).documents}
    cases = [case for case in load_eval_source(config.eval_cases) if set(case.expected_sources) <= sources]
    if not any(case.expected_sources for case in cases):
        raise SystemExit(
            f"no eval case of {config.eval_cases.label} has its expected sources among the first "
            f"{len(sources)} documents: raise --documents"
        )
    path = folder / "cases.jsonl"
    path.write_text("\n".join(case.model_dump_json() for case in cases))
    return EvalCasesConfig(path=str(path))


def require_in_process_orchestrator() -> None:
    """The encode counter lives in this process, so it only sees the steps if they run here too."""
    from zenml.client import Client

    flavor = Client().active_stack.orchestrator.flavor
    if flavor != "local":
        raise SystemExit(f"the bench needs the in-process 'local' orchestrator, the stack has {flavor!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=25, help="knowledge-base documents to use")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--smoke", action="store_true", help="report the ratio but do not fail on it")
    args = parser.parse_args()
    config = load_config(None, [f"knowledge_base.limit={args.documents}", *args.overrides, "grid.reader=[]"])
    config = config.model_copy(update={"eval_cases": cases_within(config, Path(tempfile.mkdtemp()))})
    cells = expand_grid(config)
    run_preflight(config, cells=cells)
    require_in_process_orchestrator()
    # `load_embedder` is cached per process: the steps reuse these objects, so the counters see every encode.
    embedders = {model: load_embedder(model) for model in config.grid.embedding_model}

    from pipelines import rag_benchmark

    pipeline_run = rag_benchmark.with_options(enable_cache=False)(config=config.model_dump(mode="json"))
    index_keys = distinct_at(cells, "index")
    rows, passed = [], True
    for model, embedder in embedders.items():
        chunks_in_grid = 0
        raw_seconds = pipeline_seconds = 0.0
        for key in (key for key in index_keys if key.embedding_model == model):
            chunk_set = pipeline_run.steps[key.step_id("chunk")].outputs["chunks"][0].load()
            manifest = pipeline_run.steps[key.step_id("index")].outputs["vector_index"][0].load().manifest
            chunks_in_grid += manifest.chunk_count
            pipeline_seconds += manifest.build_seconds
            started = time.perf_counter()
            embedder.model.encode(
                chunk_set.texts,
                batch_size=ENCODE_BATCH_SIZE,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            raw_seconds += time.perf_counter() - started
        raw_rate, pipeline_rate = chunks_in_grid / raw_seconds, chunks_in_grid / pipeline_seconds
        ratio = pipeline_rate / raw_rate
        one_encode_each = embedder.encoded_texts == chunks_in_grid
        passed &= one_encode_each and (args.smoke or ratio >= RATIO_GOAL)
        rows.append(
            {
                "embedding": model,
                "chunks_in_grid": chunks_in_grid,
                "raw_chunks_per_s": round(raw_rate, 2),
                "pipeline_chunks_per_s": round(pipeline_rate, 2),
                "ratio": round(ratio, 3),
                "chunk_texts_encoded": embedder.encoded_texts,
                "one_encode_per_chunk": one_encode_each,
            }
        )
    print()
    print(rows_to_text(rows))
    goal = "exactly one encode per chunk per model" + (
        " (smoke: ratio not enforced)" if args.smoke else f" and ratio >= {RATIO_GOAL}"
    )
    print(f"\ngoal: {goal} -> {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
