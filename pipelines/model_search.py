"""The model-based search (`search: {strategy: tpe}`) as a dynamic pipeline under the benchmark's name:
retrieval for every cell on every case (no LLM call), then trials. Each trial is a cell TPE suggests
(`ragbench.analysis.model_search.TrialSearch`); it answers and is judged on the search cases batch by
batch, one step per (trial, batch) over the seeded order's `first`/`stop` span, and after each batch a
step reads its per-case values of the metric, which the search is told and may prune the trial on; until
`max_cells` cells are tried. The finalists then answer the held-out cases, and the results table, the
report and the gate follow as in any run.

The search's state lives in this function (a dynamic pipeline runs it in one process); every decision it
takes is re-derived from the values steps' artifacts by `record_trials`, whose record is what the
finalists are read from, so the run's choice is the artifacts' choice. Every answer and judge step is
keyed on its stage key and case span, so a rerun asks no LLM again."""

from typing import Any

from zenml import pipeline

from pipelines.benchmark import Wiring, wire_retrieval
from pipelines.staged import confirm_on_held_out, search_split
from ragbench.analysis.strategies import ModelSearch
from ragbench.analysis.trials import TrialValues, batches, new_search, run_trials
from ragbench.config.model import BenchmarkConfig
from ragbench.runs.names import BENCHMARK_PIPELINE
from steps.gate import alert_failed_run
from steps.identity import CellIdentity
from steps.model_search import measure_trial, record_trials


class Trials:
    """The answer, judge and values steps of the trials, by the pipeline's `evaluate` (`run_trials`)."""

    def __init__(self, wiring: Wiring, metric: str) -> None:
        self.wiring = wiring
        self.metric = metric
        self.cells = {cell.id: cell for cell in wiring.cells}
        self.answer_sets: list = []
        self.judged: list = []
        self.values: list = []  # every values step's output, in the order made
        self.parts: dict[int, tuple[list, list]] = {}  # trial -> its answer sets and verdicts so far

    def evaluate(self, trial: int, batch: int, cell_id: str, first: int, stop: int) -> TrialValues:
        """Answer and judge cases `first` to `stop` in the trial's cell, then its values on every batch so
        far: the steps' ids name the trial and batch (`answer_<key>_t<trial>_b<batch>`)."""
        wiring, cell = self.wiring, self.cells[cell_id]
        answers, verdicts = self.parts.setdefault(trial, ([], []))
        suffix = f"_t{trial}_b{batch}"
        key = cell.upto("answer")
        answers.append(wiring.answer(key, first=first, stop=stop, id=f"{key.step_id('answer')}{suffix}"))
        self.answer_sets.append(answers[-1])
        if cell.judge is not None:
            verdicts.append(wiring.judge(cell, answers[-1], id=f"{cell.step_id('judge')}{suffix}"))
            self.judged.append(verdicts[-1])
        values = measure_trial(
            wiring.suite,
            list(answers),
            list(verdicts),
            cell=CellIdentity.of(cell),
            evaluation=wiring.settings.evaluation,
            metrics_k=wiring.settings.retrieval.metrics_k,
            metric=self.metric,
            trial=trial,
            batch=batch,
            id=f"trial_values{suffix}",
        )
        self.values.append(values)
        return values.load()


@pipeline(name=BENCHMARK_PIPELINE, dynamic=True, on_failure=alert_failed_run)
def rag_model_search(
    config: dict,
    planned: dict | None = None,
    snapshots: dict[str, Any] | None = None,
    checkout: dict | None = None,
):
    """The same run with `search: {strategy: tpe}`: TPE trials over the grid's cells on the search cases,
    then the finalists confirmed on the held-out cases. `planned`, `snapshots` and `checkout` as for
    `rag_race`."""
    settings = BenchmarkConfig.model_validate(config)
    search = settings.search
    if not isinstance(search, ModelSearch):
        raise ValueError("rag_model_search needs a config with `search: {strategy: tpe, ...}`")
    wiring = wire_retrieval(settings, snapshots)
    cells = wiring.cells
    judge_cards = wiring.judge_cards()
    metric = settings.race_metric()
    split_step = search_split(wiring, search)
    split = split_step.load()
    trials = Trials(wiring, search.metric)
    searcher = new_search(
        cells, search, higher_is_better=metric.higher_is_better, search_cases=len(split.search)
    )
    run_trials(
        searcher, batches(len(split.search), search.batch), trials.evaluate, budget_calls=search.budget_calls
    )
    record = record_trials(
        trials.values,
        cells=[CellIdentity.of(cell) for cell in cells],
        search=search,
        metric=metric,
        search_cases=len(split.search),
    )
    found: list = [split_step, record]
    answer_sets, judged = trials.answer_sets, trials.judged
    finalists = [trials.cells[cell] for cell in record.load().finalists]
    if (confirmation := confirm_on_held_out(wiring, split_step, finalists, answer_sets, judged)) is not None:
        found.append(confirmation)
    wiring.results_and_gate(
        answer_sets, judged, [], judge_cards, planned=planned, search=found, checkout=checkout
    )
