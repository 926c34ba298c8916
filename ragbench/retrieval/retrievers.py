"""Retrievers: each is one class with one `search` (as in BEIR), found by name in one registry
(`ragbench.plugins.Registry`): the built-in dense, bm25 and hybrid, and those other installed packages
register in the entry point group ``ragbench.retrievers``. A `grid.retriever` value is a retriever's name.

A retriever names the shared indexes it reads (`reads`): the pipeline builds each once (the dense index
per chunk set and embedding, the BM25 index per chunk set) and hands them over in a `SearchContext`; a
retriever that reads none gets the chunk set alone, and a cell of it has no embedding_model or index. The
retrieve step gets the retriever by its identity (`Plugin.identity`, in the step's cache key), so a new
setting or another version of its package retrieves again.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ragbench.grid.cell import DEFAULT_RETRIEVER, CellSpec
from ragbench.inputs.chunking import ChunkSet
from ragbench.llm.types import LLMEntry
from ragbench.plugins import Plugin, Registry
from ragbench.retrieval.ann import recall_vs_exact
from ragbench.retrieval.index import VectorIndex, load_embedder
from ragbench.retrieval.lexical import LexicalIndex, reciprocal_rank_fusion
from ragbench.section import Section

RETRIEVER_ENTRY_POINTS = "ragbench.retrievers"
SharedIndex = Literal["dense", "lexical"]
# One question's ranking: chunk positions (rows of the chunk set; -1 = no hit, skipped) and their scores.
Ranking = tuple[Sequence[int], Sequence[float]]


class RetrievalConfig(Section):
    """Retrieval metrics, computed on every case with expected sources, and the retrievers' settings."""

    metrics_k: int = Field(default=5, ge=1, description="cut-off for hit rate, recall and failure rate")
    rrf_k: int = Field(
        default=60,
        ge=1,
        description="hybrid retrieval: the k of reciprocal-rank fusion, score = sum of 1/(k + rank) over "
        "bm25 and dense, each ranking top_k deep",
    )
    rewriter: LLMEntry | None = Field(
        default=None,
        description="the LLM of grid.query_rewrite (a litellm model string or LLMSettings mapping); default: "
        "the grid's first reader, the model an assistant under test would rewrite with (else the packaged "
        "local model); its settings are in the retrieve step's cache key, so another rewriter rewrites anew",
    )
    multi_query_count: int = Field(
        default=3, ge=2, le=10, description="query_rewrite multi_query: queries per case, each searched"
    )


@dataclass
class SearchContext:
    """What a retriever may search: the chunk set (positions are its rows) and the shared indexes of its
    `reads`. The shared searches count what is not search time (encoding the questions, the exact search an
    approximate index is measured against) in `excluded_seconds` and the approximate index's recall in
    `stats`, so every retriever's search is timed by one rule (`timed_search`)."""

    chunks: ChunkSet  # the cell's chunks: a ranking's positions are rows of `chunks.texts`
    dense: VectorIndex | None = None
    exact: VectorIndex | None = None  # the flat index of the dense index's vectors, when that is approximate
    lexical: LexicalIndex | None = None
    device: str = "auto"  # where the questions are encoded (`embedding.device`, as for the chunks)
    excluded_seconds: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)

    def dense_search(self, questions: list[str], top_k: int) -> list[Ranking]:
        """The dense index's top_k per question; with `exact`, its recall against the exact search."""
        if self.dense is None:
            raise ValueError("this retriever reads the dense index, and none was given")
        started = time.perf_counter()
        self.dense.check_matches(self.chunks)
        query_vectors = load_embedder(self.dense.manifest.embedding_model, self.device).encode_queries(
            questions
        )
        self.excluded_seconds += time.perf_counter() - started
        scores, positions = self.dense.search(query_vectors, top_k)
        if self.exact is not None:
            started = time.perf_counter()
            self.exact.check_matches(self.chunks)
            _, exact_positions = self.exact.search(query_vectors, top_k)
            exact_seconds = time.perf_counter() - started
            self.excluded_seconds += exact_seconds
            self.stats["exact_ms_per_query"] = round(1000 * exact_seconds / max(len(questions), 1), 4)
            self.stats["recall_vs_exact"] = round(recall_vs_exact(positions, exact_positions), 4)
        return _rankings(scores, positions)

    def lexical_search(self, questions: list[str], top_k: int) -> list[Ranking]:
        """The BM25 index's top_k per question."""
        if self.lexical is None:
            raise ValueError("this retriever reads the BM25 index, and none was given")
        self.lexical.check_matches(self.chunks)
        scores, positions = self.lexical.search(questions, top_k)
        return _rankings(scores, positions)

    def timed_search(
        self, retriever: Retriever, questions: list[str], top_k: int
    ) -> tuple[list[Ranking], float]:
        """The retriever's rankings and its search time: the whole `search` less `excluded_seconds`."""
        started = time.perf_counter()
        rankings = retriever.search(questions, top_k, self)
        if len(rankings) != len(questions):
            raise ValueError(
                f"retriever {retriever.name} ranked {len(rankings)} of {len(questions)} questions"
            )
        return rankings, time.perf_counter() - started - self.excluded_seconds


