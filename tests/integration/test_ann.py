"""FAISS index types as data: specs parse, validate and round-trip by name; every kind and encoding builds a
cosine index that finds what exact search finds, keeps its search parameters through write/read, and gives
vectors back (exactly where the storage is float32)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import faiss
import numpy as np
import pytest

from ragbench.retrieval.ann import (
    DEFAULTS,
    IndexSpec,
    automatic_nlist,
    build_faiss_index,
    configure_search,
    faiss_threads,
    index_bytes,
    recall_vs_exact,
    reconstructs_exactly,
    timed_search,
    training_sample,
)
from tests.conftest import MINILM

DIMENSION = 32


def unit(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


@pytest.fixture(scope="module")
def clustered() -> tuple[np.ndarray, np.ndarray]:
    """3000 seeded unit vectors around 30 centres (so IVF lists mean something) and 50 queries near them."""
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(30, DIMENSION))
    vectors = unit(centres[rng.integers(0, 30, 3000)] + 0.35 * rng.normal(size=(3000, DIMENSION)))
    queries = unit(vectors[rng.choice(3000, 50, replace=False)] + 0.1 * rng.normal(size=(50, DIMENSION)))
    return vectors, queries


@pytest.fixture(scope="module")
def built(clustered) -> Callable[[str], Any]:
    """Each spec's index over the clustered vectors, built once for the tests that only read it."""
    vectors, _ = clustered
    return cache(lambda text: build_faiss_index(vectors, IndexSpec.parse(text)))


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    return np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :k]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("flat", "flat"),
        ("hnsw", "hnsw"),
        ("ivf", "ivf"),
        ("hnsw()", "hnsw"),
        (" HNSW ( m = 16 ) ", "hnsw(m=16)"),
        ("hnsw(ef_search=128,m=32)", "hnsw(ef_search=128)"),  # m=32 is the default: left out
        ("ivf(nlist=1024,nprobe=64,encoding=sq8)", "ivf(nlist=1024,encoding=sq8)"),  # nprobe=64: default
        ("ivf(nlist=1024,nprobe=16,encoding=sq8)", "ivf(nlist=1024,nprobe=16,encoding=sq8)"),
        ("ivf(encoding=PQ,pq_m=8,nprobe=4)", "ivf(nprobe=4,encoding=pq,pq_m=8)"),
        ("flat(encoding=sq8)", "flat(encoding=sq8)"),
        ("flat(encoding=flat)", "flat"),
    ],
)
def test_a_spec_parses_to_its_canonical_name_which_round_trips(text: str, name: str) -> None:
    spec = IndexSpec.parse(text)
    assert spec.name == name == str(spec)
    assert IndexSpec.parse(spec.name) == spec
    assert IndexSpec(**spec.model_dump()) == spec


def test_a_kind_s_defaults_are_filled_in_and_others_stay_unset() -> None:
    hnsw, ivf, flat = IndexSpec.parse("hnsw"), IndexSpec.parse("ivf"), IndexSpec.parse("flat")
    assert (hnsw.m, hnsw.ef_construction, hnsw.ef_search) == tuple(DEFAULTS["hnsw"].values())
    assert hnsw.nlist is hnsw.nprobe is None
    assert (ivf.nlist, ivf.nprobe, ivf.m) == (None, DEFAULTS["ivf"]["nprobe"], None)
    assert flat == IndexSpec() and flat.encoding == "flat"
    with pytest.raises(ValueError, match="frozen"):
        hnsw.m = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("annoy", "unknown kind 'annoy'; expected one of flat, hnsw, ivf"),
        ("hnsw(m=16", r"expected KIND or KIND\(name=value,...\)"),
        ("hnsw(nlist=64)", r"nlist is a parameter of ivf, not of hnsw \(which takes m, ef_construction"),
        ("flat(m=16)", r"m is a parameter of hnsw, not of flat \(which takes none\)"),
        ("ivf(ef_search=8)", "ef_search is a parameter of hnsw, not of ivf"),
        ("hnsw(efsearch=8)", "unknown parameter 'efsearch'; hnsw takes m, ef_construction, ef_search"),
        ("hnsw(m=1)", "m: Input should be greater than or equal to 2"),
        ("ivf(nprobe=0)", "nprobe: Input should be greater than or equal to 1"),
        ("hnsw(m=big)", "m must be a whole number, got 'big'"),
        ("hnsw(m=-3)", "m must be a whole number"),
        ("hnsw(m)", "expected name=value, got 'm'"),
        ("hnsw(m=8,)", "expected name=value, got ''"),
        ("hnsw(m=8,m=16)", "m is given twice"),
        ("ivf(nlist=8,nprobe=16)", r"nprobe \(16\) cannot exceed nlist \(8\)"),
        ("ivf(encoding=sq4)", "encoding: Input should be 'flat', 'sq8' or 'pq'"),
        ("hnsw(pq_m=8)", "pq_m applies to encoding=pq only"),
    ],
)
def test_a_bad_spec_is_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        IndexSpec.parse(text)
    assert str(raised.value).startswith(f"index type {text!r}: ")


