from typing import Annotated

from zenml import add_tags, get_step_context, log_metadata, step

from materializers.results_table import ResultsTableMaterializer
from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.notes import run_notes, run_warnings
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.results import CaseRecords, CellResults, ResultsTable, build_results
from ragbench.analysis.searched import SearchedRecords, searched_records
from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.inputs.knowledge_base import Corpus
from ragbench.inputs.references import ReferenceResolutions
from ragbench.report.run_page import run_report
from ragbench.retrieval.rerank_stage import RerankResult
from ragbench.retrieval.retrievers import row_step_ids
from ragbench.retrieval.rewrite import RewrittenQueries
from ragbench.retrieval.search import RetrievalResult
from ragbench.review.alignment import JudgeAlignment
from ragbench.review.labels import ReviewLabels
from ragbench.runs.compare import config_tag
from ragbench.runs.record import run_metadata
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.pairwise import PairwiseResult
from ragbench.scoring.registry import EvaluationConfig
from ragbench.stats.inference import StatisticsConfig
from steps.run_spend import spent_this_run
from steps.store import this_run


def reused_cells(cells: list[CellSpec]) -> set[str]:
    """Cells whose every step this run was served from ZenML's cache."""
    pipeline_run = this_run()
    cached = {name for name, step_run in pipeline_run.steps.items() if step_run.status.value == "cached"}
    return {cell.id for cell in cells if all(step_id in cached for step_id in row_step_ids(cell))}


@step(enable_cache=False, output_materializers={"results": ResultsTableMaterializer})
def build_results_table(
    cells: list[dict],
    corpus: Corpus,
    eval_suite: EvalSuite,
    retrievals: list[RetrievalResult],
    reranks: list[RerankResult],
    answer_sets: list[AnswerSet],
    judged: list[JudgeResult],
    pairwise: list[PairwiseResult],
    judge_cards: list[JudgeCard],
    race: RaceTrace | None,
    judge_alignments: list[JudgeAlignment],
    rewrites: list[RewrittenQueries],
    title: str,
    config_name: str,
    metrics_k: int,
    evaluation: dict,
    sample_size: int | None,
    seed: int,
    statistics: dict,
    references: ReferenceResolutions | None = None,
    review_labels: ReviewLabels | None = None,
    planned: dict | None = None,
) -> tuple[
    Annotated[ResultsTable, "results"],
    Annotated[CaseRecords, "case_records"],
    Annotated[SearchedRecords, "searched"],
]:
    """Never cached: it marks which cells came from the cache, sums what the run spent and logs the run's
    metadata every time. `planned`: the plan the run started with (`PlannedSpend`), shown beside it.
    `rewrites`: each query_rewrite mode's queries (its rewrite step's output), recorded with what every
    cell found for every case in `searched` (`ragbench.analysis.searched`)."""
    specs = [CellSpec.model_validate(cell) for cell in cells]
    settings = EvaluationConfig.model_validate(evaluation)
    scoring = settings.scoring(metrics_k)
    results = CellResults.collect(
        specs, retrievals, answer_sets, judged, eval_suite.cases, scoring.suites, reranks=reranks
    )
    table, records = build_results(
        results,
        title=title,
        scoring=scoring,
        notes=run_notes(results, sample_size, seed, eval_suite, raced=race is not None),
        warnings=run_warnings(results, corpus.skipped),
        reused_cells=reused_cells(specs),
        statistics=StatisticsConfig.model_validate(statistics),
        eval_suite=eval_suite,
        knowledge_base_fingerprint=corpus.fingerprint,
        pairwise=pairwise,
        judge_cards=judge_cards,
        race=race,
        judge_alignments=judge_alignments,
        references=references,
        labels_given=review_labels,
        label_correction=settings.label_correction,
    )
    spend = spent_this_run(planned)
    table = table.model_copy(update={"spend": spend, "notes": [*table.notes, *spend.lines()]})
    table = table.model_copy(update={"report_html": run_report(table, records, scoring.rubrics)})
    run_id = get_step_context().pipeline_run.id
    log_metadata(run_metadata(table), run_id_name_or_prefix=run_id)
    add_tags(tags=[config_tag(config_name)], run=run_id)  # `run.py compare` finds a config's runs by it
    return table, records, searched_records(results, eval_suite.cases, rewrites)
