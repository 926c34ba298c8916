"""FAISS index types as validated data: exact (flat), HNSW and IVF, each with flat, SQ8 or PQ codes.

Every type scores by inner product of L2-normalised vectors (cosine), like the exact `IndexFlatIP`, so an
approximate index ranks the same vectors as the exact one and its recall against it is meaningful. A spec
is written as a short string (`hnsw`, `hnsw(m=32,ef_search=128)`, `ivf(nlist=1024,nprobe=16,encoding=sq8)`)
whose canonical form (`IndexSpec.name`, defaults omitted) keys caches and result rows.

The HNSW and IVF defaults were chosen by measurement (`bench/bench_scale.py`, part c, and a sweep of the
same data): on 100k real MiniLM vectors of the Linux kernel documentation with 500 held-out queries,
searched one query at a time on one thread, each gives recall@10 >= 0.95 against exact search at least 5x
faster per query than flat. HNSW m=32, ef_search=64: recall 0.985 (ef_search 32: 0.969, 128: 0.993);
ef_construction 40 built as good a graph as 80 or 160 (0.986, 0.985, 0.988 at ef_search 64) in the least
time. IVF with 4*sqrt(n) = 1265 lists needs nprobe=64 for recall 0.962 (16: 0.897, 32: 0.935, 48: 0.952),
13.8x faster than flat.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

IndexKind = Literal["flat", "hnsw", "ivf"]
Encoding = Literal["flat", "sq8", "pq"]
FLAT_INDEX = "flat"  # exact search: the reference every approximate index's recall is measured against

# Which parameters each kind takes; `encoding` (and `pq_m` with encoding=pq) apply to every kind.
KIND_PARAMETERS: dict[str, tuple[str, ...]] = {
    "flat": (),
    "hnsw": ("m", "ef_construction", "ef_search"),
    "ivf": ("nlist", "nprobe"),
}
ENCODING_PARAMETERS = ("encoding", "pq_m")
# FAISS's own spellings (IndexHNSW's M, efConstruction, efSearch) are accepted for ours.
FAISS_SPELLINGS = {"M": "m", "efConstruction": "ef_construction", "efSearch": "ef_search"}
# Chosen by measurement on 100k MiniLM vectors (see the module docstring); nlist has no fixed default.
DEFAULTS: dict[str, dict[str, int]] = {
    "hnsw": {"m": 32, "ef_construction": 40, "ef_search": 64},
    "ivf": {"nprobe": 64},
}
# faiss warns below 39 training points per k-means centroid and uses at most 256 (it subsamples above).
MIN_POINTS_PER_CENTROID = 39
MAX_POINTS_PER_CENTROID = 256
PQ_CENTROIDS = 256  # 8-bit codes: each PQ sub-quantizer is a k-means of 256 centroids
TRAINING_SEED = 0


def automatic_nlist(vectors: int) -> int:
    """IVF lists for `vectors` vectors when nlist is not given: 4*sqrt(n), the usual rule, but never so many
    that a list gets fewer than 39 training points (faiss's own minimum for a reliable k-means)."""
    return max(1, min(round(4 * math.sqrt(vectors)), vectors // MIN_POINTS_PER_CENTROID))


class IndexSpec(BaseModel):
    """One FAISS index type and its parameters; parameters that the kind does not have are refused.

    A parameter left out takes its kind's default (`DEFAULTS`); `nlist` left out is `automatic_nlist` of the
    number of vectors, and `pq_m` left out is dimension / 8 (8 dimensions per sub-quantizer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: IndexKind = "flat"
    m: int | None = Field(default=None, ge=2, description="HNSW: graph neighbours per node")
    ef_construction: int | None = Field(default=None, ge=1, description="HNSW: candidate list while building")
    ef_search: int | None = Field(default=None, ge=1, description="HNSW: candidate list while searching")
    nlist: int | None = Field(default=None, ge=1, description="IVF: inverted lists; None = automatic")
    nprobe: int | None = Field(default=None, ge=1, description="IVF: lists scanned per query")
    encoding: Encoding = Field(
        default="flat", description="stored vectors: float32, 8-bit scalar or PQ codes"
    )
    pq_m: int | None = Field(
        default=None, ge=1, description="PQ sub-quantizers (encoding=pq); None = dim / 8"
    )

    @model_validator(mode="before")
    @classmethod
    def _parameters_of_kind(cls, data: Any) -> Any:
        """Refuse another kind's parameters (a typo must not silently build a different index), then fill
        in the kind's defaults so a spec always says what it builds."""
        if not isinstance(data, dict):
            return data
        kind = data.get("kind", "flat")
        if kind not in KIND_PARAMETERS:
            return data  # the Literal reports it
        allowed = KIND_PARAMETERS[kind]
        for parameter, value in data.items():
            if value is None or parameter == "kind" or parameter in ENCODING_PARAMETERS:
                continue
            if parameter in cls.model_fields and parameter not in allowed:
                owner = next(name for name, names in KIND_PARAMETERS.items() if parameter in names)
                raise ValueError(
                    f"{parameter} is a parameter of {owner}, not of {kind}"
                    + (f" (which takes {', '.join(allowed)})" if allowed else " (which takes none)")
                )
        if data.get("pq_m") is not None and data.get("encoding", "flat") != "pq":
            raise ValueError("pq_m applies to encoding=pq only")
        defaults = dict(DEFAULTS.get(kind, {}))
        if kind == "ivf" and data.get("nlist") is not None:
            defaults["nprobe"] = min(defaults["nprobe"], data["nlist"])  # a few lists: scan them all
        return {**data, **{name: value for name, value in defaults.items() if data.get(name) is None}}

    @model_validator(mode="after")
    def _check_nprobe(self) -> IndexSpec:
        if self.nlist is not None and self.nprobe is not None and self.nprobe > self.nlist:
            raise ValueError(f"nprobe ({self.nprobe}) cannot exceed nlist ({self.nlist})")
        return self

    @classmethod
    def parse(cls, text: str) -> IndexSpec:
        """`kind` or `kind(name=value,...)`, e.g. `hnsw(m=32,ef_search=128)`; a ValueError says what is
        wrong."""
        match = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*", text)
        if not match:
            raise ValueError(f"index type {text!r}: expected KIND or KIND(name=value,...), e.g. hnsw(m=32)")
        kind, arguments = match.group(1).lower(), match.group(2)
        if kind not in KIND_PARAMETERS:
            raise ValueError(
                f"index type {text!r}: unknown kind {kind!r}; expected one of {', '.join(KIND_PARAMETERS)}"
            )
        parameters: dict[str, Any] = {"kind": kind}
        known = [name for name in cls.model_fields if name != "kind"]  # another kind's: the validator says so
        listed = arguments.split(",") if arguments and arguments.strip() else []  # `hnsw()` is `hnsw`
        for argument in (part.strip() for part in listed):
            name, equals, value = (piece.strip() for piece in argument.partition("="))
            name = FAISS_SPELLINGS.get(name, name)
            if not equals or not name or not value:
                raise ValueError(f"index type {text!r}: expected name=value, got {argument!r}")
            if name not in known:
                raise ValueError(
                    f"index type {text!r}: unknown parameter {name!r}; {kind} takes "
                    f"{', '.join((*KIND_PARAMETERS[kind], *ENCODING_PARAMETERS))}"
                )
            if name in parameters:
                raise ValueError(f"index type {text!r}: {name} is given twice")
            if name == "encoding":
                parameters[name] = value.lower()
            elif re.fullmatch(r"\d+", value):
                parameters[name] = int(value)
            else:
                raise ValueError(f"index type {text!r}: {name} must be a whole number, got {value!r}")
        try:
            return cls(**parameters)
        except ValidationError as error:
            reasons = "; ".join(
                (f"{'.'.join(map(str, e['loc']))}: " if e["loc"] else "")
                + e["msg"].removeprefix("Value error, ")
                for e in error.errors()
            )
            raise ValueError(f"index type {text!r}: {reasons}") from None

    @property
    def name(self) -> str:
        """Canonical text: parameters in a fixed order, defaults left out; `parse(name)` gives this spec."""
        defaults = {**DEFAULTS.get(self.kind, {}), "encoding": "flat"}
        parameters = [
            f"{name}={value}"
            for name in (*KIND_PARAMETERS[self.kind], *ENCODING_PARAMETERS)
            if (value := getattr(self, name)) is not None and value != defaults.get(name)
        ]
        return f"{self.kind}({','.join(parameters)})" if parameters else self.kind

    def __str__(self) -> str:
        return self.name


def reconstructs_exactly(spec: IndexSpec) -> bool:
    """Whether `reconstruct_n` gives back the vectors as added: float32 storage does (flat, HNSW-flat, and
    IVF-flat through its direct map); SQ8 and PQ codes give back approximations."""
    return spec.encoding == "flat"


def pq_subquantizers(spec: IndexSpec, dimension: int) -> int:
    """PQ's number of sub-quantizers for vectors of `dimension`; each one encodes dimension / pq_m of them."""
    pq_m = spec.pq_m or dimension // 8
    if pq_m < 1 or dimension % pq_m:
        divisors = [d for d in range(1, dimension + 1) if dimension % d == 0 and d <= 128]
        raise ValueError(
            f"index type {spec.name}: pq_m ({pq_m}) must divide the vector dimension ({dimension}); "
            f"choose one of {', '.join(map(str, divisors))}"
        )
    return pq_m


def _new_index(spec: IndexSpec, dimension: int, nlist: int) -> Any:  # -> faiss.Index
    import faiss

    inner_product = faiss.METRIC_INNER_PRODUCT
    sq8 = faiss.ScalarQuantizer.QT_8bit
    pq_m = pq_subquantizers(spec, dimension) if spec.encoding == "pq" else 0
    nbits = int(math.log2(PQ_CENTROIDS))
    if spec.kind == "hnsw":
        index = {
            "flat": lambda: faiss.IndexHNSWFlat(dimension, spec.m, inner_product),
            "sq8": lambda: faiss.IndexHNSWSQ(dimension, sq8, spec.m, inner_product),
            "pq": lambda: faiss.IndexHNSWPQ(dimension, pq_m, spec.m, nbits, inner_product),
        }[spec.encoding]()
        index.hnsw.efConstruction = spec.ef_construction
        return index
    if spec.kind == "ivf":
        quantizer = faiss.IndexFlatIP(dimension)  # the python wrapper keeps it alive with the index
        return {
            "flat": lambda: faiss.IndexIVFFlat(quantizer, dimension, nlist, inner_product),
            "sq8": lambda: faiss.IndexIVFScalarQuantizer(quantizer, dimension, nlist, sq8, inner_product),
            "pq": lambda: faiss.IndexIVFPQ(quantizer, dimension, nlist, pq_m, nbits, inner_product),
        }[spec.encoding]()
    return {
        "flat": lambda: faiss.IndexFlatIP(dimension),
        "sq8": lambda: faiss.IndexScalarQuantizer(dimension, sq8, inner_product),
        "pq": lambda: faiss.IndexPQ(dimension, pq_m, nbits, inner_product),
    }[spec.encoding]()


def training_sample(vectors: np.ndarray, spec: IndexSpec, nlist: int) -> np.ndarray:
    """What an index is trained on: every vector, or a seeded sample of as many as faiss's k-means would
    use (256 points per centroid: IVF lists, or PQ's 256 codewords), so a large build trains reproducibly
    and no slower than it needs to."""
    centroids = max(nlist if spec.kind == "ivf" else 1, PQ_CENTROIDS if spec.encoding == "pq" else 1)
    limit = MAX_POINTS_PER_CENTROID * centroids
    if len(vectors) <= limit:
        return vectors
    rows = np.sort(np.random.default_rng(TRAINING_SEED).choice(len(vectors), size=limit, replace=False))
    return np.ascontiguousarray(vectors[rows])


def build_faiss_index(vectors: np.ndarray, spec: IndexSpec) -> Any:  # -> faiss.Index
    """An index of `spec`'s type over `vectors` (L2-normalised, row i = id i), trained where the type needs it
    and with its search parameters set. They are stored in the index itself (HNSW efSearch and IVF nprobe
    are written by `faiss.write_index`), so a loaded index searches the same way; `configure_search` sets
    them again, e.g. to search one built index with other values."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or not len(vectors):
        raise ValueError(f"expected a non-empty (vectors, dimension) array, got shape {vectors.shape}")
    nlist = spec.nlist or automatic_nlist(len(vectors))
    if spec.kind == "ivf" and nlist > len(vectors):
        raise ValueError(
            f"index type {spec.name}: nlist ({nlist}) exceeds the number of vectors ({len(vectors)})"
        )
    index = _new_index(spec, vectors.shape[1], nlist)
    if not index.is_trained:
        index.train(training_sample(vectors, spec, nlist))
    index.add(vectors)
    if spec.kind == "ivf":
        index.make_direct_map()  # `reconstruct` of one id; also written with the index
    configure_search(index, spec)
    return index


def configure_search(index: Any, spec: IndexSpec) -> Any:  # -> faiss.Index
    """Set `spec`'s search parameters on `index` in place (HNSW efSearch; IVF nprobe, at most its nlist) and
    return it. Refuses an index of another kind, since the parameters would silently not apply."""
    import faiss

    concrete = faiss.downcast_index(index)  # a view: `index` keeps owning the C++ object
    if spec.kind == "hnsw":
        if not isinstance(concrete, faiss.IndexHNSW):
            raise ValueError(f"index type {spec.name} given a {type(concrete).__name__}, not an HNSW index")
        concrete.hnsw.efSearch = spec.ef_search
    elif spec.kind == "ivf":
        if not isinstance(concrete, faiss.IndexIVF):
            raise ValueError(f"index type {spec.name} given a {type(concrete).__name__}, not an IVF index")
        concrete.nprobe = min(spec.nprobe, concrete.nlist)
    return index


def index_bytes(index: Any) -> int:
    """The index's serialized size: what it takes on disk and, to within a little, in memory."""
    import faiss

    return int(faiss.serialize_index(index).nbytes)


def recall_vs_exact(approx_positions: np.ndarray, exact_positions: np.ndarray) -> float:
    """Mean over queries of |approximate top-k ∩ exact top-k| / |exact top-k|, ignoring -1 padding (a query
    whose exact search found nothing is left out; none at all gives 1.0: nothing was missed)."""
    approx, exact = np.asarray(approx_positions), np.asarray(exact_positions)
    if approx.ndim != 2 or exact.ndim != 2 or len(approx) != len(exact):
        raise ValueError(
            f"expected (queries, k) arrays for the same queries, got {approx.shape} and {exact.shape}"
        )
    recalls = []
    for found, wanted in zip(approx, exact, strict=True):
        wanted_set = set(wanted[wanted >= 0].tolist())
        if wanted_set:
            recalls.append(len(wanted_set & set(found[found >= 0].tolist())) / len(wanted_set))
    return float(np.mean(recalls)) if recalls else 1.0


@contextmanager
def faiss_threads(threads: int) -> Iterator[None]:
    """Run FAISS with `threads` OpenMP threads, so timings of different index types are comparable."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def timed_search(index: Any, queries: np.ndarray, k: int, batch_size: int = 1) -> tuple[np.ndarray, float]:
    """Top-k positions of every query and the mean seconds per query, searching `batch_size` queries per call
    (1: one query per request, as a RAG service searches). One untimed query first, so the timing leaves
    out first-touch page faults."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    index.search(queries[:1], k)
    positions = []
    started = time.perf_counter()
    for start in range(0, len(queries), batch_size):
        positions.append(index.search(queries[start : start + batch_size], k)[1])
    seconds = time.perf_counter() - started
    return np.concatenate(positions), seconds / len(queries)
