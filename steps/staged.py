"""The staged search's stage decisions: which retrieve keys, then which rerank keys among the survivors, are
kept for the answer stage, on a retrieval metric per case over the search cases only (no LLM call). Cached
like any step: a rerun decides the same from the same retrieval results."""

from typing import Annotated

from materializers.search import StageDecisionMaterializer
from ragbench.analysis.holdout import CaseSplit
from ragbench.analysis.staged import StageDecision, cells_within, keep_tie_set, tie_break_column
from ragbench.grid.axes import STAGES
from ragbench.retrieval.rerank_stage import RerankResult
from ragbench.retrieval.search import RetrievalResult
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig
from steps.caching import cached_step
from steps.identity import CellIdentity

STAGE_DECISION = "stage_decision"


@cached_step(output_materializers={STAGE_DECISION: StageDecisionMaterializer})
def decide_stage(
    split: CaseSplit,
    retrievals: list[RetrievalResult],
    reranks: list[RerankResult],
    cells: list[CellIdentity],
    stage: str,
    metric: MetricInfo,
    alpha: float,
    max_cells: int | None,
    statistics: StatisticsConfig,
) -> Annotated[StageDecision, STAGE_DECISION]:
    """The tie set of the best of the `cells`' keys at `stage` (retrieve or rerank) on `metric` over the
    search cases: a rerank key's values are its reranked ranking's, a key without a reranker its first
    stage's (the retrieve result of the same key). `max_cells` (the last retrieval-stage decision only):
    the kept keys taken best first while their cells fit, the others named as cut."""
    if stage not in STAGES[STAGES.index("retrieve") : STAGES.index("rerank") + 1]:
        raise ValueError(f"decide_stage decides the retrieve or the rerank stage, not {stage!r}")
    by_key: dict[str, list[str]] = {}
    for identity in cells:
        cell = identity.cell()
        by_key.setdefault(cell.upto(stage).id, []).append(cell.id)  # type: ignore[arg-type]
    rankings = {result.spec.id: result.retrieval for result in [*retrievals, *reranks]}
    if missing := [key for key in by_key if key not in rankings]:
        raise ValueError(f"the {stage} stage has no retrieval result for key(s) {missing}")
    search = set(split.search)

    def per_case(column: str) -> dict[str, dict[str, float]]:
        return {
            key: {
                case.case_id: case.values[column]
                for case in rankings[key].cases
                if case.case_id in search and column in case.values
            }
            for key in by_key
        }

    decision = keep_tie_set(
        per_case(metric.column),
        tie_break=(tie_break_column(metric.column), per_case(tie_break_column(metric.column))),
        stage=stage,
        metric=metric.column,
        higher_is_better=metric.higher_is_better,
        alpha=alpha,
        seed=statistics.seed,
        resamples=statistics.resamples,
    )
    _, decision = cells_within(by_key, decision, max_cells)  # its metadata: StageDecisionMaterializer
    return decision
