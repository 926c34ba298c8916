"""The query_rewrite axis: what each mode asks the rewriter (through the one client), what is searched,
how several queries are fused, what a failed call does, and that ids, the dry run and the results columns
account for it."""

from __future__ import annotations

import os

import pytest

from ragbench.analysis.completeness import stopped_by_budget
from ragbench.config.dry_run import plan_rows
from ragbench.config.expand import expand_grid, rewriter_settings
from ragbench.config.model import ConfigError, load_config
from ragbench.grid.cell import CellSpec
from ragbench.inputs.chunking import Chunk, ChunkSet
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.budget import BudgetConfig, SpendAccount, is_budget_refusal, spending
from ragbench.llm.prompts import REWRITE_PROMPTS
from ragbench.retrieval.lexical import build_lexical_index, reciprocal_rank_fusion
from ragbench.retrieval.retrievers import BM25, SearchContext
from ragbench.retrieval.rewrite import (
    QUERY_REWRITES,
    RewriteStats,
    parse_reply,
    rewrite_requests,
)
from ragbench.retrieval.rewriter import rewrite_queries
from ragbench.retrieval.search import evaluate_retrieval, retrieve_candidates

try:
    from tests.fake_openai_server import FakeOpenAIServer, Fault
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer, Fault  # type: ignore[no-redef]

CHUNKS = ChunkSet(
    chunk_size=64,
    chunk_overlap=0,
    tokenizer="t",
    corpus_fingerprint="f",
    chunks=[
        Chunk(text="pass is a null operation: when it runs, nothing happens.", source="pass", start_index=0),
        Chunk(
            text="get(key, default) returns the value for key if key is in the dictionary, else default, "
            "which is None unless given, so get never raises KeyError.",
            source="typesmapping",
            start_index=0,
        ),
        Chunk(text="s.append(x) adds x to the end of the list s.", source="typesseq-mutable", start_index=0),
    ],
)
FOLLOW_UP = EvalCase.model_validate(
    {
        "id": "dict-get",
        "history": [
            {"role": "user", "content": "How do I look a key up in a dictionary without an exception?"},
            {"role": "assistant", "content": "Call its get method."},
        ],
        "question": "And what comes back then, if that is all I pass?",
        "expected_sources": ["typesmapping"],
    }
)
SINGLE = EvalCase(
    id="append", question="How do I add x to the end of a list?", expected_sources=["typesseq-mutable"]
)
CONDENSED = "What does the dictionary get method return for a missing key without a default?"


def responder(request: dict) -> str:
    system = request["messages"][0]["content"]
    if system == REWRITE_PROMPTS["condense"].messages("q", "")[0]["content"]:
        return f'"{CONDENSED}"\n'
    if system.startswith("You write a short passage"):
        return "The dictionary get method returns None when the key is missing and no default is given."
    return "1. dictionary get missing key value\n2. get default None KeyError\n- list append end\n"


@pytest.fixture
def server():
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as fake:
        yield fake


def search(mode: str | None, cases, queries=None):
    spec = CellSpec(chunk_size=64, retriever="bm25", top_k=3, query_rewrite=mode)
    context = SearchContext(CHUNKS, lexical=build_lexical_index(CHUNKS))
    return retrieve_candidates(spec, BM25(), context, cases, queries, rrf_k=60)


def test_condense_rewrites_a_follow_up_only_and_finds_what_the_question_alone_misses(server, tmp_path):
    with server.client(tmp_path) as client:
        queries = rewrite_queries("condense", [FOLLOW_UP, SINGLE], client, count=3, desc="t")
    assert queries[0].queries == [CONDENSED] and queries[0].rewritten and queries[0].calls == 1
    assert queries[1].queries == [SINGLE.question] and not queries[1].rewritten and queries[1].calls == 0
    assert server.request_count == 1  # a single question is standalone already: no call
    prompt = server.requests[0]["messages"][1]["content"]
    assert "<conversation>" in prompt and "Call its get method." in prompt and FOLLOW_UP.question in prompt

    off, _ = search(None, [FOLLOW_UP])
    assert off.by_case["dict-get"][0].source == "pass"  # "pass" is the question's only telling word
    condensed, stats = search("condense", [FOLLOW_UP, SINGLE], queries)
    assert condensed.by_case["dict-get"][0].source == "typesmapping"
    assert condensed.searched == {"dict-get": [CONDENSED]}  # what was searched, recorded per case
    result = evaluate_retrieval(
        condensed, stats, [FOLLOW_UP, SINGLE], 3, chunk_count=3, index=None, lexical=None,
        rewrite=RewriteStats.of("condense", "openai/fake", queries),
    )  # fmt: skip
    traces = {trace.case_id: trace for trace in result.retrieval.cases}
    assert traces["dict-get"].searched == [CONDENSED] and traces["dict-get"].first_relevant_rank == 1
    assert traces["append"].searched is None
    assert result.columns()["rewrite_calls"] == 1 and result.columns()["rewrite_failures"] == 0


