"""ColBERT reranking per question: stored chunk encodings (`PrecomputedColbertReranker`) vs RAGatouille's
in-memory rerank, which encodes every candidate again (`ColbertReranker`), on the same candidates.

The candidates are real: chunks of the configured knowledge base (default: the Python reference topics),
and for each eval case's question the top_k of them by the first grid embedding model (MiniLM), as the
benchmark's flat index ranks them. Both paths rank all top_k candidates, so "identical" compares the whole
rankings as sequences of chunk positions. Encoding the chunk set is the one-off cost and reported apart;
the speed-up is the mean seconds per question of re-encoding over those of the precomputed path.

It then times the rerank stage as a run makes it (`ragbench.retrieval.rerank_stage.rerank_stage`, the
`rerank_<key>` step's work: every case's candidates reranked from the stored encodings, then the reranked
ranking's metrics) over the same questions, and prints its cost per case against re-encoding per
question, and with the one-off encoding spread over the cases.

`--smoke` is for tests on a few documents and questions, where a timing is noise: identical rankings
are still required for PASS, the speed-up is not.

    python bench/bench_colbert_rerank.py [--chunk-size 256] [--questions 50] [--documents N] [--smoke]
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

import numpy as np  # noqa: E402

from ragbench.config.model import load_config  # noqa: E402
from ragbench.grid.cell import CellSpec  # noqa: E402
from ragbench.inputs.chunking import ChunkSet, chunk_corpus, overlap_tokens  # noqa: E402
from ragbench.inputs.eval_cases import load_eval_source  # noqa: E402
from ragbench.inputs.knowledge_base import load_corpus  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.retrieval.colbert_maxsim import PrecomputedColbertReranker, encode_chunk_set  # noqa: E402
from ragbench.retrieval.index import load_embedder  # noqa: E402
from ragbench.retrieval.rerank import DEFAULT_RERANKER, ColbertReranker, resolve_reranker  # noqa: E402
from ragbench.retrieval.rerank_stage import rerank_stage  # noqa: E402
from ragbench.retrieval.search import RetrievedCandidates, RetrievedChunk, ranked_chunks  # noqa: E402

SPEEDUP_GOAL = 5.0


def candidates(
    chunks: ChunkSet, embedding_model: str, questions: list[str], top_k: int
) -> list[list[RetrievedChunk]]:
    """Each question's top_k chunks by cosine similarity, best first (exact search, as the flat index)."""
    embedder = load_embedder(embedding_model)
    similarities = (
        embedder.encode_queries(questions) @ embedder.encode_documents(chunks.texts, show_progress=False).T
    )
    orders = [np.argsort(-row, kind="stable")[:top_k] for row in similarities]
    return [ranked_chunks(chunks, order, row[order]) for row, order in zip(similarities, orders, strict=True)]


