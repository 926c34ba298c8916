"""What each cell searched for each case (`searched.jsonl`): built from the rewrite steps' queries and the
retrieval traces, one record per (cell, case) for every cell with a retrieval of its own, retrieval-only
cells included, with the ranked sources at the cell's ranking (and the first stage's when it reranks)."""

from __future__ import annotations

import json

from ragbench.analysis.results import CellResults
from ragbench.analysis.searched import searched_records
from ragbench.grid.cell import CellSpec
from ragbench.inputs.chunking import Chunk, ChunkSet
from ragbench.inputs.eval_cases import EvalCase
from ragbench.retrieval.lexical import build_lexical_index
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.retrieval.rerank_stage import rerank_stage
from ragbench.retrieval.retrievers import BM25, SearchContext
from ragbench.retrieval.rewrite import CaseQueries, RewriteStats, RewrittenQueries
from ragbench.retrieval.search import evaluate_retrieval, retrieve_candidates

CHUNKS = ChunkSet(
    chunk_size=64,
    chunk_overlap=0,
    tokenizer="t",
    corpus_fingerprint="f",
    chunks=[
        Chunk(text="pass is a null operation: when it runs, nothing happens.", source="pass", start_index=0),
        Chunk(
            text="get(key, default) returns the value for key if key is in the dictionary, else default.",
            source="typesmapping",
            start_index=0,
        ),
        Chunk(text="s.append(x) adds x to the end of the list s.", source="lists", start_index=0),
    ],
)
FOLLOW_UP = EvalCase.model_validate(
    {
        "id": "dict-get",
        "history": [
            {"role": "user", "content": "How do I look a key up in a dictionary?"},
            {"role": "assistant", "content": "Call its get method."},
        ],
        "question": "And what if I pass nothing?",
        "expected_sources": ["typesmapping"],
    }
)
SINGLE = EvalCase(id="append", question="How do I add x to the end of a list?", expected_sources=["lists"])
UNSOURCED = EvalCase(id="chat", question="What is a null operation?")
CASES = [FOLLOW_UP, SINGLE, UNSOURCED]
CONDENSED = "What does the dictionary get method return for a key when I pass no default?"
REWRITTEN = [
    CaseQueries(case_id="dict-get", queries=[CONDENSED], rewritten=True, calls=1),
    CaseQueries(case_id="append", queries=[SINGLE.question]),
    CaseQueries(case_id="chat", queries=[UNSOURCED.question], error="server error", calls=1),
]
CONDENSE = RewrittenQueries(
    mode="condense", queries=REWRITTEN, stats=RewriteStats.of("condense", "openai/fake", REWRITTEN)
)


class Reversed:
    """A reranker that turns the first-stage ranking around."""

    def rerank(self, question, chunks, top_n):
        return list(reversed(chunks))[:top_n]


def retrieved(mode: str | None):
    spec = CellSpec(chunk_size=64, retriever="bm25", top_k=3, query_rewrite=mode)
    context = SearchContext(CHUNKS, lexical=build_lexical_index(CHUNKS))
    queries = CONDENSE.queries if mode is not None else None
    candidates, search = retrieve_candidates(spec, BM25(), context, CASES, queries)
    result = evaluate_retrieval(
        candidates, search, CASES, 3, chunk_count=3, index=None, lexical=None,
        rewrite=CONDENSE.stats if mode is not None else None,
    )  # fmt: skip
    return spec, candidates, result


def test_every_retrieval_only_cell_records_what_it_searched_and_found_per_case():
    off, _, off_result = retrieved(None)
    condense, candidates, condense_result = retrieved("condense")
    choice = RerankerChoice(requested="r", used="r", is_standin=False, reason="test")
    rerank_key = condense.model_copy(update={"reranker": "r"})
    _, reranked = rerank_stage(candidates, CASES, Reversed(), choice, spec=rerank_key, metrics_k=3)
    results = CellResults(
        cells=[off, condense, rerank_key],
        retrievals={off.id: off_result, condense.id: condense_result},
        reranks={rerank_key.id: reranked},
        answer_sets={},
        judged={},
        keyword={},
    )

    records = searched_records(results, CASES, [CONDENSE]).records
    by = {(record.cell, record.case_id): record for record in records}
    assert len(records) == 9 and len(by) == 9  # one per (cell, case), in cell then case order
    assert [r.case_id for r in records[:3]] == ["dict-get", "append", "chat"]

    as_asked = by[(off.id, "dict-get")]
    assert as_asked.query_rewrite == "off" and as_asked.searched == [FOLLOW_UP.question]
    assert not as_asked.rewritten and as_asked.retrieved_sources[0] == "pass"

    condensed = by[(condense.id, "dict-get")]
    assert condensed.query_rewrite == "condense" and condensed.question == FOLLOW_UP.question
    assert condensed.searched == [CONDENSED] and condensed.rewritten and condensed.rewrite_error is None
    assert condensed.retrieved_sources[0] == "typesmapping" and condensed.first_relevant_rank == 1
    assert condensed.expected_sources == ["typesmapping"] and condensed.first_stage_sources is None
    single = by[(condense.id, "append")]  # a single question under condense: searched as asked, no call
    assert single.searched == [SINGLE.question] and not single.rewritten
    failed = by[(condense.id, "chat")]  # a failed call: searched as asked, and why
    assert failed.searched == [UNSOURCED.question] and failed.rewrite_error == "server error"
    assert failed.retrieved_sources is None and failed.expected_sources == []  # not measured

    reranking = by[(rerank_key.id, "dict-get")]  # the reranked ranking, the first stage's beside it
    assert reranking.searched == [CONDENSED] and len(condensed.retrieved_sources) >= 2
    assert reranking.first_stage_sources == condensed.retrieved_sources
    assert reranking.retrieved_sources == list(reversed(condensed.retrieved_sources))

    lines = [json.loads(line) for line in searched_records(results, CASES, [CONDENSE]).jsonl().splitlines()]
    assert lines[3] == {
        "cell": condense.id,
        "case_id": "dict-get",
        "question": FOLLOW_UP.question,
        "query_rewrite": "condense",
        "searched": [CONDENSED],
        "rewritten": True,
        "rewrite_error": None,
        "expected_sources": ["typesmapping"],
        "retrieved_sources": condensed.retrieved_sources,
        "first_relevant_rank": 1,
        "first_stage_sources": None,
    }


def test_an_external_system_cell_has_no_search_of_ours_to_record():
    external = CellSpec(external="sys", reader=None)
    results = CellResults(cells=[external], retrievals={}, answer_sets={}, judged={}, keyword={})
    assert searched_records(results, CASES, []).records == []
    assert searched_records(results, CASES, []).jsonl() == ""
