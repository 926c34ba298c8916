"""The retrieval metrics, declared once: each is a results column, how ir-measures (trec_eval) computes
it per case, and which way is better; and the columns of what an index costs. The search computes every
one, the results row and the per-case values carry them, and the metric registry
(`ragbench.scoring.metrics`) turns them into metrics: a new retrieval metric is one entry here."""

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
    RetrievalMeasure("hit_rate@{k}", "hit rate@{k}", "Success@{k}", headline=True),
    RetrievalMeasure(
        "failure_rate@{k}", "failure rate@{k}", "Success@{k}", higher_is_better=False, complement=True
    ),
    RetrievalMeasure("recall@{k}", "recall@{k}", "R@{k}"),
    RetrievalMeasure("ndcg@10", "nDCG@10", "nDCG@10"),
)


def retrieval_columns(metrics_k: int) -> list[str]:
    """Every retrieval metric's column at `metrics_k`, in display order."""
    return [measure.column_at(metrics_k) for measure in RETRIEVAL_MEASURES]


def is_retrieval_column(column: str) -> bool:
    """Whether `column` is a retrieval metric's, at any k."""
    return any(
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