def test_another_kind_s_parameter_is_refused_when_constructed_directly_too() -> None:
    with pytest.raises(ValueError, match="m is a parameter of hnsw, not of ivf"):
        IndexSpec(kind="ivf", m=16)
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        IndexSpec(kind="ivf", probes=16)  # type: ignore[call-arg]


@pytest.mark.parametrize(("vectors", "nlist"), [(1, 1), (38, 1), (1000, 25), (10_000, 256), (100_000, 1265)])
def test_automatic_nlist_is_4_sqrt_n_with_at_least_39_training_points_per_list(
    vectors: int, nlist: int
) -> None:
    assert automatic_nlist(vectors) == nlist


SPECS = [
    "flat",
    "hnsw",
    "ivf",
    "hnsw(m=16,ef_construction=40,ef_search=32)",
    "ivf(nlist=40,nprobe=8)",
    "flat(encoding=sq8)",
    "hnsw(encoding=sq8)",
    "ivf(encoding=sq8)",
    "flat(encoding=pq)",
    "hnsw(encoding=pq,pq_m=8)",
    "ivf(encoding=pq)",
]
INDEX_TYPES = {
    ("flat", "flat"): faiss.IndexFlatIP,
    ("flat", "sq8"): faiss.IndexScalarQuantizer,
    ("flat", "pq"): faiss.IndexPQ,
    ("hnsw", "flat"): faiss.IndexHNSWFlat,
    ("hnsw", "sq8"): faiss.IndexHNSWSQ,
    ("hnsw", "pq"): faiss.IndexHNSWPQ,
    ("ivf", "flat"): faiss.IndexIVFFlat,
    ("ivf", "sq8"): faiss.IndexIVFScalarQuantizer,
    ("ivf", "pq"): faiss.IndexIVFPQ,
}


@pytest.mark.parametrize("text", SPECS)
def test_every_kind_and_encoding_builds_a_cosine_index_that_finds_the_exact_neighbours(
    text, clustered
) -> None:
    vectors, queries = clustered
    spec = IndexSpec.parse(text)
    index = build_faiss_index(vectors, spec)
    assert isinstance(index, INDEX_TYPES[spec.kind, spec.encoding])
    assert index.ntotal == len(vectors) and index.d == DIMENSION
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT
    scores, positions = index.search(queries, 10)
    recall = recall_vs_exact(positions, exact_top(vectors, queries))
    # Float32 storage loses nothing but what the graph or the lists skip; codes lose more, PQ most.
    assert recall >= {"flat": 0.95, "sq8": 0.8, "pq": 0.3}[spec.encoding]
    if spec.encoding == "flat":  # scores are cosines: inner products of the unit vectors
        expected = np.take_along_axis(queries @ vectors.T, positions, axis=1)
        np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert 0 < index_bytes(index) == len(faiss.serialize_index(index))


def test_flat_is_exact(clustered) -> None:
    vectors, queries = clustered
    _, positions = build_faiss_index(vectors, IndexSpec()).search(queries, 10)
    assert recall_vs_exact(positions, exact_top(vectors, queries)) == 1.0