def _rankings(scores: np.ndarray, positions: np.ndarray) -> list[Ranking]:
    """An index's (scores, positions) arrays, one row per question, as rankings."""
    return [(row.tolist(), row_scores.tolist()) for row, row_scores in zip(positions, scores, strict=True)]


class Retriever(Plugin):
    """One way to rank chunks for questions. A subclass sets `name` and `reads` and implements `search`;
    a retriever with parameters from the config takes them in `from_config` and returns them from
    `settings` (so they are in its identity and a step makes it again with `from_settings`)."""

    # The shared indexes `search` reads through its context ("dense", "lexical"); none: the chunk set alone.
    reads: ClassVar[frozenset[SharedIndex]] = frozenset()

    @abstractmethod
    def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]:
        """Per question, in order: at most top_k chunks of `context.chunks`, best first."""

    @classmethod
    def from_config(cls, config: RetrievalConfig) -> Retriever:
        """This retriever with its settings from the run's `retrieval` section (none by default)."""
        return cls()

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Retriever:
        """This retriever with the `settings` it reported, where a step makes it again."""
        return cls(**settings)


class Dense(Retriever):
    """Cosine similarity of the embedded question and chunks in the cell's FAISS index."""

    name = "dense"
    reads = frozenset({"dense"})

    def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]:
        return context.dense_search(questions, top_k)


class BM25(Retriever):
    """Lexical: BM25 over the chunk set's terms (`ragbench.retrieval.lexical`)."""

    name = "bm25"
    reads = frozenset({"lexical"})

    def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]:
        return context.lexical_search(questions, top_k)


class Hybrid(Retriever):
    """Reciprocal-rank fusion of the dense and the BM25 ranking, each top_k deep: fused by rank, so their
    different score scales do not matter."""

    name = "hybrid"
    reads = frozenset({"dense", "lexical"})

    def __init__(self, rrf_k: int) -> None:
        self.rrf_k = rrf_k

    @classmethod
    def from_config(cls, config: RetrievalConfig) -> Retriever:
        return cls(rrf_k=config.rrf_k)

    def settings(self) -> dict[str, Any]:
        return {"rrf_k": self.rrf_k}

    def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]:
        rankings = []
        for (dense, _), (lexical, _) in zip(
            context.dense_search(questions, top_k), context.lexical_search(questions, top_k), strict=True
        ):
            fused = reciprocal_rank_fusion([dense, lexical], k=self.rrf_k)[:top_k]
            rankings.append(([position for position, _ in fused], [score for _, score in fused]))
        return rankings


RETRIEVERS: Registry[Retriever] = Registry(
    "retriever", RETRIEVER_ENTRY_POINTS, Retriever, {r.name: r for r in (Dense, BM25, Hybrid)}
)


def retriever_class(name: str | None) -> type[Retriever]:
    """The class of a cell's `retriever` value (None = the default, dense)."""
    (found,) = RETRIEVERS.classes([name or DEFAULT_RETRIEVER])
    return found


def make_retriever(cell: CellSpec, config: RetrievalConfig) -> Retriever:
    """The retriever of a cell, with its settings from the run's config."""
    return retriever_class(cell.retriever).from_config(config)


def retriever_from_identity(identity: dict[str, Any]) -> Retriever:
    """The retriever a step was given by its identity, made where the step runs (`Registry.checked`)."""
    made = retriever_class(identity["name"]).from_settings(identity["settings"])
    return RETRIEVERS.checked(made, identity)


def reads_lexical(cell: CellSpec) -> bool:
    """Whether a cell's retriever reads its chunk set's BM25 index (the dense index: `uses_dense_index`)."""
    return "lexical" in retriever_class(cell.retriever).reads


def lexical_keys(cells: list[CellSpec]) -> list[CellSpec]:
    """One BM25 index per chunk set that a cell's retriever reads it from."""
    keys = {cell.lexical_step_id: cell.upto("chunk") for cell in cells if reads_lexical(cell)}
    return list(keys.values())


def row_step_ids(cell: CellSpec) -> list[str]:
    """Every step after chunking whose output a cell's row is made of."""
    return cell.step_ids(lexical=reads_lexical(cell))
