"""How the traces of a window are sampled (`ragbench.inputs.traces`): uniformly, each trace with the same
known inclusion probability, or stratified, each stratum sampled on its own with a size `allocate` shares
out, so its traces' probability is its own and the run weights its mean by its share of the window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ragbench.hashing import seeded_rank


class Stratum(BaseModel):
    """One stratum of a stratified sample: its RAG traces in the window and how many were scored."""

    name: str
    usable: int
    sampled: int

    @property
    def probability(self) -> float:
        return self.sampled / self.usable if self.usable else 1.0


def sample_traces(cases: list[dict[str, Any]], size: int | None, seed: int) -> list[dict[str, Any]]:
    """A seeded uniform sample without replacement of `size` cases (all with None): the first `size` of
    the seeded case order (`seeded_rank`), so each trace's inclusion probability is size / count, recorded
    on its case."""
    if size is None or size >= len(cases):
        return cases
    chosen = sorted(cases, key=lambda case: seeded_rank(seed, case["id"]))[:size]
    probability = size / len(cases)
    return [case | {"logged": case["logged"] | {"inclusion_probability": probability}} for case in chosen]


def stratified_sample(
    cases: list[dict[str, Any]], order: list[str], size: int, allocation: str, seed: int
) -> tuple[list[dict[str, Any]], list[Stratum]]:
    """A seeded uniform sample within each stratum (`sample_traces`) of `order` (each case's
    `logged.stratum`), of the sizes `allocate` shares out; each case records its stratum's inclusion
    probability."""
    by_stratum: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for case in cases:
        by_stratum[case["logged"]["stratum"]].append(case)
    sizes = allocate({name: len(found) for name, found in by_stratum.items()}, size, allocation)
    sampled: list[dict[str, Any]] = []
    strata = []
    for name in order:
        found = by_stratum[name]
        if not found:
            continue
        chosen = sample_traces(found, sizes[name], seed)
        sampled += chosen
        strata.append(Stratum(name=name, usable=len(found), sampled=len(chosen)))
    return sampled, strata


def allocate(counts: Mapping[str, int], size: int, allocation: str) -> dict[str, int]:
    """How many of each stratum's `counts` traces to draw, `size` in all (all of them when there are no
    more), never more than a stratum holds. `equal`: the same number from each stratum, what a small one
    cannot take going to the others. `proportional`: by largest remainders of size * count / total. Either
    way every stratum gets two traces when `size` allows (a stratum's mean needs two values to have a
    spread), and one at least: a stratum with none sampled would have no mean to weight. A `size` smaller
    than the number of strata with traces is refused."""
    total = sum(counts.values())
    if size >= total:
        return dict(counts)
    names = [name for name, count in counts.items() if count]
    if size < len(names):
        raise ValueError(
            f"sample_size {size} is smaller than the {len(names)} strata with traces "
            f"({', '.join(names)}): every stratum needs one sampled trace at least"
        )
    floor = {name: min(2, counts[name]) for name in names}
    if sum(floor.values()) > size:
        floor = dict.fromkeys(names, 1)
    sizes = dict.fromkeys(counts, 0) | floor
    if allocation == "equal":
        left = size - sum(sizes.values())
        while left > 0:
            open_ = [name for name in names if sizes[name] < counts[name]]
            share, extra = divmod(left, len(open_))
            for rank, name in enumerate(open_):
                take = min(counts[name] - sizes[name], share + (rank < extra))
                sizes[name] += take
                left -= take
        return sizes
    wanted = {name: size * counts[name] / total for name in names}
    for name in names:
        sizes[name] = max(sizes[name], min(counts[name], int(wanted[name])))
    left = size - sum(sizes.values())
    # the floors took more than the proportional shares left room for: take from the most over
    while left < 0:
        name = max((n for n in names if sizes[n] > floor[n]), key=lambda n: sizes[n] - wanted[n])
        sizes[name] -= 1
        left += 1
    while left > 0:  # the largest remainders first
        name = min((n for n in names if sizes[n] < counts[n]), key=lambda n: sizes[n] - wanted[n])
        sizes[name] += 1
        left -= 1
    return sizes
