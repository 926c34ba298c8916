"""The rerank stage without a model: a fake reranker reorders every case's candidates, the reranked ranking is
measured like the first stage's, a cell's retrieval columns name the ranking they measure, and the answer
step reads the ranking of its cell's stage."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragbench.analysis.columns import is_results_column
from ragbench.analysis.reranking import rerank_gains
from ragbench.generation.answers import answer_cell
from ragbench.grid.cell import STAGES, CellSpec, distinct_at, reranker_numbers
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.prompts import DEFAULT_PROMPT
from ragbench.llm.types import LLMSettings
from ragbench.retrieval.measures import FIRST_STAGE_PREFIX, TOP_N_HIT, first_stage, is_retrieval_column
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.retrieval.rerank_stage import (
    ranking_case_values,
    ranking_columns,
    rerank_candidates,
    rerank_stage,
)
from ragbench.retrieval.search import (
    RetrievalResult,
    RetrievedCandidates,
    RetrievedChunk,
    SearchStats,
    retrieval_metrics,
)
from ragbench.scoring.metrics import ranking_metrics
from ragbench.scoring.metrics import retrieval_metrics as headline_retrieval_metrics
from ragbench.scoring.registry import Scoring
from ragbench.stats.inference import StatisticsConfig

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
CELL = CellSpec(
    chunk_size=128,
    chunk_overlap=13,
    embedding_model=MINILM,
    top_k=30,
    top_n=1,
    reranker="colbert-ir/colbertv2.0",
    reader=LLMSettings(model="openai/x"),
    prompt=DEFAULT_PROMPT,
    judge=LLMSettings(model="openai/judge"),
)
OFF = CELL.model_copy(update={"reranker": None})
CHOICE = RerankerChoice(
    requested="colbert-ir/colbertv2.0", used="some/checkpoint", is_standin=False, reason="test"
)
# Two cases whose expected source the first stage ranks last, one it ranks first, one without sources.
CASES = [
    EvalCase(id="a", question="qa", expected_sources=["a.md"]),
    EvalCase(id="b", question="qb", expected_sources=["b.md"]),
    EvalCase(id="c", question="qc", expected_sources=["c.md"]),
    EvalCase(id="d", question="qd"),
]
FIRST_STAGE = {
    "a": ["x.md", "y.md", "a.md"],
    "b": ["x.md", "y.md", "b.md"],
    "c": ["c.md", "x.md", "y.md"],
    "d": ["x.md", "y.md", "z.md"],
}


def chunks(sources: Sequence[str]) -> list[RetrievedChunk]:
    return [
        RetrievedChunk(
            position=i, source=source, score=1.0 - i / 10, text=f"about {source}", retrieval_rank=i + 1
        )
        for i, source in enumerate(sources)
    ]


def candidates(spec: CellSpec = CELL) -> RetrievedCandidates:
    return RetrievedCandidates(
        spec=spec.upto("retrieve"),
        chunk_set_fingerprint="fp",
        by_case={case: chunks(sources) for case, sources in FIRST_STAGE.items()},
    )


class ReverseReranker:
    """A fake reranker: the first stage's order reversed, each call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def rerank(self, question: str, chunks: Sequence[RetrievedChunk], top_n: int) -> list[RetrievedChunk]:
        self.calls.append((question, len(chunks), top_n))
        return [chunk.model_copy(update={"score": float(i)}) for i, chunk in enumerate(reversed(chunks))][
            :top_n
        ]


def first_stage_result(spec: CellSpec = CELL) -> RetrievalResult:
    with_sources = [case for case in CASES if case.expected_sources]
    return RetrievalResult(
        spec=spec.upto("retrieve"),
        chunk_count=9,
        index=None,
        lexical=None,
        search=SearchStats(queries=4, ms_per_query=1.0),
        retrieval=retrieval_metrics(with_sources, candidates(spec).for_cases(with_sources), 1, 30),
    )


# -- the stage's work ---------------------------------------------------------------------------------


def test_every_case_is_reranked_whole_not_only_the_answered_ones():
    fake = ReverseReranker()
    reranked = rerank_candidates(candidates(), CASES, fake, spec=CELL.upto("rerank"), progress=False)
    assert reranked.spec == CELL.upto("rerank") and reranked.chunk_set_fingerprint == "fp"
    assert fake.calls == [(case.question, 3, 3) for case in CASES]  # every case, every candidate kept
    assert [c.source for c in reranked.by_case["a"]] == ["a.md", "y.md", "x.md"]
    assert [c.retrieval_rank for c in reranked.by_case["a"]] == [3, 2, 1]  # where the first stage had it


def test_a_case_without_candidates_stays_empty_and_is_not_asked():
    empty = candidates().model_copy(update={"by_case": {**candidates().by_case, "d": []}})
    fake = ReverseReranker()
    reranked = rerank_candidates(empty, CASES, fake, spec=CELL.upto("rerank"), progress=False)
    assert reranked.by_case["d"] == [] and [call[0] for call in fake.calls] == ["qa", "qb", "qc"]


