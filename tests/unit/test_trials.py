"""The model-based search in grid terms: its space, a trial's values read from its answers and verdicts,
the trial loop (pruning, the cell budget, the call budget) and its replay from recorded values."""

import math

import pytest

from ragbench.analysis.holdout import CaseSplit
from ragbench.analysis.model_search import TrialSearch
from ragbench.analysis.race_cells import trial_values
from ragbench.analysis.search_findings import SearchFindings
from ragbench.analysis.strategies import ModelSearch
from ragbench.analysis.trials import (
    ModelSearchTrace,
    Trial,
    TrialValues,
    batches,
    new_search,
    replay_trials,
    run_trials,
    search_space,
)
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.generation.answers import AnswerSet
from ragbench.generation.reader import ReaderAnswer
from ragbench.inputs.eval_cases import EvalCase
from ragbench.report.search import search_section
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.judge import Judgement
from ragbench.scoring.rubrics import BUILTIN_RUBRICS

CASES = [f"c{number:02d}" for number in range(24)]


def grid(readers: int = 3):
    """readers x 2 top_n x 2 prompts = 12 cells (the integration test's shape)."""
    names = ", ".join(f"openai/r{number}" for number in range(readers))
    return expand_grid(
        load_config(
            overrides=[
                "grid.chunk_size=[128]",
                "grid.retriever=[bm25]",
                "grid.top_n=[1, 2]",
                "prompts.plain={system: Answer the question.}",
                "grid.prompt=[default, plain]",
                f"grid.reader=[{names}]",
            ]
        )
    )


def test_the_space_is_the_varying_axes_each_value_by_what_tells_it_apart():
    cells = grid()
    space = search_space(cells)
    assert len(space) == 12 and len(set(map(tuple, (sorted(v.items()) for v in space.values())))) == 12
    assert {frozenset(axes) for axes in space.values()} == {frozenset({"top_n", "reader", "prompt"})}


def test_batches_cover_the_search_cases_the_last_one_shorter():
    assert batches(14, 6) == [(0, 6), (6, 12), (12, 14)]
    assert batches(12, 6) == [(0, 6), (6, 12)]


def test_a_trial_reads_its_values_as_the_results_table_does():
    cell = grid()[0]
    answers = [
        AnswerSet(
            spec=cell.upto("answer"),
            reranker=None,
            answers=[ReaderAnswer(case_id=case, question="q", answer="a") for case in part],
        )
        for part in (["a", "b"], ["c"])
    ]
    judged = [
        JudgeResult(
            spec=cell,
            rubrics=[BUILTIN_RUBRICS["correctness"]],
            judgements=[Judgement(case_id=case, scores={"correctness": score}) for case, score in part],
        )
        for part in ([("a", 5), ("b", 1)], [("c", 3)])
    ]
    judged[1].judgements.append(Judgement(case_id="d", errors={"correctness": "json_invalid"}))
    cases = [EvalCase(id=case, question="q") for case in "abcd"]
    values = trial_values(cell, answers, judged, cases, [], "correctness_0to1", trial=2, batch=2)
    assert values.values == {"a": 1.0, "b": 0.0, "c": 0.5}  # d not scored: absent, not NaN
    assert (values.trial, values.batch, values.cell) == (2, 2, cell.id)
    assert values.calls == 3  # three answers; the judgements made no counted call here


def oracle(cells) -> dict[str, dict[str, float]]:
    """Per-case values: reader r0 right on every case, the others on one case in three."""
    return {
        cell.id: {
            case: 1.0 if cell.reader.model == "openai/r0" or number % 3 == 0 else 0.0
            for number, case in enumerate(CASES)
        }
        for cell in cells
    }


def searcher(cells) -> TrialSearch:
    search = ModelSearch(strategy="tpe", metric="correctness_0to1", batch=6, max_cells=6, startup_trials=3)
    return new_search(cells, search, higher_is_better=True, search_cases=len(CASES))


def evaluator(values: dict[str, dict[str, float]], asked: list):
    def evaluate(trial: int, batch: int, cell: str, first: int, stop: int) -> TrialValues:
        seen = {case: values[cell][case] for case in CASES[:stop]}
        asked.append(TrialValues(trial=trial, batch=batch, cell=cell, values=seen, calls=2 * stop))
        return asked[-1]

    return evaluate


def test_trials_stop_at_the_cell_budget_and_replay_from_their_values():
    cells = grid()
    recorded: list[TrialValues] = []
    spans = batches(len(CASES), 6)
    trials = run_trials(searcher(cells), spans, evaluator(oracle(cells), recorded))
    assert len(trials) == 6 and [t.number for t in trials] == list(range(1, 7))
    assert len({t.cell for t in trials}) == len(trials)  # no cell tried twice
    assert replay_trials(searcher(cells), spans, recorded) == trials
    other = next(cell.id for cell in cells if cell.id != trials[1].cell)
    tampered = [v.model_copy(update={"cell": other}) if v.trial == 2 else v for v in recorded]
    with pytest.raises(ValueError, match="do not follow from their values"):
        replay_trials(searcher(cells), spans, tampered)


def test_the_call_budget_stops_before_a_batch_that_would_pass_it():
    cells = grid()
    recorded: list[TrialValues] = []
    trials = run_trials(searcher(cells), batches(24, 6), evaluator(oracle(cells), recorded), budget_calls=30)
    # a batch costs 12 calls (2 per case): two batches fit in 30, the third would pass it
    assert sum(t.batches for t in trials) == 2 and sum(v.calls for v in recorded[-1:]) <= 30


def trial(number: int, mean: float | None, pruned: bool = False) -> Trial:
    return Trial(number=number, cell=f"cell{number}", cases=6, mean=mean, pruned=pruned, batches=1, calls=12)


def test_the_trace_names_every_trial_and_the_report_shows_it():
    trace = ModelSearchTrace(
        metric="correctness_0to1",
        metric_label="correctness <b>",
        higher_is_better=True,
        max_cells=6,
        startup_trials=3,
        seed=0,
        batch=6,
        grid_cells=12,
        search_cases=18,
        trials=[trial(1, 0.5), trial(2, 0.1, pruned=True), trial(3, 0.9)],
        finalists=["cell3", "cell1"],
        calls_used=36,
        calls_full=432,
    )
    names = {"cell3": "reader · good"}
    assert trace.winner == "cell3"
    assert [row["outcome"] for row in trace.rows(names)] == ["finalist", "pruned after batch 1", "winner"]
    assert "3 of 12 cells tried, 1 pruned; winner reader · good; 36 calls, 8%" in trace.summary(names)
    assert [trace.status(cell) for cell in ("cell2", "cell3", "cell9")] == [
        "trial 2: pruned after batch 1 (n=6)",
        "trial 3: winner (n=6)",
        "not tried",
    ]
    findings = SearchFindings(
        split=CaseSplit(search=CASES[:18], held_out=CASES[18:], share=0.25), decisions=[], trials=trace
    )
    html = search_section(findings, names)
    assert '<h2 id="search">Search: model-based</h2>' in html and "correctness &lt;b&gt;" in html
    assert "<h3>Stages</h3>" not in html and "Not confirmed" in html  # no confirmation in these findings
    assert not math.isnan(ModelSearchTrace.model_validate_json(trace.model_dump_json()).trials[0].mean)
