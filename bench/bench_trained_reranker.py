"""A ColBERT reranker trained on the knowledge base (ragbench.training) against no reranking, on the eval set.

It writes the training questions (the generator, one per sampled chunk, cached in the LLM cache), adds
inverse-cloze pseudo-questions, drops any resembling an eval case, mines negatives, trains from the
shipped MiniLM weights on this machine's CPU (timed), and then reranks every eval case's dense top_k
candidates through the stored-encodings path. It prints the training time and each ranking's MRR and
nDCG@10 over the eval cases, and the paired gain of the trained reranker (and of the untrained stand-in)
over no reranking, with 95% paired-bootstrap intervals and permutation p-values.

`--smoke` is for tests on a few documents, cloze questions only and a few training steps: the figures are
noise there; it checks that every stage runs and that no eval case reaches training.

    python bench/bench_trained_reranker.py [--chunks 300] [--max-minutes 45] [--documents N] [--smoke]
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
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ragbench.config.model import load_config  # noqa: E402
from ragbench.inputs.chunking import chunk_corpus  # noqa: E402
from ragbench.inputs.eval_cases import load_eval_source  # noqa: E402
from ragbench.inputs.knowledge_base import load_corpus  # noqa: E402
from ragbench.llm.client import LLMClient  # noqa: E402
from ragbench.models.provision import resolve_model  # noqa: E402
from ragbench.models.registry import COLBERT_STANDIN_NAME  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.retrieval.colbert_maxsim import PrecomputedColbertReranker, encode_chunk_set  # noqa: E402
from ragbench.retrieval.index import build_index, load_embedder  # noqa: E402
from ragbench.retrieval.lexical import build_lexical_index  # noqa: E402
from ragbench.retrieval.rerank import RerankerChoice, resolve_reranker  # noqa: E402
from ragbench.retrieval.search import RetrievedChunk, ranked_chunks, retrieval_metrics  # noqa: E402
from ragbench.stats.formatting import interval_text  # noqa: E402
from ragbench.stats.inference import paired_difference_test  # noqa: E402
from ragbench.stats.intervals import mean_interval  # noqa: E402
from ragbench.training.colbert import train_colbert  # noqa: E402
from ragbench.training.prepare import training_pairs, training_questions  # noqa: E402
from ragbench.training.questions import (  # noqa: E402
    held_out_texts,
    leaks,
)

COLUMNS = ("mrr", "ndcg@10")


def candidate_lists(index, embedder, chunks, questions: list[str], top_k: int) -> list[list[RetrievedChunk]]:
    """Each question's dense top_k as the retrieve step ranks it (`ranked_chunks`: a chunk shared by
    several documents credits each expected one, as in a run, so the figures are the run's)."""
    scores, positions = index.search(embedder.encode_queries(questions), top_k)
    return [
        ranked_chunks(chunks, row_positions, row_scores)
        for row_scores, row_positions in zip(scores, positions, strict=True)
    ]


def per_case(cases, rankings, top_k: int) -> dict[str, list[float]]:
    report = retrieval_metrics(cases, rankings, metrics_k=10, top_k=top_k)
    return {column: [trace.values[column] for trace in report.cases] for column in COLUMNS}