def test_hnsw_and_ivf_search_less_than_everything_yet_recall_is_high(clustered) -> None:
    """The parameters reach faiss: a wider search finds at least as much, and the defaults are good here."""
    vectors, queries = clustered
    exact = exact_top(vectors, queries)
    narrow = build_faiss_index(vectors, IndexSpec.parse("ivf(nlist=64,nprobe=1)"))
    wide = configure_search(faiss.clone_index(narrow), IndexSpec.parse("ivf(nlist=64,nprobe=16)"))
    assert (narrow.nlist, narrow.nprobe, wide.nprobe) == (64, 1, 16)
    assert recall_vs_exact(narrow.search(queries, 10)[1], exact) < recall_vs_exact(
        wide.search(queries, 10)[1], exact
    )
    hnsw = build_faiss_index(vectors, IndexSpec.parse("hnsw(m=8,ef_search=4)"))
    assert (hnsw.hnsw.efSearch, hnsw.hnsw.efConstruction) == (4, DEFAULTS["hnsw"]["ef_construction"])
    for text in ("hnsw", "ivf"):
        _, positions = build_faiss_index(vectors, IndexSpec.parse(text)).search(queries, 10)
        assert recall_vs_exact(positions, exact) >= 0.95


def test_nprobe_is_capped_at_an_automatic_nlist_and_an_nlist_above_the_vectors_is_refused(clustered) -> None:
    vectors, _ = clustered
    index = build_faiss_index(vectors[:200], IndexSpec.parse("ivf(nprobe=64)"))
    assert index.nlist == automatic_nlist(200) == 5 and index.nprobe == 5
    with pytest.raises(ValueError, match=r"nlist \(500\) exceeds the number of vectors \(200\)"):
        build_faiss_index(vectors[:200], IndexSpec.parse("ivf(nlist=500)"))
    with pytest.raises(ValueError, match="non-empty"):
        build_faiss_index(vectors[:0], IndexSpec())


def test_pq_m_must_divide_the_dimension_and_defaults_to_dimension_over_8(clustered) -> None:
    vectors, _ = clustered
    with pytest.raises(
        ValueError, match=r"pq_m \(5\) must divide the vector dimension \(32\); choose one of 1, 2, 4"
    ):
        build_faiss_index(vectors, IndexSpec.parse("ivf(encoding=pq,pq_m=5)"))
    assert build_faiss_index(vectors, IndexSpec.parse("flat(encoding=pq)")).pq.M == DIMENSION // 8


@pytest.mark.parametrize("text", SPECS)
def test_reconstruct_gives_the_vectors_back_exactly_where_the_spec_says_so(text, clustered, built) -> None:
    vectors, _ = clustered
    spec = IndexSpec.parse(text)
    index = built(text)
    back = index.reconstruct_n(0, index.ntotal)
    assert back.shape == vectors.shape
    one = index.reconstruct(123)  # IVF: through the direct map
    if reconstructs_exactly(spec):
        np.testing.assert_array_equal(back, vectors)
        np.testing.assert_array_equal(one, vectors[123])
    else:
        assert not np.array_equal(back, vectors)
        assert np.abs(back - vectors).mean() < 0.1  # an approximation, not garbage


@pytest.mark.parametrize(
    "text", ["hnsw(ef_search=24)", "ivf(nlist=50,nprobe=7)", "ivf(encoding=sq8,nprobe=3)"]
)
def test_search_parameters_and_results_survive_write_and_read(text, clustered, tmp_path) -> None:
    vectors, queries = clustered
    spec = IndexSpec.parse(text)
    built = build_faiss_index(vectors, spec)
    faiss.write_index(built, str(tmp_path / "index.faiss"))
    loaded = faiss.read_index(str(tmp_path / "index.faiss"))
    if spec.kind == "hnsw":
        assert loaded.hnsw.efSearch == spec.ef_search
    else:
        assert (loaded.nprobe, loaded.nlist) == (spec.nprobe, built.nlist)
        np.testing.assert_array_equal(loaded.reconstruct(9), built.reconstruct(9))  # direct map kept
    np.testing.assert_array_equal(loaded.search(queries, 10)[1], built.search(queries, 10)[1])


