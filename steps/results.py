from typing import Annotated, TypeVar

from pydantic import BaseModel
from zenml import add_tags, get_step_context, log_metadata, step

from materializers.results_table import ResultsTableMaterializer
from ragbench.analysis.holdout import CaseSplit, Confirmation
from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.notes import run_notes, run_warnings
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.results import CaseRecords, CellResults, ResultsTable, build_results
from ragbench.analysis.results_inputs import ResultsInputs
from ragbench.analysis.search_findings import SearchFindings
from ragbench.analysis.searched import SearchedRecords, searched_records
from ragbench.analysis.staged import StageDecision
from ragbench.analysis.trials import ModelSearchTrace
from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.inputs.knowledge_base import Corpus
from ragbench.inputs.references import ReferenceResolutions
from ragbench.llm.budget import PlannedSpend
from ragbench.provenance import Checkout, CodeVersion
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


class ResultsSettings(BaseModel):
    """The results step's parameters: the run's cells and the config sections its table is made with.
    `planned`: the plan the run started with, shown beside what it spent; `checkout`: the client's git
    checkout the run was planned from (the code this step runs records its own release and packages)."""

    cells: list[CellSpec]
    title: str
    config_name: str
    metrics_k: int
    evaluation: EvaluationConfig
    sample_size: int | None
    seed: int
    statistics: StatisticsConfig
    planned: PlannedSpend | None = None
    checkout: Checkout = Checkout()


T = TypeVar("T")

# Every cell stage's result (one list, each kind picked out by its type) and every run-level finding.
StageResult = RetrievalResult | RerankResult | AnswerSet | JudgeResult
RunFinding = (
    PairwiseResult
    | JudgeCard
    | JudgeAlignment
    | RaceTrace
    | ModelSearchTrace
    | RewrittenQueries
    | ReferenceResolutions
    | CaseSplit
    | StageDecision
    | Confirmation
)


def of_type(items: list, kind: type[T]) -> list[T]:
    """The items of one kind, in the order they came."""
    return [item for item in items if isinstance(item, kind)]


def only_one(items: list, kind: type[T]) -> T | None:
    """The item of a kind a run has at most one of (a race's trace, its fetched references)."""
    found = of_type(items, kind)
    if len(found) > 1:
        raise ValueError(f"a run has at most one {kind.__name__}, the results step got {len(found)}")
    return found[0] if found else None


@step(enable_cache=False, output_materializers={"results": ResultsTableMaterializer})
def build_results_table(
    settings: ResultsSettings,
    corpus: Corpus,
    eval_suite: EvalSuite,
    stage_results: list[StageResult],
    findings: list[RunFinding],
    review_labels: ReviewLabels | None = None,
) -> tuple[
    Annotated[ResultsTable, "results"],
    Annotated[CaseRecords, "case_records"],
    Annotated[SearchedRecords, "searched"],
]:
    """Never cached: it marks which cells came from the cache, sums what the run spent and logs the run's
    metadata every time. `stage_results`: every retrieve, rerank, answer and judge step's result;
    `findings`: the pairwise comparisons, judge cards and alignments, a race's trace or a model-based
    search's trials, each query_rewrite
    mode's queries (recorded with what every cell found for every case in `searched`,
    `ragbench.analysis.searched`) and the fetched references. `review_labels`: a person's labels that
    correct the judge's numbers (an artifact version of its own, not a step's output)."""
    specs = settings.cells
    evaluation = settings.evaluation
    scoring = evaluation.scoring(settings.metrics_k)
    race = only_one(findings, RaceTrace)
    split = only_one(findings, CaseSplit)
    search = (
        SearchFindings.of(
            split,
            of_type(findings, StageDecision),
            only_one(findings, Confirmation),
            specs,
            trials=only_one(findings, ModelSearchTrace),
        )
        if split is not None
        else None
    )
    results = CellResults.collect(
        specs,
        of_type(stage_results, RetrievalResult),
        of_type(stage_results, AnswerSet),
        of_type(stage_results, JudgeResult),
        eval_suite.cases,
        scoring.suites,
        reranks=of_type(stage_results, RerankResult),
    )
    table, records = build_results(
        results,
        ResultsInputs(
            title=settings.title,
            scoring=scoring,
            notes=run_notes(
                results,
                settings.sample_size,
                settings.seed,
                eval_suite,
                raced=race is not None or (search is not None and search.trials is None),
                searched=search is not None and search.trials is not None,
            ),
            warnings=run_warnings(results, corpus.skipped),
            reused_cells=reused_cells(specs),
            statistics=settings.statistics,
            eval_suite=eval_suite,
            knowledge_base_fingerprint=corpus.fingerprint,
            pairwise=of_type(findings, PairwiseResult),
            judge_cards=of_type(findings, JudgeCard),
            race=race,
            search=search,
            judge_alignments=of_type(findings, JudgeAlignment),
            references=only_one(findings, ReferenceResolutions),
            labels_given=review_labels,
            label_correction=evaluation.label_correction,
        ),
    )
    spend = spent_this_run(settings.planned)
    code = CodeVersion.here(settings.checkout)  # read where the step runs: its packages, not the client's
    table = table.model_copy(update={"spend": spend, "code": code, "notes": [*table.notes, *spend.lines()]})
    table = table.model_copy(update={"report_html": run_report(table, records, scoring.rubrics)})
    run_id = get_step_context().pipeline_run.id
    log_metadata(run_metadata(table), run_id_name_or_prefix=run_id)
    add_tags(
        tags=[config_tag(settings.config_name)], run=run_id
    )  # `run.py compare` finds a config's runs by it
    return table, records, searched_records(results, eval_suite.cases, of_type(findings, RewrittenQueries))