def paired_gain(reference: dict[str, list[float]], candidate: dict[str, list[float]], column: str) -> str:
    """Mean paired difference with its 95% interval and p-value, both from the paired permutation test."""
    gain, low, high, p = paired_difference_test(reference[column], candidate[column])
    return f"{gain:+.3f} {interval_text(low, high, digits=3, signed=True)} p={p:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument(
        "--chunks", type=int, default=None, help="generator questions (default: the config's)"
    )
    parser.add_argument("--max-minutes", type=float, default=None, help="training time limit")
    parser.add_argument("--documents", type=int, default=None, help="first N knowledge-base documents")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--smoke", action="store_true", help="tiny run: every stage, figures are noise")
    args = parser.parse_args()
    overrides = list(args.overrides)
    if args.documents:
        overrides.append(f"knowledge_base.limit={args.documents}")
    if args.chunks is not None:
        overrides.append(f"reranker_training.chunks={args.chunks}")
    if args.max_minutes is not None:
        overrides.append(f"reranker_training.max_minutes={args.max_minutes}")
    if args.smoke:
        overrides += ["reranker_training.epochs=1", "reranker_training.validate_every=2"]
    config = load_config(args.config, overrides)
    settings = config.reranker_training
    size, overlap = config.section_chunking(settings)
    top_k = config.grid.top_k[0]
    chunks = chunk_corpus(load_corpus(config.knowledge_base), size, overlap, config.chunking_tokenizer)
    cases = [c for c in load_eval_source(config.eval_cases) if c.expected_sources]
    known = {chunk.source for chunk in chunks.chunks}
    cases = [c for c in cases if set(c.expected_sources) & known]
    embedder = load_embedder(config.section_embedding_model(settings))
    index = build_index(chunks, embedder, show_progress=False)
    lexical = build_lexical_index(chunks)

    started = time.perf_counter()
    questions = training_questions(
        chunks, settings, lambda: LLMClient(settings.generator_settings(), cache_location=config.llm_cache)
    )
    written_seconds = time.perf_counter() - started
    pairs = training_pairs(
        questions,
        chunks,
        index,
        lexical,
        embedder,
        cases=cases,
        settings=settings,
        knowledge_base=config.knowledge_base.kind,
    )
    held_out = held_out_texts(cases)
    leaked = [e.question for e in pairs.training if leaks(e.question, held_out)]
    print(f"pairs: {pairs.summary()}")
    with tempfile.TemporaryDirectory(prefix="ragbench-trained-") as folder:
        dest = Path(folder) / "checkpoint"
        log = train_colbert(
            pairs,
            chunks,
            start_location=resolve_model(COLBERT_STANDIN_NAME).location,
            dest=dest,
            recipe=settings.recipe(),
        )
        print(f"training: {log.model_dump(exclude={'loss_curve'})}")
        print(f"loss curve: {log.loss_curve}")
        candidates = candidate_lists(index, embedder, chunks, [c.question for c in cases], top_k)
        rankings = {"off": candidates}
        choices = {
            "colbert-standin (UNTRAINED)": resolve_reranker(COLBERT_STANDIN_NAME),
            "trained": RerankerChoice(requested=str(dest), used=str(dest), is_standin=False, reason="bench"),
        }
        for name, choice in choices.items():
            reranker = PrecomputedColbertReranker(
                encode_chunk_set(choice, chunks), choice=choice, chunk_set_fingerprint=chunks.fingerprint
            )
            rankings[name] = [
                reranker.rerank(c.question, lst, len(lst)) for c, lst in zip(cases, candidates, strict=True)
            ]
    values = {name: per_case(cases, ranking, top_k) for name, ranking in rankings.items()}
    rows = []
    for name, columns in values.items():
        row = {"reranker": name}
        for column in COLUMNS:
            interval = mean_interval(columns[column], bounds=(0.0, 1.0))  # retrieval metrics: on 0-1
            row[column] = f"{interval.mean:.3f} {interval_text(interval.low, interval.high, digits=3)}"
            row[f"{column} gain vs off"] = (
                "" if name == "off" else paired_gain(values["off"], columns, column)
            )
        rows.append(row)
    print(
        f"\nTrained reranker vs no reranking: {len(cases)} eval cases, chunk size {size}, top_k {top_k}; "
        f"{pairs.summary()['training_pairs']} training pairs ({pairs.summary()['generator_questions']} "
        f"generator, {pairs.summary()['cloze_questions']} cloze) from {config.knowledge_base.kind}"
    )
    print(
        f"question writing: {written_seconds:.0f} s ({questions.calls} calls, cached calls are free); "
        f"training: {log.seconds:.0f} s, {log.steps} steps (best {log.best_step}), "
        f"stopped: {log.stopped_because}"
    )
    kept = (
        f"the best-validated weights (step {log.best_step})"
        if log.kept == "best"
        else "the last step's weights: no validation beat the untrained start"
        if log.beat_the_start is False
        else "the last step's weights (nothing validated)"
    )
    print(
        f"trained row: {kept}; validation MRR by step {log.validation_curve}, first stage "
        f"{log.validation_mrr_first_stage}"
    )
    print(rows_to_text(rows))
    standin = values["colbert-standin (UNTRAINED)"]
    print(
        "trained vs the UNTRAINED stand-in: "
        + "; ".join(f"{c} {paired_gain(standin, values['trained'], c)}" for c in COLUMNS)
    )
    problems = []
    if leaked:
        problems.append(f"{len(leaked)} training question(s) resemble an eval case: {leaked[:3]}")
    if not pairs.training or log.steps < 1:
        problems.append("nothing was trained")
    print(
        "FAIL: " + "; ".join(problems) if problems else "PASS: every stage ran; no eval case reached training"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
