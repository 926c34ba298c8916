"""Which chunks seed which kind of case: seeded and model-free, so the same config plans the same set."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from ragbench.hashing import short_hash
from ragbench.inputs.chunking import Chunk
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.testset.rubrics import EVOLUTIONS, SIMPLE, UNANSWERABLE
from ragbench.testset.settings import TestsetConfig

# A second passage this similar to the first is the same text (overlap, a repeated section), not a
# related one: a multi-context question over it would need one passage only.
SAME_TEXT_SIMILARITY = 0.95


class Seed(BaseModel):
    """One planned case: its kind and the chunk(s) it is written from (the sampled chunk first)."""

    id: str
    evolution: str
    chunks: list[SourceChunk]


def source_chunk(chunk: Chunk) -> SourceChunk:
    return SourceChunk(source=chunk.source, start_index=chunk.start_index, text=chunk.text)


def sample_chunks(
    chunks: Sequence[Chunk],
    count: int,
    *,
    sampling: Literal["proportional", "even"],
    seed: int,
    min_chars: int,
) -> list[int]:
    """Positions of `count` distinct chunks (fewer if there are not enough long ones), in a seeded order.

    proportional: every long-enough chunk equally likely, so a source gets cases in proportion to its
    chunks; even: sources take turns, each in a seeded order, so small sources are not drowned out.
    """
    rng = random.Random(seed)
    eligible = [i for i, chunk in enumerate(chunks) if len(chunk.text.strip()) >= min_chars]
    if sampling == "proportional":
        return rng.sample(eligible, min(count, len(eligible)))
    by_source: dict[str, list[int]] = defaultdict(list)
    for position in eligible:
        by_source[chunks[position].source].append(position)
    queues = [rng.sample(positions, len(positions)) for _, positions in sorted(by_source.items())]
    rng.shuffle(queues)
    chosen: list[int] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop())
    return chosen


def allocate(count: int, shares: Mapping[str, float]) -> dict[str, int]:
    """`count` split by `shares` with the largest-remainder method: the counts add up to `count` and
    each is within one of its exact share (ties broken by the order of `shares`)."""
    exact = {name: count * share for name, share in shares.items()}
    counts = {name: math.floor(value) for name, value in exact.items()}
    by_remainder = sorted(exact, key=lambda name: exact[name] - counts[name], reverse=True)
    for name in by_remainder[: count - sum(counts.values())]:
        counts[name] += 1
    return counts


def assign_kinds(
    count: int, evolutions: Mapping[str, float], unanswerable_share: float, seed: int
) -> list[str]:
    """The kind of each of `count` cases: `unanswerable_share` of them unanswerable, the rest split by the
    evolution mix; exact counts, in a seeded order."""
    unanswerable = round(count * unanswerable_share)
    kinds = [UNANSWERABLE] * unanswerable
    for name, number in allocate(count - unanswerable, evolutions).items():
        kinds += [name] * number
    random.Random(seed + 1).shuffle(kinds)
    return kinds


def related_chunk(
    position: int, chunks: Sequence[Chunk], vectors: np.ndarray, search_k: int = 10
) -> int | None:
    """A chunk related to `position` for a multi-context question: among its `search_k` most similar
    chunks that are neither it, nor overlapping it, nor the same text, the most similar one of another
    source if there is one (a question that joins two documents is what a reader of one cannot answer),
    else the most similar one."""
    similarities = vectors @ vectors[position]
    first = chunks[position]
    candidates = []
    for other in np.argsort(-similarities)[: search_k + 1]:
        other = int(other)
        if other == position or similarities[other] >= SAME_TEXT_SIMILARITY:
            continue
        second = chunks[other]
        overlaps = first.source == second.source and (
            abs(first.start_index - second.start_index) < max(len(first.text), len(second.text))
        )
        if not overlaps:
            candidates.append(other)
    elsewhere = [other for other in candidates if chunks[other].source != first.source]
    return (elsewhere or candidates or [None])[0]


def seed_id(chunks: Sequence[SourceChunk], evolution: str) -> str:
    """Stable across runs: the same chunks and kind give the same case id."""
    parts = (f"\0{chunk.source}\0{chunk.start_index}\0{chunk.text}" for chunk in chunks)
    return f"gen-{short_hash(evolution, *parts, length=10)}"


def plan_seeds(
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    *,
    count: int,
    sampling: Literal["proportional", "even"],
    seed: int,
    min_chars: int,
    evolutions: Mapping[str, float],
    unanswerable_share: float,
) -> list[Seed]:
    """One seed per sampled chunk. A kind that needs a second passage takes the most similar other chunk
    (`vectors`: one normalised row per chunk); when there is none, the seed stays a simple question."""
    positions = sample_chunks(chunks, count, sampling=sampling, seed=seed, min_chars=min_chars)
    kinds = assign_kinds(len(positions), evolutions, unanswerable_share, seed)
    seeds = []
    for position, kind in zip(positions, kinds, strict=True):
        chosen = [position]
        evolution = EVOLUTIONS.get(kind)
        if evolution is not None and evolution.passages > 1:
            partner = related_chunk(position, chunks, vectors)
            if partner is None:
                kind = SIMPLE
            else:
                chosen.append(partner)
        passages = [source_chunk(chunks[p]) for p in chosen]
        seeds.append(Seed(id=seed_id(passages, kind), evolution=kind, chunks=passages))
    return seeds


def plan_for(settings: TestsetConfig, chunks: Sequence[Chunk], vectors: np.ndarray) -> list[Seed]:
    """The seeds the `testset` section asks for (what the generate step and the dry run's check plan)."""
    return plan_seeds(
        chunks,
        vectors,
        count=settings.chunks,
        sampling=settings.sampling,
        seed=settings.seed,
        min_chars=settings.min_chunk_chars,
        evolutions=settings.evolutions,
        unanswerable_share=settings.unanswerable_share,
    )
