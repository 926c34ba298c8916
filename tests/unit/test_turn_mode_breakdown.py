"""Scores by turn mode: follow-ups after earlier turns given in the case and after turns the cell generated
are scored apart, each with its interval and n; computed from hand-made per-case values, no models."""

from ragbench.analysis.case_types import GENERATED, GIVEN, SINGLE, turn_mode_rows
from ragbench.inputs.conversation import Turn
from ragbench.inputs.eval_cases import EvalCase
from ragbench.report.page import render_report
from ragbench.report.view import ReportInput
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig

STATS = StatisticsConfig(resamples=999)
CORRECTNESS = MetricInfo(
    column="correctness_0to1", label="correctness (0-1)", higher_is_better=True, bounds=(0.0, 1.0)
)
ASKED = Turn(role="user", content="How do I read a file?")


def case(case_id: str, *assistant: Turn) -> EvalCase:
    history = [ASKED, *assistant] if assistant else []
    return EvalCase(id=case_id, question=f"And then, {case_id}?", history=history)


GIVEN_TURN = Turn(role="assistant", content="Call open.")
GENERATED_TURN = Turn(role="assistant", generate=True)
CASES = [
    case("s1"),
    case("g1", GENERATED_TURN),
    case("v1", GIVEN_TURN),
    case("g2", GENERATED_TURN),
    case("v2", GIVEN_TURN),
    case("v3", GIVEN_TURN),
    case("g3", GENERATED_TURN),
]
VALUES = {
    "cell-1": {
        "correctness_0to1": {"s1": 1.0, "v1": 1.0, "v2": 0.75, "v3": 1.0, "g1": 0.0, "g2": 0.25, "g3": 0.5}
    }
}


def test_given_and_generated_turns_are_scored_apart_with_their_intervals():
    rows = turn_mode_rows([CORRECTNESS], VALUES, {"cell-1": "cs128"}, CASES, STATS)
    found = {row["turns"]: row for row in rows}
    assert list(found) == [SINGLE, GIVEN, GENERATED]  # in that order, whatever the cases' order
    given, generated = found[GIVEN], found[GENERATED]
    assert given["correctness_0to1"] == round(2.75 / 3, 4) and given["correctness_0to1_cases"] == 3
    assert generated["correctness_0to1"] == 0.25 and generated["correctness_0to1_cases"] == 3
    assert generated["correctness_0to1_low"] < 0.25 < generated["correctness_0to1_high"]
    assert found[SINGLE]["correctness_0to1_low"] is None  # one case: too few for an interval
    page = render_report(
        ReportInput(
            title="run",
            axes=[],
            varying_axes=[],
            rows=[{"cell": "cell-1", "label": "cs128", "correctness_0to1": 0.5}],
            headline=[CORRECTNESS],
            turn_mode_rows=rows,
        )
    )
    assert '<h2 id="turn-modes">Scores by turn mode</h2>' in page
    low, high = generated["correctness_0to1_low"], generated["correctness_0to1_high"]
    assert f'<td>cs128</td><td>{GENERATED}</td><td class="number">0.25 [{low:.4g}, {high:.4g}] n=3' in page


def test_no_breakdown_without_a_scored_generated_turn():
    given_only = [c for c in CASES if not c.id.startswith("g")]
    assert turn_mode_rows([CORRECTNESS], VALUES, {}, given_only, STATS) == []
    generated_only = [c for c in CASES if c.id.startswith("g")]  # one mode: it would repeat the table
    assert turn_mode_rows([CORRECTNESS], VALUES, {}, generated_only, STATS) == []
