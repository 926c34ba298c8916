"""Index builds at scale and approximate search: build time and memory per size, resume after a kill, and
HNSW / IVF against exact search, on real prose with sentence-transformers/all-MiniLM-L6-v2.

The corpus is the Linux kernel's documentation from Debian's linux-doc-6.1 (its .rst, .txt, .yaml and ABI
files, markup-only lines dropped; installed with apt-get when missing and running as root), chunked by
`ragbench.inputs.chunking.chunk_corpus` to 128 MiniLM tokens with 10% overlap. Each size is the first N
chunks of
one seeded shuffle of all chunks (a sample of the whole corpus; the smaller set is part of the larger).

a. `ragbench.retrieval.index.build_index` (shards checkpointed to a folder, as the index step does) at each
size, each
   in its own process: wall seconds per chunk (goal: the largest size within 1.2x of the smallest), peak
   RSS of that process (its own `ru_maxrss`; goal: under 3 GiB), and one encode per chunk.
b. a build of --resume-size chunks SIGKILLed once half its shards are checkpointed (the folder is polled),
   then resumed in a new process: it must reuse every saved shard and encode exactly the texts of the
   others, so the only texts embedded twice are those of the one shard the kill interrupted.
c. the ragbench.retrieval.ann defaults (or --ann specs) vs exact flat search over the largest size's
vectors. Queries:
   --queries held-out chunks (in no index), their first 32 words each, embedded as queries. Recall@10 is
   against flat; search time is per query, one query per call (as a RAG service searches) on one FAISS
   thread for every index type (goal: recall >= 0.95 and >= 5x faster than flat); builds use all cores.
d. 1M vectors on paper: embedding time at the largest size's measured rate, and memory per index type from
   its measured bytes per vector.

The chunks and the largest size's vectors are cached in --cache (default $RAGBENCH_CACHE_DIR/bench_scale,
else ~/.cache/ragbench/bench_scale), so `--parts c` alone does not re-embed.

`--smoke` runs every part on the default knowledge base (pydoc topics: sizes 100 and 200, shards of 20, no
apt install, a throw-away cache): it prints every number, but the build-time ratio, recall and speed-up
goals are not enforced on so little data; one encode per chunk, peak RSS and the resume are.

    python bench/bench_scale.py [--sizes 10000,100000] [--shard-size 2048] [--resume-size N]
        [--queries 500] [--parts a,b,c] [--ann hnsw --ann ivf] [--cache DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
os.chdir(REPO_ROOT)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from ragbench.cache_home import cache_dir  # noqa: E402
from ragbench.hashing import short_hash  # noqa: E402
from ragbench.inputs.chunking import ChunkSet, chunk_corpus  # noqa: E402
from ragbench.inputs.knowledge_base import Corpus, Document, KnowledgeBaseConfig, load_corpus  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.retrieval.ann import (  # noqa: E402
    IndexSpec,
    build_faiss_index,
    faiss_threads,
    index_bytes,
    recall_vs_exact,
    timed_search,
)
from ragbench.retrieval.index import ShardCheckpoints, build_index, load_embedder  # noqa: E402

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
CHUNK_SIZE = 128
CHUNK_OVERLAP = round(CHUNK_SIZE * 0.1)  # the grid's default overlap share
QUERY_WORDS = 32
TOP_K = 10
PER_CHUNK_RATIO_GOAL = 1.2
RSS_GOAL_BYTES = 3 * 2**30
RECALL_GOAL = 0.95
SPEEDUP_GOAL = 5.0
VECTORS_TOLERANCE = 1e-4  # a resumed build's vectors vs a whole one's (batches differ, so not bit for bit)
SAMPLE_SEED = 0

LINUX_DOC_PACKAGE = "linux-doc-6.1"
LINUX_DOC_ROOT = Path(f"/usr/share/doc/{LINUX_DOC_PACKAGE}/Documentation")
# Heading adornments and table borders (lines of punctuation only) and licence tags carry no text to embed.
MARKUP_LINE = re.compile(r"^[^\w\n]{3,}$|^.*SPDX-License-Identifier.*$", re.MULTILINE)


def ensure_linux_doc() -> None:
    """Install the corpus with apt-get when running as root; otherwise say how to."""
    if LINUX_DOC_ROOT.is_dir():
        return
    command = f"apt-get update && apt-get install -y {LINUX_DOC_PACKAGE}"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit(f"{LINUX_DOC_ROOT} not found: install the corpus with `sudo sh -c '{command}'`")
    print(f"installing the corpus: {command}", flush=True)
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=environment, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", LINUX_DOC_PACKAGE], check=True, env=environment)


def linux_doc_corpus() -> Corpus:
    """Every text file of the kernel documentation (gzipped .rst, .txt, .yaml and extension-less ABI
    descriptions; not images, scripts or graphs) as one document."""
    documents = []
    for path in sorted(LINUX_DOC_ROOT.rglob("*.gz")):
        stem = path.name.removesuffix(".gz")
        if not stem.endswith((".rst", ".txt", ".yaml")) and "." in stem:
            continue
        text = MARKUP_LINE.sub("", gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace"))
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        if text:
            source = path.relative_to(LINUX_DOC_ROOT).as_posix().removesuffix(".gz")
            documents.append(Document(text=text, source=source))
    description = f"Linux kernel documentation ({LINUX_DOC_PACKAGE})"
    return Corpus(
        documents=documents,
        fingerprint=short_hash(*(f"{d.source}\0{d.text}\0" for d in documents)),
        description=description,
    )


def cached_chunks(corpus: Corpus, cache: Path) -> ChunkSet:
    """The corpus chunked by the project's chunker, read back from `cache` when chunked before."""
    key = short_hash(f"{corpus.fingerprint}\0{CHUNK_SIZE}\0{CHUNK_OVERLAP}\0{MINILM}")
    path = cache / f"chunks-{key}.json"
    if path.exists():
        return ChunkSet.model_validate_json(path.read_text())
    chunks = chunk_corpus(corpus, chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP, tokenizer_name=MINILM)
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(chunks.model_dump_json())
    partial.replace(path)
    return chunks


