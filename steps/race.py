"""The race's steps: its start (the case order and the cells) and a look after every round. Both are cached
like any step: a re-run, or a race given more cases or calls, asks no LLM again for a round it ran."""

from typing import Annotated

from zenml import log_metadata

from ragbench.analysis.race_cells import look_at_round
from ragbench.analysis.racing import RaceConfig, RaceTrace, start_race
from ragbench.generation.answers import AnswerSet, case_order
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.registry import EvaluationConfig
from ragbench.stats.inference import StatisticsConfig
from steps.caching import cached_step
from steps.identity import CellIdentity

RACE_TRACE = "race_trace"


@cached_step()
def start_cell_race(
    eval_suite: EvalSuite, cells: list[str], search: RaceConfig, metric: MetricInfo, seed: int
) -> Annotated[RaceTrace, RACE_TRACE]:
    """Every cell a survivor; the cases in the seeded order every cell answers them in."""
    return start_race(
        cells,
        [case.id for case in case_order(eval_suite.cases, seed)],
        search,
        metric_label=metric.label,
        higher_is_better=metric.higher_is_better,
        test=metric.paired_test,
    )


@cached_step()
def look_at_race(
    trace: RaceTrace,
    eval_suite: EvalSuite,
    answer_sets: list[AnswerSet],
    judged: list[JudgeResult],
    cells: list[CellIdentity],
    evaluation: EvaluationConfig,
    metrics_k: int,
    statistics: StatisticsConfig,
) -> Annotated[RaceTrace, RACE_TRACE]:
    """The look after a round, over every round's answers and verdicts so far: who leads, who stops."""
    scoring = evaluation.scoring(metrics_k)
    after = look_at_round(
        trace,
        [cell.cell() for cell in cells],
        answer_sets,
        judged,
        eval_suite.cases,
        scoring.suites,
        statistics,
    )
    latest = after.looks[-1]
    log_metadata(
        {
            "round": latest.round,
            "cases": latest.cases,
            "leader": latest.leader,
            "eliminated": latest.eliminated,
            "survivors": len(after.survivors),
            "stop": after.stop or "",
            "calls_used": after.calls_used,
        }
    )
    return after
