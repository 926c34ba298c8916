"""Precomputed ColBERT reranking: MaxSim and offsets on small hand-made arrays, the refusals, and on real
chunks and questions the very rankings of RAGatouille's in-memory rerank (`ColbertReranker`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase
from ragbench.models.registry import COLBERT_STANDIN_NAME
from ragbench.retrieval.colbert_maxsim import (
    ColbertEncodings,
    PrecomputedColbertReranker,
    encode_chunk_set,
    maxsim_scores,
)
from ragbench.retrieval.rerank import ColbertReranker, RerankerChoice, resolve_reranker
from ragbench.retrieval.rerank_stage import rerank_candidates
from ragbench.retrieval.search import RetrievedCandidates, RetrievedChunk

pytestmark = [
    # colbert-ai's mixed-precision helpers warn on every CPU-only machine (pytest resets warning filters).
    pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning"),
]

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
EVAL_CASES = Path(__file__).resolve().parents[2] / "configs" / "eval_cases" / "python_reference.yaml"
CHOICE = RerankerChoice(requested="x", used="some/checkpoint", is_standin=False, reason="test")


def _encodings(
    per_chunk: list[list[list[float]]], lengths: list[int] | None = None, choice: RerankerChoice = CHOICE
) -> ColbertEncodings:
    """Encodings of hand-made token vectors; by default no chunk had tokens beyond those stored."""
    counts = [len(rows) for rows in per_chunk]
    return ColbertEncodings(
        choice=choice,
        chunk_set_fingerprint="fp",
        doc_maxlen=508,
        vectors=np.array([row for rows in per_chunk for row in rows], dtype=np.float32),
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        encoded_lengths=np.array(lengths or counts, dtype=np.int64),
    )


def _candidates(*positions: int) -> list[RetrievedChunk]:
    return [
        RetrievedChunk(
            position=p, source=f"s{p}", score=1.0 - rank / 10, text=f"chunk {p}", retrieval_rank=rank + 1
        )
        for rank, p in enumerate(positions)
    ]


# -- MaxSim and offsets ----------------------------------------------------------------------------

# Three chunks of 2-d tokens: chunk 0 has rows 0:2, chunk 1 row 2, chunk 2 rows 3:6.
CHUNKS = [
    [[1.0, 0.0], [0.0, 1.0]],
    [[-1.0, 0.0]],
    [[0.5, 0.5], [0.0, -1.0], [-1.0, 0.0]],
]
QUERY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)


def test_offsets_give_each_chunk_its_rows():
    encodings = _encodings(CHUNKS)
    assert encodings.offsets.tolist() == [0, 2, 3, 6]
    assert encodings.chunk_count == 3 and encodings.token_count == 6
    assert encodings.vectors[encodings.offsets[2] : encodings.offsets[3]].tolist() == CHUNKS[2]
    assert encodings.nbytes == 6 * 2 * 4 + 4 * 8 + 3 * 8


def test_maxsim_sums_the_best_dot_product_per_query_token():
    encodings = _encodings(CHUNKS, lengths=[3, 3, 3])  # all padded to 3 tokens: no floor for chunk 2
    # chunk 0: max(1, 0) + max(0, 1) + max(-1, 0) = 2; chunk 2: 0.5 + 0.5 + 1 = 2
    # chunk 1 (one token, padded to 3 with zero rows): max(-1, 0) + max(0, 0) + max(1, 0) = 1
    assert maxsim_scores(QUERY, encodings, [0, 1, 2]).tolist() == [2.0, 1.0, 2.0]
    # any order and repeats: each position is looked up, not assumed to be in storage order
    assert maxsim_scores(QUERY, encodings, [2, 0, 2]).tolist() == [2.0, 2.0, 2.0]
    assert maxsim_scores(QUERY, encodings, []).shape == (0,)


def test_zero_rows_of_the_padded_stack_floor_the_max_at_zero():
    """RAGatouille takes the max over a chunk's zero rows too: padding up to the longest candidate, and
    punctuation tokens (zero vectors). A query token with only negative dot products then scores 0."""
    query = np.array([[0.0, 1.0]], dtype=np.float32)  # every token below scores < 0 against it
    chunks = [[[0.0, -1.0]], [[0.0, -0.5], [-1.0, -0.25]]]
    no_zero_rows = _encodings(chunks, lengths=[1, 2])
    # chunk 0 is shorter than chunk 1 in the same call, so padded: floored at 0; chunk 1 is the longest
    # candidate and had no dropped tokens, so its max is its own best
    assert maxsim_scores(query, no_zero_rows, [0, 1]).tolist() == [0.0, -0.25]
    assert maxsim_scores(query, no_zero_rows, [0]).tolist() == [-1.0]  # alone, chunk 0 is the longest
    assert maxsim_scores(query, no_zero_rows, [1]).tolist() == [-0.25]
    # a dropped (punctuation) token is a zero row even in the longest candidate
    with_punctuation = _encodings(chunks, lengths=[1, 3])
    assert maxsim_scores(query, with_punctuation, [1]).tolist() == [0.0]
    assert maxsim_scores(query, with_punctuation, [0]).tolist() == [-1.0]


# -- refusals -----------------------------------------------------------------------------------------


def test_malformed_encodings_are_refused():
    good = _encodings(CHUNKS)
    fields = good.__dict__
    with pytest.raises(ValueError, match="start at 0"):
        ColbertEncodings(**{**fields, "offsets": np.array([1, 2, 3, 6])})
    with pytest.raises(ValueError, match="offsets end at 5"):
        ColbertEncodings(**{**fields, "offsets": np.array([0, 2, 3, 5])})
    with pytest.raises(ValueError, match="at least one token"):
        ColbertEncodings(**{**fields, "offsets": np.array([0, 2, 2, 6])})
    with pytest.raises(ValueError, match="encoded_lengths"):
        ColbertEncodings(**{**fields, "encoded_lengths": np.array([2, 1, 2])})
    with pytest.raises(ValueError, match="tokens, dim"):
        ColbertEncodings(**{**fields, "vectors": good.vectors.ravel()})


def test_positions_outside_the_encodings_are_refused():
    encodings = _encodings(CHUNKS)
    with pytest.raises(ValueError, match="position 3 is outside the encodings' 3 chunks"):
        maxsim_scores(QUERY, encodings, [0, 3])
    with pytest.raises(ValueError, match="position -1"):
        maxsim_scores(QUERY, encodings, [-1])


def test_encodings_of_another_chunk_set_or_checkpoint_are_refused():
    encodings = _encodings(CHUNKS)
    with pytest.raises(ValueError, match="chunk set fp, the candidates come from chunk set other"):
        PrecomputedColbertReranker(encodings, choice=CHOICE, chunk_set_fingerprint="other")
    other = CHOICE.model_copy(update={"used": "another/checkpoint"})
    with pytest.raises(ValueError, match="checkpoint 'some/checkpoint', reranking uses 'another/checkpoint'"):
        PrecomputedColbertReranker(encodings, choice=other, chunk_set_fingerprint="fp")
    # the same checkpoint reached by another request (e.g. a fallback) is the same encodings
    fallback = CHOICE.model_copy(update={"requested": "colbert-ir/colbertv2.0", "reason": "fell back"})
    assert (
        PrecomputedColbertReranker(encodings, choice=fallback, chunk_set_fingerprint="fp").choice == fallback
    )


# -- the reranker, with a fixed question encoding ------------------------------------------------------


@pytest.fixture
def fixed_reranker(monkeypatch: pytest.MonkeyPatch) -> PrecomputedColbertReranker:
    reranker = PrecomputedColbertReranker(
        _encodings(CHUNKS, lengths=[3, 3, 3]), choice=CHOICE, chunk_set_fingerprint="fp"
    )
    monkeypatch.setattr(reranker, "encode_question", lambda question: QUERY)
    return reranker


def test_rerank_orders_by_maxsim_and_keeps_the_first_stage_score(fixed_reranker: PrecomputedColbertReranker):
    candidates = _candidates(1, 2, 0)  # scores 1, 2, 2: the tie keeps the candidates' order
    out = fixed_reranker.rerank("q", candidates, 3)
    assert [c.position for c in out] == [2, 0, 1]
    assert [c.score for c in out] == [2.0, 2.0, 1.0]
    assert [c.retrieval_score for c in out] == [0.9, 0.8, 1.0]
    assert [c.retrieval_rank for c in out] == [2, 3, 1]
    assert out[0].text == "chunk 2" and candidates[1].score == 0.9  # copies; inputs untouched
    assert [c.position for c in fixed_reranker.rerank("q", candidates, 1)] == [2]
    assert len(fixed_reranker.rerank("q", candidates, 10)) == 3
    assert fixed_reranker.rerank("q", [], 3) == []
    with pytest.raises(ValueError, match="top_n"):
        fixed_reranker.rerank("q", candidates, 0)
    with pytest.raises(ValueError, match="position 7"):
        fixed_reranker.rerank("q", _candidates(0, 7), 2)


def test_the_rerank_stage_reorders_each_cases_candidates_with_it(fixed_reranker: PrecomputedColbertReranker):
    key = CellSpec(
        chunk_size=64, chunk_overlap=6, embedding_model=MINILM, top_k=2, reranker="some/checkpoint"
    )
    candidates = RetrievedCandidates(
        spec=key.upto("retrieve"),
        chunk_set_fingerprint="fp",
        by_case={"a": _candidates(1, 0), "b": _candidates(1)},
    )
    cases = [EvalCase(id="a", question="qa"), EvalCase(id="b", question="qb")]
    reranked = rerank_candidates(candidates, cases, fixed_reranker, spec=key.upto("rerank"), progress=False)
    assert {case: [c.position for c in chunks] for case, chunks in reranked.by_case.items()} == {
        "a": [0, 1],
        "b": [1],
    }
    assert fixed_reranker.label == "some/checkpoint" and not fixed_reranker.is_standin


# -- real ColBERT stand-in: identical to RAGatouille's rerank ------------------------------------------


@pytest.fixture(scope="module")
def real_setup() -> tuple[list[str], list[list[RetrievedChunk]], ColbertEncodings, RerankerChoice, str]:
    """Real chunks (the default knowledge base's first documents at 128 tokens), real questions, and the
    30 candidates per question the MiniLM retriever picks; the stand-in's encodings of every chunk."""
    pytest.importorskip("ragatouille")
    from ragbench.inputs.chunking import chunk_corpus
    from ragbench.inputs.eval_cases import load_eval_cases
    from ragbench.inputs.knowledge_base import KnowledgeBaseConfig, load_corpus
    from ragbench.retrieval.index import load_embedder

    chunks = chunk_corpus(load_corpus(KnowledgeBaseConfig(limit=4)), 128, 13, MINILM)
    assert 30 < len(chunks.chunks) < 100
    cases = load_eval_cases(EVAL_CASES)[:4]
    embedder = load_embedder(MINILM)
    similarities = (
        embedder.encode_queries([case.question for case in cases])
        @ embedder.encode_documents(chunks.texts, show_progress=False).T
    )
    candidate_lists = [
        [
            RetrievedChunk(
                position=int(p),
                source=chunks.chunks[p].source,
                score=float(row[p]),
                text=chunks.chunks[p].text,
            )
            for p in np.argsort(-row)[:30]
        ]
        for row in similarities
    ]
    choice = resolve_reranker(COLBERT_STANDIN_NAME)
    encodings = encode_chunk_set(choice, chunks, progress=False)
    return [case.question for case in cases], candidate_lists, encodings, choice, chunks.fingerprint


def test_rankings_are_identical_to_ragatouille_rerank(real_setup):
    questions, candidate_lists, encodings, choice, fingerprint = real_setup
    assert encodings.summary()["chunks"] == encodings.chunk_count and encodings.vectors.dtype == np.float32
    assert encodings.doc_maxlen == 508  # RAGatouille's in-memory limit for a 512-position BERT
    precomputed = PrecomputedColbertReranker(encodings, choice=choice, chunk_set_fingerprint=fingerprint)
    assert precomputed.is_standin and precomputed.label == "colbert-standin (UNTRAINED)"
    reference = ColbertReranker(choice=choice)
    for question, candidates in zip(questions, candidate_lists, strict=True):
        expected = reference.rerank(question, candidates, 30)
        got = precomputed.rerank(question, candidates, 30)
        assert [c.position for c in got] == [c.position for c in expected], question
        assert [c.score for c in got] == pytest.approx([c.score for c in expected], abs=1e-4)
        assert [c.retrieval_score for c in got] == [c.retrieval_score for c in expected]
        # No two of a question's 30 scores tie exactly, so the ranking is fully determined by the scores.
        assert len({c.score for c in expected}) == 30


def test_the_materializer_round_trip_keeps_every_array(real_setup):
    from zenml import load_artifact, save_artifact
    from zenml.client import Client

    from materializers.colbert_encodings import ColbertEncodingsMaterializer

    encodings = real_setup[2]
    name = f"colbert-encodings-{uuid.uuid4().hex[:8]}"
    version = save_artifact(encodings, name=name, materializer=ColbertEncodingsMaterializer)
    metadata = version.run_metadata
    assert (
        metadata["checkpoint"] == COLBERT_STANDIN_NAME and metadata["label"] == "colbert-standin (UNTRAINED)"
    )
    assert (metadata["chunks"], metadata["tokens"], metadata["bytes"]) == (
        encodings.chunk_count,
        encodings.token_count,
        encodings.nbytes,
    )
    assert any(
        v.uri.endswith("summary.html") for v in Client().get_artifact_version(version.id).visualizations
    )
    loaded = load_artifact(name)
    assert isinstance(loaded, ColbertEncodings)
    assert (loaded.choice, loaded.chunk_set_fingerprint, loaded.doc_maxlen) == (
        encodings.choice,
        encodings.chunk_set_fingerprint,
        encodings.doc_maxlen,
    )
    for field in ("vectors", "offsets", "encoded_lengths"):
        assert np.array_equal(getattr(loaded, field), getattr(encodings, field))
        assert getattr(loaded, field).dtype == getattr(encodings, field).dtype
