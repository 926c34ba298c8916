"""Index-build throughput of the real pipeline vs raw sentence-transformers encode, on the same chunks.

Prints, per embedding model: raw encode chunks/s, the pipeline's index-build chunks/s (from the index
manifests of a real ZenML run with caching off), their ratio (goal >= 0.9), and how many chunk texts
were encoded per model during the whole grid (goal: exactly the number of chunks, i.e. one encode each).

    python bench/bench_index_build.py [--documents 25] [--set grid.chunk_sizes=[128,256]]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.chdir(REPO_ROOT)
os.environ.setdefault("ZENML_CONFIG_PATH", tempfile.mkdtemp(prefix="ragbench-bench-zenml-"))
os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("ZENML_LOGGING_VERBOSITY", "WARN")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ragbench.config import BenchmarkConfig, EvalCasesConfig, load_config  # noqa: E402
from ragbench.eval_cases import load_eval_source  # noqa: E402
from ragbench.index import ENCODE_BATCH_SIZE, load_embedder  # noqa: E402
from ragbench.knowledge_base import load_corpus  # noqa: E402
from ragbench.pages import rows_to_text  # noqa: E402
from ragbench.preflight import run_preflight  # noqa: E402
from ragbench.results import cell_id  # noqa: E402


def cases_within(config: BenchmarkConfig, folder: Path) -> EvalCasesConfig:
    """The eval cases whose expected sources survive the document limit (the pipeline needs some)."""
    sources = {document.source for document in load_corpus(config.knowledge_base).documents}
    cases = [case for case in load_eval_source(config.eval_cases) if set(case.expected_sources) <= sources]
    path = folder / "cases.jsonl"
    path.write_text("\n".join(case.model_dump_json() for case in cases))
    return EvalCasesConfig(path=str(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=25, help="knowledge-base documents to use")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config(None, [f"knowledge_base.limit={args.documents}", *args.overrides])
    config = config.model_copy(update={"eval_cases": cases_within(config, Path(tempfile.mkdtemp()))})
    preflight = run_preflight(config)

    from pipelines import rag_benchmark

    pipeline_run = rag_benchmark.with_options(enable_cache=False)(
        config=config.model_dump(mode="json"),
        knowledge_base_fingerprint=preflight.knowledge_base_fingerprint,
        eval_cases=[case.model_dump(mode="json") for case in preflight.eval_cases],
        eval_fingerprint=preflight.eval_fingerprint,
    )
    rows, passed = [], True
    for model in config.grid.embedding_models:
        embedder = load_embedder(model)
        chunks_in_grid = 0
        raw_seconds = pipeline_seconds = 0.0
        for size in config.grid.chunk_sizes:
            chunk_set = pipeline_run.steps[f"chunk_cs{size}"].outputs["chunks"][0].load()
            index_output = pipeline_run.steps[f"index_{cell_id(size, model)}"].outputs["vector_index"][0]
            manifest = index_output.load().manifest
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
        passed &= ratio >= 0.9 and one_encode_each
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
    print(
        f"\ngoal: ratio >= 0.9 and exactly one encode per chunk per model -> {'PASS' if passed else 'FAIL'}"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
