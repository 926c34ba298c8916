"""The retrieval metrics, declared once: each is a results column, how ir-measures (trec_eval) computes
it per case, and which way is better; the hit rate of the reader's passages (`TOP_N_HIT`); how a column
says which ranking it measures (`first_stage`); and the columns of what an index costs. The search and the
rerank stage compute every one, the results row and the per-case values carry them, and the metric
registry (`ragbench.scoring.metrics`) turns them into metrics: a new retrieval metric is one entry here."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class RetrievalMeasure:
    """One source-level retrieval metric. ``{k}`` in `column`, `label` and `measure` is
    `retrieval.metrics_k`."""

    column: str
    label: str
    measure: str  # an ir-measures measure name, e.g. "Success@{k}"
    higher_is_better: bool = True
    complement: bool = False  # the value is 1 - the measure (a miss rate from a hit rate)
    headline: bool = False  # among the scores a configuration is chosen by (table, gate, charts)
    binary: bool = False  # every case's value is 0 or 1 (a hit or a miss)

    def column_at(self, metrics_k: int) -> str:
        return self.column.format(k=metrics_k)

    def label_at(self, metrics_k: int) -> str:
        return self.label.format(k=metrics_k)

    def measure_at(self, metrics_k: int) -> str:
        return self.measure.format(k=metrics_k)

    @property
    def column_prefix(self) -> str:
        """What every column of this measure starts with, whatever k is."""
        return self.column.split("{", 1)[0]


RETRIEVAL_MEASURES: tuple[RetrievalMeasure, ...] = (
    RetrievalMeasure("mrr", "MRR", "RR", headline=True),  # first expected source, within top_k chunks
    RetrievalMeasure("hit_rate@{k}", "hit rate@{k}", "Success@{k}", headline=True, binary=True),
    RetrievalMeasure(
        "failure_rate@{k}",
        "failure rate@{k}",
        "Success@{k}",
        higher_is_better=False,
        complement=True,
        binary=True,
    ),
    RetrievalMeasure("recall@{k}", "recall@{k}", "R@{k}"),
    RetrievalMeasure("ndcg@10", "nDCG@10", "nDCG@10"),
)


# The share of cases with an expected source among the first top_n chunks of the ranking: the passages the
# reader is given (each cell's own top_n). Counted in chunks, as the reader gets them, not in distinct
# sources, so it comes from each case's first relevant chunk (`CaseRetrieval.first_relevant_chunk`), not
# from ir-measures; a cell without a reader has no top_n and no such column.
TOP_N_HIT = "hit_rate@top_n"
TOP_N_HIT_LABEL = "hit rate@top_n"

# A cell is measured at two rankings. The ranking the reader reads (after the rerank stage in a cell with a
# reranker, the first stage's own in one without: `CellSpec.ranking_stage`) keeps the plain column names,
# so whatever reads a column (the best-cell verdicts, the gate, compare, the charts) reads the ranking whose
# passages reach the reader; the first stage's ranking has the same columns with this prefix. Without a
# reranker the two are equal.
FIRST_STAGE_PREFIX = "first_stage_"


def first_stage(column: str) -> str:
    """The column of the first stage's ranking beside `column`, the ranking the reader reads."""
    return FIRST_STAGE_PREFIX + column


def retrieval_columns(metrics_k: int) -> list[str]:
    """Every ir-measures retrieval metric's column at `metrics_k`, in display order."""
    return [measure.column_at(metrics_k) for measure in RETRIEVAL_MEASURES]


def ranking_measures(metrics_k: int) -> list[tuple[str, str, bool]]:
    """(column, label, higher is better) of every metric a ranking gets at `metrics_k`, `TOP_N_HIT` last."""
    declared = [
        (m.column_at(metrics_k), m.label_at(metrics_k), m.higher_is_better) for m in RETRIEVAL_MEASURES
    ]
    return [*declared, (TOP_N_HIT, TOP_N_HIT_LABEL, True)]


def binary_column(column: str) -> bool:
    """Whether a ranking's `column` (`ranking_measures`) is a hit or miss per case, whatever k is."""
    return column == TOP_N_HIT or any(
        measure.binary and column.startswith(measure.column_prefix) for measure in RETRIEVAL_MEASURES
    )


def is_retrieval_column(column: str) -> bool:
    """Whether `column` is a retrieval metric's, at any k and either ranking."""
    column = column.removeprefix(FIRST_STAGE_PREFIX)
    return column == TOP_N_HIT or any(
        column == measure.column or ("{" in measure.column and column.startswith(measure.column_prefix))
        for measure in RETRIEVAL_MEASURES
    )


class IndexCost(BaseModel):
    """What a cell's index costs, as results columns: an approximate index's recall against the exact
    search, search times per query, build time and size."""

    recall_vs_exact: float | None
    search_ms_per_query: float | None
    exact_search_ms_per_query: float | None
    index_build_s: float
    index_mb: float


INDEX_COST_COLUMNS = tuple(IndexCost.model_fields)