def timed_positions(
    reranker: ColbertReranker, question: str, chunks: list[RetrievedChunk]
) -> tuple[list[int], float]:
    started = time.perf_counter()
    ranked = reranker.rerank(question, chunks, len(chunks))
    return [chunk.position for chunk in ranked], time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-size", type=int, default=256, help="chunk size in tokens")
    parser.add_argument("--top-k", type=int, default=30, help="candidates per question")
    parser.add_argument("--questions", type=int, default=None, help="first N eval cases (default: all)")
    parser.add_argument("--documents", type=int, default=None, help="first N knowledge-base documents")
    parser.add_argument(
        "--reranker", default=DEFAULT_RERANKER, help="ColBERT checkpoint (offline: the stand-in)"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--smoke", action="store_true", help="require identical rankings, not the speed-up")
    args = parser.parse_args()
    limit = [f"knowledge_base.limit={args.documents}"] if args.documents else []
    config = load_config(None, [*limit, *args.overrides])
    overlap = overlap_tokens(args.chunk_size, config.grid.chunk_overlap[0])
    chunks = chunk_corpus(
        load_corpus(config.knowledge_base), args.chunk_size, overlap, config.chunking_tokenizer
    )
    if len(chunks.chunks) < args.top_k:
        raise SystemExit(f"{len(chunks.chunks)} chunks, fewer than top_k {args.top_k}: raise --documents")
    cases = load_eval_source(config.eval_cases)[: args.questions]
    candidate_lists = candidates(
        chunks, config.grid.embedding_model[0], [case.question for case in cases], args.top_k
    )

    choice = resolve_reranker(args.reranker)
    reference = ColbertReranker(choice=choice)
    started = time.perf_counter()
    reference.load()
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    encodings = encode_chunk_set(choice, chunks)
    encode_seconds = time.perf_counter() - started
    precomputed = PrecomputedColbertReranker(
        encodings, choice=choice, chunk_set_fingerprint=chunks.fingerprint
    )
    for reranker in (reference, precomputed):  # first calls pay one-off warm-up costs: not timed
        timed_positions(reranker, cases[0].question, candidate_lists[0])

    rows, seconds = [], []
    for case, chunk_list in zip(cases, candidate_lists, strict=True):
        expected, reencode_seconds = timed_positions(reference, case.question, chunk_list)
        got, precomputed_seconds = timed_positions(precomputed, case.question, chunk_list)
        seconds.append((reencode_seconds, precomputed_seconds))
        rows.append(
            {
                "case": case.id,
                "candidates": len(chunk_list),
                "reencode_s": round(reencode_seconds, 4),
                "precomputed_s": round(precomputed_seconds, 4),
                "speedup": round(reencode_seconds / precomputed_seconds, 1),
                "identical": got == expected,
            }
        )
    reencode_mean, precomputed_mean = (float(mean) for mean in np.mean(seconds, axis=0))
    speedup = reencode_mean / precomputed_mean
    identical = sum(row["identical"] for row in rows)

    # The rerank stage as a run makes it: every case's candidates, then the reranked ranking's metrics.
    key = CellSpec(
        chunk_size=args.chunk_size,
        chunk_overlap=overlap,
        embedding_model=config.grid.embedding_model[0],
        top_k=args.top_k,
        reranker=args.reranker,
    )
    first_stage = RetrievedCandidates(
        spec=key.upto("retrieve"),
        chunk_set_fingerprint=chunks.fingerprint,
        by_case={case.id: chunk_list for case, chunk_list in zip(cases, candidate_lists, strict=True)},
    )
    started = time.perf_counter()
    _, stage = rerank_stage(
        first_stage, cases, precomputed, choice, spec=key.upto("rerank"), metrics_k=config.retrieval.metrics_k
    )
    stage_case = (time.perf_counter() - started) / len(cases)
    with_encoding = (encode_seconds + stage_case * len(cases)) / len(cases)
    print()
    print(rows_to_text(rows))
    print(
        f"\nreranker {choice.label}, chunk size {args.chunk_size}, top_k {args.top_k}\n"
        f"one-off: checkpoint load {load_seconds:.1f} s; encoding {encodings.chunk_count} chunks "
        f"({encodings.token_count} tokens, {encodings.nbytes / 2**20:.1f} MiB {encodings.vectors.dtype}) "
        f"{encode_seconds:.1f} s\n"
        f"per question: re-encoding {reencode_mean:.4f} s, precomputed {precomputed_mean:.4f} s, "
        f"speed-up {speedup:.1f}x (goal >= {SPEEDUP_GOAL:g}x)\n"
        f"identical rankings: {identical}/{len(rows)} questions\n"
        f"rerank stage (stored encodings, metrics included): {stage_case:.4f} s per case over {len(cases)} "
        f"cases ({stage.ms_per_query:.1f} ms reranking), {reencode_mean / stage_case:.1f}x less than "
        f"re-encoding per question; with the one-off encoding spread over these cases {with_encoding:.4f} s "
        f"per case, {reencode_mean / with_encoding:.1f}x less"
    )
    passed = identical == len(rows) and (args.smoke or speedup >= SPEEDUP_GOAL)
    goal = "identical rankings for every question" + (
        " (smoke: speed-up not enforced)" if args.smoke else f" and speed-up >= {SPEEDUP_GOAL:g}x"
    )
    print(f"\ngoal: {goal} -> {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