def test_the_stage_refuses_candidates_of_another_key_a_key_without_reranker_and_a_missing_case():
    fake = ReverseReranker()
    other = CELL.model_copy(update={"top_k": 10})
    with pytest.raises(ValueError, match="candidates of"):
        rerank_candidates(candidates(other), CASES, fake, spec=CELL.upto("rerank"))
    with pytest.raises(ValueError, match="no reranker"):
        rerank_candidates(candidates(), CASES, fake, spec=OFF.upto("rerank"))
    with pytest.raises(ValueError, match="no candidates for case"):
        rerank_candidates(
            candidates(), [*CASES, EvalCase(id="e", question="qe")], fake, spec=CELL.upto("rerank")
        )


def test_the_reranked_ranking_is_measured_like_the_first_stage_on_every_case_with_sources():
    reranked, result = rerank_stage(
        candidates(), CASES, ReverseReranker(), CHOICE, spec=CELL.upto("rerank"), metrics_k=1
    )
    assert result.spec == CELL.upto("rerank") and result.reranker == CHOICE
    assert result.cases == 4 and result.ms_per_query >= 0  # every case reranked ...
    assert result.retrieval.metrics.cases_used == 3  # ... measured where it names expected sources
    assert result.retrieval.metrics.means["mrr"] == pytest.approx(round((1 + 1 + 1 / 3) / 3, 4))
    assert first_stage_result().retrieval.metrics.means["mrr"] == pytest.approx(
        round((1 / 3 + 1 / 3 + 1) / 3, 4)
    )
    assert reranked.by_case["c"][0].source == "y.md"


# -- a cell's columns: the reader's ranking plain, the first stage's prefixed -------------------------------


def test_a_reranking_cells_plain_columns_measure_the_reranked_ranking_and_first_stage_ones_the_first():
    _, result = rerank_stage(
        candidates(), CASES, ReverseReranker(), CHOICE, spec=CELL.upto("rerank"), metrics_k=1
    )
    values = ranking_case_values(CELL, first_stage_result(), result)
    assert values["mrr"] == {"a": 1.0, "b": 1.0, "c": pytest.approx(1 / 3)}
    assert values[first_stage("mrr")] == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3), "c": 1.0}
    # top_n 1: the reader's one passage is an expected source in a and b after reranking, in c before
    assert values[TOP_N_HIT] == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert values[first_stage(TOP_N_HIT)] == {"a": 0.0, "b": 0.0, "c": 1.0}
    columns = ranking_columns(CELL, first_stage_result(), result)
    assert columns["mrr"] == pytest.approx(0.7778) and columns["first_stage_mrr"] == pytest.approx(0.5556)
    assert (
        columns[TOP_N_HIT] == pytest.approx(0.6667) and columns["rerank_ms_per_query"] == result.ms_per_query
    )
    ranking = [column for column in columns if is_retrieval_column(column)]
    assert ranking == [
        "mrr",
        "hit_rate@1",
        "failure_rate@1",
        "recall@1",
        "ndcg@10",
        TOP_N_HIT,
        *(
            FIRST_STAGE_PREFIX + c
            for c in ("mrr", "hit_rate@1", "failure_rate@1", "recall@1", "ndcg@10", TOP_N_HIT)
        ),
    ]
    assert list(columns)[:3] == ["chunks", "chunks_truncated", "retrieval_cases"]
    assert all(is_results_column(column) for column in columns)  # no custom metric may take one


def test_a_cell_without_reranker_reads_the_first_stage_so_both_rankings_are_equal():
    values = ranking_case_values(OFF, first_stage_result(OFF), None)
    plain = [column for column in values if not column.startswith(FIRST_STAGE_PREFIX)]
    assert plain and all(values[column] == values[first_stage(column)] for column in plain)
    assert "rerank_ms_per_query" not in ranking_columns(OFF, first_stage_result(OFF), None)
    retrieval_only = OFF.upto("retrieve")  # no reader, no top_n: no hit rate of the reader's passages
    assert TOP_N_HIT not in ranking_case_values(retrieval_only, first_stage_result(OFF), None)
    with pytest.raises(ValueError, match="exactly when the cell reranks"):
        ranking_case_values(CELL, first_stage_result(), None)


def test_the_registry_names_both_rankings_and_the_headline_stays_the_readers_ranking():
    columns = [metric.column for metric in ranking_metrics(5)]
    assert columns == [
        "mrr",
        "hit_rate@5",
        "failure_rate@5",
        "recall@5",
        "ndcg@10",
        "hit_rate@top_n",
        "first_stage_mrr",
        "first_stage_hit_rate@5",
        "first_stage_failure_rate@5",
        "first_stage_recall@5",
        "first_stage_ndcg@10",
        "first_stage_hit_rate@top_n",
    ]
    assert all(is_retrieval_column(column) for column in columns)
    assert not is_retrieval_column("first_stage_e2e_cases")
    labels = {metric.column: metric.label for metric in ranking_metrics(5)}
    assert (
        labels["first_stage_ndcg@10"] == "nDCG@10 (first stage)"
        and labels["hit_rate@top_n"] == "hit rate@top_n"
    )
    headline = [m.column for m in Scoring(rubrics=(), suites=(), metrics_k=5).headline()]
    assert headline == [m.column for m in headline_retrieval_metrics(5)] == ["mrr", "hit_rate@5"]