def test_hyde_searches_a_passage_and_multi_query_fuses_every_query_by_reciprocal_rank(server, tmp_path):
    with server.client(tmp_path) as client:
        hyde = rewrite_queries("hyde", [FOLLOW_UP, SINGLE], client, count=3, desc="t")
        multi = rewrite_queries("multi_query", [FOLLOW_UP], client, count=2, desc="t")
    assert all(q.calls == 1 and q.rewritten for q in hyde)  # hyde rewrites single questions too
    assert hyde[0].queries[0].startswith("The dictionary get method returns None")
    assert multi[0].queries == ["dictionary get missing key value", "get default None KeyError"]  # count 2
    fused, stats = search("multi_query", [FOLLOW_UP], multi)
    assert stats.queries == 2
    lexical = build_lexical_index(CHUNKS)
    rankings = [lexical.search([query], 3)[1][0].tolist() for query in multi[0].queries]
    expected = [position for position, _ in reciprocal_rank_fusion(rankings, k=60)[:3]]
    assert [chunk.position for chunk in fused.by_case["dict-get"]] == expected
    assert fused.by_case["dict-get"][0].source == "typesmapping"


def test_a_failed_rewrite_searches_the_question_as_is_and_is_counted(server, tmp_path):
    server.inject(Fault("server_error"))
    with server.client(tmp_path, max_retries=0) as client:
        (queries,) = rewrite_queries("condense", [FOLLOW_UP], client, count=3, desc="t")
    assert queries.queries == [FOLLOW_UP.question] and not queries.rewritten and queries.error
    assert RewriteStats.of("condense", "openai/fake", [queries]).failures == 1


@pytest.mark.parametrize(
    ("mode", "reply", "parsed"),
    [
        ("condense", '\n  "What is X?"  \nextra line', ["What is X?"]),
        ("hyde", "A passage\n over two lines.", ["A passage over two lines."]),
        ("multi_query", "1) a\n* b\n\na\n- c\nd", ["a", "b", "c"]),
        ("condense", "   \n", []),
    ],
)
def test_replies_are_parsed_into_queries(mode, reply, parsed):
    assert parse_reply(mode, reply, 3) == parsed


def test_off_keeps_every_id_and_the_axis_names_its_cells(tmp_path):
    default = load_config(None)
    both = load_config(None, ["grid.query_rewrite=[off, condense]"])  # YAML's bare off is read as off
    ids = [cell.id for cell in expand_grid(default)]
    assert [cell.id for cell in expand_grid(both) if cell.query_rewrite is None] == ids
    rewriting = [cell for cell in expand_grid(both) if cell.query_rewrite == "condense"]
    assert len(rewriting) == len(ids) and all("_qr_condense_" in cell.id for cell in rewriting)
    assert expand_grid(default)[0].axis_columns()["query_rewrite"] == "off"
    assert rewriter_settings(default) is None
    assert rewriter_settings(both).model == default.grid.reader[0]  # default: the grid's first reader
    set_rewriter = load_config(None, ["grid.query_rewrite=hyde", "retrieval.rewriter=openai/gpt-4o-mini"])
    assert rewriter_settings(set_rewriter).model == "openai/gpt-4o-mini"
    with pytest.raises(ConfigError, match="query_rewrite"):
        load_config(None, ["grid.query_rewrite=[paraphrase]"])
    assert set(REWRITE_PROMPTS) == set(QUERY_REWRITES) - {"off"}


def test_the_dry_run_counts_the_rewrite_calls_once_per_retrieve_key():
    config = load_config(
        None,
        [
            "grid.query_rewrite=[off, condense, multi_query]",
            "grid.chunk_size=[256]",
            "grid.retriever=[dense]",
        ],
    )
    cases = [FOLLOW_UP, SINGLE]
    cells = expand_grid(config)
    rows = plan_rows(config, cases, set(), cells=cells)
    by_mode = {}
    for cell, row in zip(cells, rows, strict=True):
        by_mode.setdefault(cell.query_rewrite, []).append(row.get("rewrite_calls"))
    assert by_mode[None] == [None]
    assert by_mode["condense"] == [1]  # the follow-up only
    assert by_mode["multi_query"] == [2]  # every case
    assert len(rewrite_requests("hyde", cases, 3)) == 2
    plain = {row["cell"]: row["llm_calls"] for row in rows}
    assert len(set(plain.values())) == 3  # the rewrite calls are in each cell's total


def test_a_rewrite_the_spend_cap_refused_is_counted_apart_and_makes_its_cell_incomplete(server, tmp_path):
    """A refused rewrite leaves its case searched as asked, so the cell's retrieval is not the rewrite's:
    the cell is incomplete (its gate fails closed) and the rerun with a higher cap asks again."""
    budget = SpendAccount.new(BudgetConfig(max_calls=1), tmp_path / "cache")
    second = FOLLOW_UP.model_copy(update={"id": "dict-get-again", "question": "And with a default?"})
    with spending(budget), server.client(tmp_path / "cache") as client:
        queries = rewrite_queries("condense", [FOLLOW_UP, second], client, count=3, desc="t")
    # the two run concurrently: whichever is charged first is sent, the other refused
    assert sorted(is_budget_refusal(q.error) for q in queries) == [False, True] and server.request_count == 1
    stats = RewriteStats.of("condense", "openai/fake", queries)
    assert (stats.failures, stats.refused) == (1, 1)
    assert (
        stopped_by_budget(
            CellSpec(chunk_size=64, retriever="bm25", top_k=3, query_rewrite="condense"), stats, None, None
        )
        == "1 query rewrite(s)"
    )
    failed_not_refused = stats.model_copy(update={"refused": 0})
    assert (
        stopped_by_budget(
            CellSpec(chunk_size=64, retriever="bm25", top_k=3, query_rewrite="condense"),
            failed_not_refused,
            None,
            None,
        )
        == ""
    )