def sample_chunk_sets(
    chunks: ChunkSet, sizes: list[int], held_out: int
) -> tuple[dict[int, ChunkSet], list[str]]:
    """A chunk set per size (the first `size` chunks of one seeded shuffle) and `held_out` queries made of
    the first words of chunks in none of them."""
    if max(sizes) + held_out > len(chunks.chunks):
        raise SystemExit(
            f"the corpus has {len(chunks.chunks)} chunks of {CHUNK_SIZE} tokens: too few for {max(sizes)} "
            f"plus {held_out} held-out queries"
        )
    order = np.random.default_rng(SAMPLE_SEED).permutation(len(chunks.chunks))
    sets = {
        size: chunks.model_copy(
            update={"chunks": [chunks.chunks[i] for i in order[:size]], "duplicates_removed": 0}
        )
        for size in sizes
    }
    queries = [" ".join(chunks.chunks[i].text.split()[:QUERY_WORDS]) for i in order[len(order) - held_out :]]
    return sets, queries


def build_child(
    chunks_path: Path, result_path: Path, shard_size: int, checkpoints: Path, vectors: Path | None
) -> None:
    """One index build in this (child) process: what a fresh index step would do, measured."""
    chunks = ChunkSet.model_validate_json(chunks_path.read_text())
    embedder = load_embedder(MINILM)
    # What a resume will reuse: the shards whose checkpoints load, by the index module's own rule.
    saved = ShardCheckpoints(str(checkpoints), chunks, MINILM, shard_size)
    texts = chunks.texts
    reusable = [
        len(texts[start : start + shard_size])
        for shard, start in enumerate(range(0, len(texts), shard_size))
        if saved.load(shard, len(texts[start : start + shard_size]), None) is not None
    ]
    started = time.perf_counter()
    index = build_index(
        chunks, embedder, show_progress=False, shard_size=shard_size, checkpoint_location=str(checkpoints)
    )
    seconds = time.perf_counter() - started
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    if vectors is not None:
        np.save(vectors, index.vectors())
    result = {
        "chunks": len(texts),
        "seconds": seconds,
        "encoded_texts": index.manifest.encoded_texts,
        "peak_rss_bytes": peak_rss,
        "shards_reusable": len(reusable),
        "rows_reusable": sum(reusable),
    }
    result_path.write_text(json.dumps(result))