# -- what reranking changed, paired on the same cases ------------------------------------------------------


def test_gains_pair_the_two_rankings_of_a_reranking_cell_on_the_same_cases():
    _, result = rerank_stage(
        candidates(), CASES, ReverseReranker(), CHOICE, spec=CELL.upto("rerank"), metrics_k=1
    )
    case_values = {
        CELL.id: ranking_case_values(CELL, first_stage_result(), result),
        OFF.id: ranking_case_values(OFF, first_stage_result(OFF), None),
    }
    gains = rerank_gains([CELL, OFF], case_values, ranking_metrics(1), StatisticsConfig())
    assert {gain.cell for gain in gains} == {CELL.id}  # a cell without reranker changed nothing
    assert [gain.column for gain in gains] == [m.column for m in ranking_metrics(1)][:6]
    mrr = gains[0]
    assert (mrr.first_stage, mrr.reranked, mrr.cases) == (pytest.approx(0.5556), pytest.approx(0.7778), 3)
    assert mrr.difference == pytest.approx(0.2222) and mrr.low <= mrr.difference <= mrr.high
    assert mrr.text().startswith("MRR 0.556 -> 0.778 (+0.222 [")


# -- the grid: one rerank key per (retrieve key, reranker), none for off -----------------------------------


def test_only_reranking_cells_have_a_rerank_step_and_their_readers_read_it():
    cells = [
        CELL,
        OFF,
        CELL.model_copy(update={"top_n": 3}),
        CELL.model_copy(update={"reranker": "trained:x"}),
    ]
    keys = distinct_at(cells, "rerank")
    assert keys == [CELL.upto("rerank"), cells[3].upto("rerank")]  # top_n is the answer stage's
    assert STAGES.index("retrieve") < STAGES.index("rerank") < STAGES.index("answer")
    assert CELL.ranking_stage == "rerank" and OFF.ranking_stage == "retrieve"
    assert CELL.step_ids(lexical=False) == [
        CELL.step_id(stage) for stage in ("index", "retrieve", "rerank", "answer", "judge")
    ]
    assert OFF.step_ids(lexical=False) == [
        OFF.step_id(stage) for stage in ("index", "retrieve", "answer", "judge")
    ]
    assert CELL.upto("rerank").upto("retrieve") == OFF.upto("retrieve")
    assert reranker_numbers(cells) == {"colbert-ir/colbertv2.0": 0, "trained:x": 1}
    assert CELL.encodings_step_id(0) == f"colbert_0_{CELL.upto('chunk').id}"


def test_cell_and_answer_ids_are_those_they_had_before_the_rerank_stage():
    """Ids are the gate's history: moving the reranker axis to a stage of its own renames nothing (the ids
    below are those the same cells had before)."""
    reranking, off = CELL.model_copy(update={"top_n": 3}), OFF.model_copy(update={"top_n": 3})
    prefix = "cs128_o13_all_MiniLM_L6_v2_k30_n3"
    assert reranking.id == f"{prefix}_rr_colbertv2_0_openai_x_p_default_j_openai_judge_f564040e"
    assert reranking.step_id("answer") == f"answer_{prefix}_rr_colbertv2_0_openai_x_p_default_1c0440d1"
    assert off.id == f"{prefix}_rr_off_openai_x_p_default_j_openai_judge_215d8d64"
    assert off.step_id("answer") == f"answer_{prefix}_rr_off_openai_x_p_default_926af5f4"


# -- the answer step reads the ranking of its cell's stage and reranks nothing ------------------------------


def test_the_reader_gets_the_first_top_n_of_the_ranking_its_cell_reads(monkeypatch: pytest.MonkeyPatch):
    from contextlib import nullcontext

    from ragbench.generation import answers

    given: list[list[list[str]]] = []
    monkeypatch.setattr(answers, "LLMClient", lambda settings, cache_location=None: nullcontext())

    def fake_answers(client, cases, contexts, turn_passages, *, prompt, desc, search_again):
        given.append([[chunk.source for chunk in context] for context in contexts])
        return []

    monkeypatch.setattr(answers, "answer_conversations", fake_answers)
    reranked = rerank_candidates(
        candidates(), CASES, ReverseReranker(), spec=CELL.upto("rerank"), progress=False
    )
    assert answer_cell(CELL, reranked, CASES[:2], reranker=CHOICE).reranker == CHOICE
    assert answer_cell(OFF, candidates(OFF), CASES[:2], reranker=None).reranker is None
    assert given == [[["a.md"], ["b.md"]], [["x.md"], ["x.md"]]]  # top_n 1 of each ranking
    with pytest.raises(ValueError, match="candidates of"):
        answer_cell(CELL, candidates(), CASES, reranker=CHOICE)  # the first stage's, for a reranking cell
    with pytest.raises(ValueError, match="candidates of"):
        answer_cell(OFF, reranked, CASES, reranker=None)
    with pytest.raises(ValueError, match="exactly when the cell reranks"):
        answer_cell(CELL, reranked, CASES, reranker=None)