def test_configure_search_refuses_an_index_of_another_kind(clustered) -> None:
    vectors, _ = clustered
    ivf = build_faiss_index(vectors, IndexSpec.parse("ivf"))
    with pytest.raises(ValueError, match=r"index type hnsw given a IndexIVFFlat, not an HNSW index"):
        configure_search(ivf, IndexSpec.parse("hnsw"))
    with pytest.raises(ValueError, match="not an IVF index"):
        configure_search(build_faiss_index(vectors, IndexSpec()), IndexSpec.parse("ivf"))
    assert configure_search(ivf, IndexSpec()) is not None  # flat has nothing to set


def test_training_uses_a_seeded_sample_of_at_most_256_points_per_centroid(clustered) -> None:
    vectors, _ = clustered
    spec = IndexSpec.parse("ivf(nlist=4)")
    sample = training_sample(vectors, spec, nlist=4)
    assert len(sample) == 1024
    np.testing.assert_array_equal(sample, training_sample(vectors, spec, nlist=4))
    assert (
        training_sample(vectors, IndexSpec.parse("flat(encoding=pq)"), nlist=0) is vectors
    )  # 256 * 256 > 3000


def test_recall_vs_exact_is_the_mean_share_of_the_exact_top_k_found() -> None:
    exact = np.array([[1, 2, 3, 4], [5, 6, -1, -1], [-1, -1, -1, -1]])
    approx = np.array([[4, 3, 9, 8], [6, 7, 5, -1], [0, 1, 2, 3]])
    # 2 of 4, then 2 of 2 (padding ignored on both sides); the query the exact search found nothing for
    # is left out.
    assert recall_vs_exact(approx, exact) == pytest.approx((0.5 + 1.0) / 2)
    assert recall_vs_exact(exact, exact) == 1.0
    assert recall_vs_exact(np.full((2, 3), -1), np.array([[1, 2, 3], [4, 5, 6]])) == 0.0
    assert recall_vs_exact(np.full((1, 3), -1), np.full((1, 3), -1)) == 1.0
    with pytest.raises(ValueError, match="same queries"):
        recall_vs_exact(approx[:2], exact)


def test_timed_search_finds_what_one_batch_finds_and_times_per_query(clustered) -> None:
    vectors, queries = clustered
    index = build_faiss_index(vectors, IndexSpec.parse("hnsw"))
    session_threads = faiss.omp_get_max_threads()  # one in an xdist worker (tests/conftest.py caps them)
    faiss.omp_set_num_threads(2)  # a count other than 1, so restoring it is seen whatever the session's is
    try:
        with faiss_threads(1):
            assert faiss.omp_get_max_threads() == 1
            single, seconds = timed_search(index, queries, 10)
            batched, _ = timed_search(index, queries, 10, batch_size=16)
        assert faiss.omp_get_max_threads() == 2  # restored
    finally:
        faiss.omp_set_num_threads(session_threads)
    np.testing.assert_array_equal(single, index.search(queries, 10)[1])
    np.testing.assert_array_equal(batched, single)
    assert 0 < seconds < 1


def test_hnsw_and_ivf_find_what_exact_search_finds_on_real_minilm_vectors() -> None:
    """Real sentence vectors of real chunks (the shipped knowledge base), real questions-like queries."""
    from ragbench.inputs.chunking import chunk_corpus
    from ragbench.inputs.knowledge_base import KnowledgeBaseConfig, load_corpus
    from ragbench.retrieval.index import load_embedder

    corpus = load_corpus(KnowledgeBaseConfig(kind="pydoc_topics", limit=12))
    chunks = chunk_corpus(corpus, chunk_size=128, chunk_overlap=13, tokenizer_name=MINILM).chunks
    embedder = load_embedder(MINILM)
    vectors = embedder.encode_documents([chunk.text for chunk in chunks[:-20]], show_progress=False)
    queries = embedder.encode_queries([" ".join(chunk.text.split()[:20]) for chunk in chunks[-20:]])
    assert len(vectors) >= 80
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    exact = exact_top(vectors, queries)
    for text in ("flat", "hnsw", "ivf(nlist=4,nprobe=2)", "ivf(encoding=sq8)"):
        spec = IndexSpec.parse(text)
        index = build_faiss_index(vectors, spec)
        _, positions = index.search(queries, 10)
        assert recall_vs_exact(positions, exact) >= 0.9, text
        if reconstructs_exactly(spec):
            np.testing.assert_array_equal(index.reconstruct_n(0, index.ntotal), vectors)