class Builds:
    """Runs `build_child` in new processes over chunk sets written to a work folder."""

    def __init__(self, work: Path, shard_size: int) -> None:
        self.work, self.shard_size = work, shard_size

    def start(
        self, chunks: ChunkSet, checkpoints: Path, vectors: Path | None = None
    ) -> tuple[subprocess.Popen, Path]:
        size = len(chunks.chunks)
        chunks_path, result_path = (
            self.work / f"chunks-{size}.json",
            self.work / f"result-{size}-{time.time_ns()}.json",
        )
        if not chunks_path.exists():
            chunks_path.write_text(chunks.model_dump_json())
        command = [
            sys.executable,
            __file__,
            "--child-chunks",
            str(chunks_path),
            "--child-result",
            str(result_path),
        ]
        command += ["--shard-size", str(self.shard_size), "--child-checkpoints", str(checkpoints)]
        command += ["--child-vectors", str(vectors)] if vectors else []
        return subprocess.Popen(
            command, stdout=sys.stderr
        ), result_path  # the child's chatter stays off stdout

    def run(self, chunks: ChunkSet, checkpoints: Path, vectors: Path | None = None) -> dict:
        process, result_path = self.start(chunks, checkpoints, vectors)
        if process.wait():
            raise SystemExit(f"the build of {len(chunks.chunks)} chunks failed (exit {process.returncode})")
        return json.loads(result_path.read_text())


