"""The staged search (`search: {strategy: staged}`) as a dynamic pipeline under the benchmark's name.

Retrieval and reranking run for every cell on every case, as in any run (no LLM call). The seeded case
order is cut into the search's cases and the held-out tail (`split_cases`). On the search cases only: the
retrieve stage keeps the tie set of its best key on the retrieval metric (`decide_stage`), then, where the
grid reranks, the rerank stage among the survivors' rerank keys; the answer-stage cells of the surviving
keys (best first, while they fit `max_cells`: `cells_within`) race on the end-to-end metric (the race's
steps, the order cut to the search cases). The race's best `finalists` then answer and are judged on the
held-out cases, which no decision saw, and `confirm_finalists` measures them there. Every decision and
the confirmation are artifacts and go to the results step, whose report has a "Search" section.

Every answer and judge step is keyed on its stage key and case span, as in the race: a rerun (or the same
search on a widened grid) asks no LLM again for what it evaluated."""

from typing import Any

from zenml import pipeline

from pipelines.benchmark import Wiring, wire_retrieval
from ragbench.analysis.staged import StageDecision, race_decision, race_settings
from ragbench.analysis.strategies import ModelSearch, StagedSearch
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import CellSpec, distinct_at
from ragbench.runs.names import BENCHMARK_PIPELINE
from steps.gate import alert_failed_run
from steps.identity import CellIdentity
from steps.search import confirm_finalists, split_cases
from steps.staged import decide_stage


def decide(wiring: Wiring, split: Any, stage: str, cells: list[CellSpec], max_cells: int | None) -> Any:
    """The `decide_stage` step of one stage over the `cells`' keys there (its id: `stage_<stage>`)."""
    settings = wiring.settings
    search = settings.search
    assert isinstance(search, StagedSearch)
    return decide_stage(
        split,
        wiring.retrievals,
        wiring.reranks if stage == "rerank" else [],
        cells=[CellIdentity.of(cell) for cell in cells],
        stage=stage,
        metric=settings.stage_metric(),
        alpha=search.stage_alpha,
        max_cells=max_cells,
        statistics=settings.statistics,
        id=f"stage_{stage}",
    )


def kept_cells(cells: list[CellSpec], decision: StageDecision) -> list[CellSpec]:
    """The cells whose key at the decision's stage it kept and did not cut."""
    kept = set(decision.kept) - set(decision.cut)
    return [cell for cell in cells if cell.upto(decision.stage).id in kept]  # type: ignore[arg-type]


def answer_round(
    wiring: Wiring, cells: list[CellSpec], first: int, stop: int, suffix: str
) -> tuple[list, list]:
    """The cells' answer and judge steps on positions `first` to `stop` of the seeded order, outside a
    race (`<step id>_<suffix>`): the finalists on the held-out cases, or the one cell the retrieval stages
    left on the search cases."""
    answers = {
        key.id: wiring.answer(key, first=first, stop=stop, id=f"{key.step_id('answer')}_{suffix}")
        for key in distinct_at(cells, "answer")
    }
    judged = [
        wiring.judge(key, answers[key.upto("answer").id], id=f"{key.step_id('judge')}_{suffix}")
        for key in distinct_at(cells, "judge")
    ]
    return list(answers.values()), judged


def search_split(wiring: Wiring, search: StagedSearch | ModelSearch) -> Any:
    """The `split_cases` step of a search: the seeded order cut into its search and held-out cases."""
    settings = wiring.settings
    return split_cases(
        wiring.suite,
        holdout=search.holdout,
        cases=search.max_cases or settings.generation.sample_size,
        seed=settings.generation.seed,
    )


def confirm_on_held_out(
    wiring: Wiring, split_step: Any, finalists: list[CellSpec], answer_sets: list, judged: list
) -> Any | None:
    """The finalists (the search's winner first) answer and are judged on the held-out cases, added to
    `answer_sets` and `judged`, then `confirm_finalists` measures them there; None without held-out cases
    or finalists. `split_step`: the search's `split_cases` step, loaded here (a small artifact)."""
    split = split_step.load()
    if not split.held_out or not finalists:
        return None
    settings = wiring.settings
    first = len(split.search)
    answers, verdicts = answer_round(wiring, finalists, first, first + len(split.held_out), "held_out")
    answer_sets += answers
    judged += verdicts
    return confirm_finalists(
        split_step,
        wiring.suite,
        answer_sets,
        judged,
        finalists=[CellIdentity.of(cell) for cell in finalists],
        metric=settings.race_metric(),
        evaluation=settings.evaluation,
        metrics_k=settings.retrieval.metrics_k,
        statistics=settings.statistics,
        id="confirm_finalists",
    )


@pipeline(name=BENCHMARK_PIPELINE, dynamic=True, on_failure=alert_failed_run)
def rag_staged(
    config: dict,
    planned: dict | None = None,
    snapshots: dict[str, Any] | None = None,
    checkout: dict | None = None,
):
    """The same run with `search: {strategy: staged}`: retrieval decided stage by stage on the search
    cases, the surviving cells raced, the race's best confirmed on the held-out cases. `planned`,
    `snapshots` and `checkout` as for `rag_race`."""
    settings = BenchmarkConfig.model_validate(config)
    search = settings.search
    if not isinstance(search, StagedSearch):
        raise ValueError("rag_staged needs a config with `search: {strategy: staged, ...}`")
    wiring = wire_retrieval(settings, snapshots)
    cells = wiring.cells
    judge_cards = wiring.judge_cards()
    split_step = search_split(wiring, search)
    split = split_step.load()
    reranks = any(cell.reranker is not None for cell in cells)  # a rerank stage to decide after retrieve
    decisions = [decide(wiring, split_step, "retrieve", cells, None if reranks else search.max_cells)]
    raced = kept_cells(cells, decisions[-1].load())
    if reranks:
        decisions.append(decide(wiring, split_step, "rerank", raced, search.max_cells))
        raced = kept_cells(raced, decisions[-1].load())
    steps: list = [split_step, *decisions]
    trace = None
    finalist_ids = [raced[0].id]
    if len(raced) > 1:
        race = race_settings(search).model_copy(update={"max_cases": len(split.search)})
        trace, answer_sets, judged = wiring.race(raced, race)
        finalist_ids = race_decision(trace.load()).kept[: search.finalists]
    else:  # nothing to race: the one cell left answers the search cases, its estimate
        answer_sets, judged = answer_round(wiring, raced, 0, len(split.search), "search")
    finalists = [cell for cell in raced if cell.id in set(finalist_ids)]
    finalists.sort(key=lambda cell: finalist_ids.index(cell.id))
    if (confirmation := confirm_on_held_out(wiring, split_step, finalists, answer_sets, judged)) is not None:
        steps.append(confirmation)
    wiring.results_and_gate(
        answer_sets, judged, [], judge_cards, race=trace, planned=planned, search=steps, checkout=checkout
    )
