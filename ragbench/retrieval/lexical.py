"""Lexical (BM25) retrieval over a chunk set, and rank fusion of several retrievers' rankings.

What "bm25" means here, exactly (also recorded in every index's manifest):

- Tokenization (`bm25s.tokenize`, the same for chunks and questions): lowercase; tokens are the matches of
  the regex `(?u)\\b\\w\\w+\\b` (runs of two or more Unicode word characters, underscore included, so
  `__init__` is one token and `os.path` is two, single characters are dropped); bm25s's English stopword list
  (Lucene's 33 words: a, an, and, are, as, at, be, but, by, for, if, in, into, is, it, no, not, of, on, or,
  such, that, the, their, then, there, these, they, this, to, was, will, with) is removed, then every token is
  stemmed with PyStemmer's Snowball English (Porter2) stemmer, so "indexes", "indexed" and "indexing" are
  all "index". A question term that occurs in no chunk is ignored; repeated question terms count each time.
- Scoring: bm25s `BM25(method="lucene", k1=1.5, b=0.75)`: idf = ln(1 + (N - df + 0.5) / (df + 0.5)) and
  tf weight = tf / (tf + k1 * (1 - b + b * length / average length)), summed over the question's terms.
- Only chunks sharing at least one term with the question are hits. bm25s itself ranks every chunk, giving
  the others a score of 0; those are dropped here, so a question may get fewer than k hits (or none).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import BaseModel

from ragbench.inputs.chunking import ChunkSet

STOPWORDS = "en"
STEMMER_LANGUAGE = "english"
BM25_METHOD = "lucene"
BM25_K1 = 1.5
BM25_B = 0.75
TOKENIZATION = (
    "bm25s.tokenize: lowercase, tokens = regex (?u)\\b\\w\\w+\\b, bm25s English stopwords (Lucene's 33) "
    "removed, PyStemmer Snowball English stemmer; same for chunks and questions"
)


class LexicalIndexManifest(BaseModel):
    """What a BM25 index is and how it was built; shown in the dashboard and logged as step metadata."""

    chunk_size: int
    chunk_overlap: int
    chunk_count: int
    chunk_set_fingerprint: str
    vocabulary_size: int
    build_seconds: float
    index_bytes: int = 0  # the sparse term-weight matrix
    tokenization: str = TOKENIZATION
    scoring: str = f"BM25 (bm25s, method={BM25_METHOD}, k1={BM25_K1}, b={BM25_B}); only term-sharing hits"


@lru_cache(maxsize=1)
def _stemmer():  # -> Stemmer.Stemmer
    import Stemmer

    return Stemmer.Stemmer(STEMMER_LANGUAGE)


def _tokenize(texts: list[str], return_ids: bool):  # -> bm25s.tokenization.Tokenized | list[list[str]]
    import bm25s

    return bm25s.tokenize(
        texts, stopwords=STOPWORDS, stemmer=_stemmer(), return_ids=return_ids, show_progress=False
    )


@dataclass
class LexicalIndex:
    """A BM25 index of one chunk set; positions index that set's `chunks`, whose texts it does not keep."""

    manifest: LexicalIndexManifest
    retriever: object  # bm25s.BM25

    def check_matches(self, chunks: ChunkSet) -> None:
        """Refuse to read positions of this index as rows of another chunk set."""
        chunks.check_indexed_by(self.manifest.chunk_set_fingerprint, "BM25 index")

    def term_ids(self, questions: list[str]) -> list[list[int]]:
        """Each question's stemmed terms as index term ids; terms that occur in no chunk are left out."""
        vocabulary = self.retriever.vocab_dict
        return [
            [vocabulary[term] for term in terms if term and term in vocabulary]
            for terms in _tokenize(questions, return_ids=False)
        ]

    def search(self, questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, chunk positions) per question, best first, like `VectorIndex.search`: k is clamped
        to the chunk count, rows with fewer hits are padded with position -1 (score 0). Equal scores are
        ranked by chunk position, so results do not depend on the order bm25s happens to return."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        k = min(k, self.manifest.chunk_count)
        scores = np.zeros((len(questions), k), dtype=np.float32)
        positions = np.full((len(questions), k), -1, dtype=np.int64)
        for row, terms in enumerate(self.term_ids(questions)):
            if not terms:
                continue
            chunk_scores = self.retriever.get_scores_from_ids(terms)
            hits = np.flatnonzero(chunk_scores > 0)  # lucene idf and tf weights are > 0 for a shared term
            best = hits[np.lexsort((hits, -chunk_scores[hits]))][:k]
            scores[row, : len(best)] = chunk_scores[best]
            positions[row, : len(best)] = best
        return scores, positions


def build_lexical_index(chunks: ChunkSet) -> LexicalIndex:
    """Tokenize every chunk once and precompute its BM25 term weights (bm25s's sparse eager index)."""
    import bm25s

    if not chunks.chunks:
        raise ValueError(f"chunk set (size {chunks.chunk_size}) is empty: nothing to index")
    started = time.perf_counter()
    tokenized = _tokenize(chunks.texts, return_ids=True)
    if not tokenized.vocab:
        raise ValueError(f"chunk set (size {chunks.chunk_size}) has no indexable term: nothing to index")
    retriever = bm25s.BM25(method=BM25_METHOD, k1=BM25_K1, b=BM25_B)
    retriever.index(tokenized, show_progress=False)
    manifest = LexicalIndexManifest(
        chunk_size=chunks.chunk_size,
        chunk_overlap=chunks.chunk_overlap,
        chunk_count=len(chunks.chunks),
        chunk_set_fingerprint=chunks.fingerprint,
        vocabulary_size=sum(1 for term in retriever.vocab_dict if term),  # not bm25s's empty token
        build_seconds=round(time.perf_counter() - started, 3),
        index_bytes=sum(int(array.nbytes) for array in retriever.scores.values() if hasattr(array, "nbytes")),
    )
    return LexicalIndex(manifest=manifest, retriever=retriever)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Fuse ranked position lists into one, best first: RRF (Cormack, Clarke and Buettcher, SIGIR 2009),
    score(p) = sum over lists i containing p of w_i / (k + rank_i(p)), rank 1-based within list i.

    Within each list, positions < 0 (search padding) and repeats of a position are dropped first, so
    rank_i counts distinct real positions. Ties are broken by the best rank the position has in any list,
    then by the smaller position. Each score is an exactly rounded sum (`math.fsum`), so it does not depend
    on the order of the lists, and equal rank patterns give exactly equal scores.
    """
    if k < 0:
        raise ValueError(f"RRF k must not be negative, not {k}")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    contributions: dict[int, list[float]] = {}
    best_rank: dict[int, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        distinct = dict.fromkeys(position for position in map(int, ranking) if position >= 0)
        for rank, position in enumerate(distinct, start=1):
            contributions.setdefault(position, []).append(weight / (k + rank))
            best_rank[position] = min(rank, best_rank.get(position, rank))
    fused = [(position, math.fsum(parts)) for position, parts in contributions.items()]
    return sorted(fused, key=lambda item: (-item[1], best_rank[item[0]], item[0]))