def part_a(
    sets: dict[int, ChunkSet], builds: Builds, vectors_cache: Path, smoke: bool
) -> tuple[list[dict], bool]:
    """Build time per chunk and peak memory at each size; the largest size's vectors go to the cache."""
    rows, passed, results = [], True, {}
    for size in sorted(sets):
        vectors = vectors_cache if size == max(sets) else None
        result = results[size] = builds.run(sets[size], builds.work / f"checkpoints-a-{size}", vectors)
        smallest = results[min(sets)]
        ratio = (result["seconds"] / size) / (smallest["seconds"] / min(sets))
        one_encode_each = result["encoded_texts"] == size
        rows.append(
            {
                "chunks": size,
                "shards": -(-size // builds.shard_size),
                "build_s": round(result["seconds"], 1),
                "ms_per_chunk": round(1000 * result["seconds"] / size, 2),
                "vs_smallest": round(ratio, 3),
                "texts_encoded": result["encoded_texts"],
                "peak_rss_mib": round(result["peak_rss_bytes"] / 2**20),
                "goals_met": one_encode_each
                and result["peak_rss_bytes"] < RSS_GOAL_BYTES
                and (smoke or ratio <= PER_CHUNK_RATIO_GOAL),
            }
        )
        passed &= rows[-1]["goals_met"]
    return rows, passed


def saved_shards(checkpoints: Path) -> int:
    """Complete shard files (a shard being written is still `.partial`)."""
    return len(list(checkpoints.glob("*/shard-*.npy")))


def part_b(chunks: ChunkSet, builds: Builds, reference: Path) -> tuple[list[dict], bool]:
    """Kill a build half-way, resume it in a new process, and count what the resume encoded."""
    size, shard_size = len(chunks.chunks), builds.shard_size
    shards = -(-size // shard_size)
    if shards < 3:
        raise SystemExit(
            f"--resume-size {size} makes {shards} shard(s) of {shard_size}: too few to kill half-way"
        )
    checkpoints = builds.work / "checkpoints-b"
    process, _ = builds.start(chunks, checkpoints)
    while process.poll() is None and saved_shards(checkpoints) < shards // 2:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    killed = process.wait() == -signal.SIGKILL
    at_kill = saved_shards(checkpoints)
    resumed_vectors = builds.work / "resumed.npy"
    result = builds.run(chunks, checkpoints, resumed_vectors)
    expected = size - result["rows_reusable"]
    if reference.exists():  # the largest size's vectors: this set is its first `size` chunks
        difference = float(np.abs(np.load(resumed_vectors) - np.load(reference, mmap_mode="r")[:size]).max())
        same_vectors = difference <= VECTORS_TOLERANCE
    else:
        difference, same_vectors = None, True
    row = {
        "chunks": size,
        "shards": shards,
        "killed": killed,
        "saved_at_kill": at_kill,
        "reused": result["shards_reusable"],
        "encoded_on_resume": result["encoded_texts"],
        "expected": expected,
        "embedded_twice_at_most": min(shard_size, expected),
        "max_vector_diff": "n/a" if difference is None else f"{difference:.1e}",
        "goals_met": killed
        and 0 < at_kill < shards
        and result["shards_reusable"] == at_kill
        and result["encoded_texts"] == expected
        and same_vectors,
    }
    return [row], row["goals_met"]


def part_c(
    vectors: np.ndarray, queries: np.ndarray, specs: list[IndexSpec], smoke: bool
) -> tuple[list[dict], bool]:
    """Each index type's build, size, recall@10 against flat and search time per query, vs flat."""
    rows, passed, exact_positions, flat_seconds = [], True, None, 0.0
    for spec in [IndexSpec(), *specs]:
        started = time.perf_counter()
        index = build_faiss_index(vectors, spec)
        build_seconds = time.perf_counter() - started
        with faiss_threads(1):
            positions, seconds = timed_search(index, queries, TOP_K)
        if exact_positions is None:
            exact_positions, flat_seconds = positions, seconds
        recall, speedup = recall_vs_exact(positions, exact_positions), flat_seconds / seconds
        size = index_bytes(index)
        row = {
            "index": spec.name,
            "build_s": round(build_seconds, 2),
            "mib": round(size / 2**20, 1),
            "bytes_per_vector": round(size / len(vectors)),
            f"recall@{TOP_K}": round(recall, 4),
            "ms_per_query": round(1000 * seconds, 3),
            "speedup": round(speedup, 2),
            "goals_met": spec.kind == "flat" or smoke or (recall >= RECALL_GOAL and speedup >= SPEEDUP_GOAL),
        }
        rows.append(row)
        passed &= row["goals_met"]
    return rows, passed


def part_d(index_rows: list[dict], build_rows: list[dict]) -> list[dict]:
    """1M vectors on paper: memory per index type from bytes per vector; embedding at the largest rate."""
    rows = [
        {"index": row["index"], "gib_at_1m": round(row["bytes_per_vector"] * 1e6 / 2**30, 2)}
        for row in index_rows
    ]
    if build_rows:
        hours = build_rows[-1]["ms_per_chunk"] * 1e6 / 1000 / 3600
        rows = [{**row, "embed_hours_at_1m": round(hours, 1)} for row in rows]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--shard-size", type=int, default=2048, help="chunks embedded per checkpointed shard")
    parser.add_argument(
        "--resume-size", type=int, default=None, help="chunks of the killed build; default: smallest size"
    )
    parser.add_argument("--queries", type=int, default=500, help="held-out queries for part c")
    parser.add_argument("--parts", default="a,b,c", help="which of a, b, c to run (d follows c)")
    parser.add_argument(
        "--ann", action="append", default=None, help="IndexSpec to compare; default: hnsw, ivf"
    )
    parser.add_argument("--cache", type=Path, default=None, help="chunks and the largest size's vectors")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny data; timing and recall goals not enforced"
    )
    for internal in ("--child-chunks", "--child-result", "--child-checkpoints", "--child-vectors"):
        parser.add_argument(internal, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_chunks:
        build_child(
            args.child_chunks, args.child_result, args.shard_size, args.child_checkpoints, args.child_vectors
        )
        return 0
    parts = set(args.parts.split(","))
    specs = [IndexSpec.parse(text) for text in args.ann or ["hnsw", "ivf"]]
    if args.smoke:
        args.sizes, args.shard_size, args.queries = "100,200", 20, 40
    sizes = sorted(int(size) for size in args.sizes.split(","))
    resume_size = args.resume_size or sizes[0]
    work = Path(tempfile.mkdtemp(prefix="ragbench-bench-scale-"))
    cache = args.cache or (work / "cache" if args.smoke else cache_dir("bench_scale"))
    try:
        if args.smoke:
            corpus = load_corpus(KnowledgeBaseConfig(kind="pydoc_topics"))
        else:
            ensure_linux_doc()
            corpus = linux_doc_corpus()
        all_chunks = cached_chunks(corpus, cache)
        sets, queries = sample_chunk_sets(all_chunks, sorted({*sizes, resume_size}), args.queries)
        print(
            f"{corpus.description}: {len(corpus.documents)} documents, {len(all_chunks.chunks)} chunks of "
            f"{CHUNK_SIZE} tokens (overlap {CHUNK_OVERLAP}); {MINILM}; shards of {args.shard_size}",
            flush=True,
        )
        largest = sets[sizes[-1]]
        vectors_cache = cache / f"vectors-{largest.fingerprint}-{MINILM.replace('/', '--')}.npy"
        builds, passed, build_rows = Builds(work, args.shard_size), True, []
        if "a" in parts:
            build_rows, passed_a = part_a(
                {size: sets[size] for size in sizes}, builds, vectors_cache, args.smoke
            )
            passed &= passed_a
            print(
                f"\na. index build per size, each in its own process (goals: per chunk <= "
                f"{PER_CHUNK_RATIO_GOAL}x the smallest, peak RSS < {RSS_GOAL_BYTES // 2**30} GiB, one encode "
                "per chunk)"
            )
            print(rows_to_text(build_rows), flush=True)
        if "b" in parts:
            resume_rows, passed_b = part_b(sets[resume_size], builds, vectors_cache)
            passed &= passed_b
            print(
                "\nb. build SIGKILLed at half its shards, then resumed in a new process (goal: every saved "
                "shard reused, only the others' texts encoded)"
            )
            print(rows_to_text(resume_rows), flush=True)
        if "c" in parts:
            if not vectors_cache.exists():
                builds.run(largest, work / "checkpoints-c", vectors_cache)
            vectors = np.load(vectors_cache)
            query_vectors = load_embedder(MINILM).encode_queries(queries)
            index_rows, passed_c = part_c(vectors, query_vectors, specs, args.smoke)
            passed &= passed_c
            print(
                f"\nc. approximate vs exact search over {len(vectors)} vectors, {len(queries)} held-out "
                f"queries, one per call on 1 thread (goals: recall@{TOP_K} >= {RECALL_GOAL}, speed-up >= "
                f"{SPEEDUP_GOAL}x)"
            )
            print(rows_to_text(index_rows))
            print(
                "\nd. 1M vectors on paper (memory from bytes per vector, embedding at the largest size's "
                "rate)"
            )
            print(rows_to_text(part_d(index_rows, build_rows)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    enforced = "(smoke: build-time ratio, recall and speed-up not enforced)" if args.smoke else "(all goals)"
    print(f"\ngoal: every row above meets its goals {enforced} -> {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
