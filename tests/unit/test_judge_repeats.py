"""Judge repeats (`evaluation.judge_repeats`): the config refuses what measures nothing, the repeats are
seeded and keyed apart in the cache, the statistics give planted values, and the dry run prices them."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from ragbench.analysis.judge_repeats import Repeatability, RepeatedAnswer, repeatability, with_judge_variance
from ragbench.config.dry_run import plan_rows
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.judge import judge_answers
from ragbench.scoring.registry import EvaluationConfig
from ragbench.scoring.repeats import (
    JudgeRepeatsConfig,
    judge_repeats,
    plan_repeats,
    reorder_options,
    repeat_request,
)
from ragbench.scoring.rubrics import CONTEXT, CORRECTNESS, JudgeInput
from ragbench.stats.intervals import Interval
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import write_project

DUMMY_KEY = "sk-test-DUMMY-not-a-real-key-1234"


def item(case_id: str, contexts: int = 3) -> JudgeInput:
    return JudgeInput(
        case_id=case_id,
        question=f"Question {case_id}?",
        answer="An answer.",
        reference_answer="The reference.",
        contexts=[f"passage {n} of {case_id}" for n in range(contexts)],
    )


def value(score: int) -> float:
    return (score - 1) / 4


def correctness_repeatability(answers: list[RepeatedAnswer]) -> Repeatability | None:
    """The statistics of one cell's repeated correctness verdicts on the 1-5 scale."""
    return repeatability(
        answers,
        judge="j",
        cell="c",
        cell_id="c",
        criterion="correctness",
        column="correctness_0to1",
        scale="1-5",
        value=value,
    )


# -- config -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "problem"),
    [({"count": 1, "sample": 5}, "count"), ({"count": 3, "sample": 0}, "sample"), ({"count": 3}, "sample")],
)
def test_repeats_that_measure_nothing_are_refused(section: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=f"judge_repeats.{problem}"):
        EvaluationConfig(judge_repeats=section)


def test_repeats_without_a_judge_are_a_config_error(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        {"a.md": "# A\nA."},
        CASES,
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: []}\n"
        "evaluation: {judge_repeats: {count: 2, sample: 3}, judge_check: null}\n",
    )
    with pytest.raises(ValueError, match="judge_repeats needs a judge"):
        load_config(tmp_path / "config.yaml")


# -- planning and the cache key ---------------------------------------------------------------------


def test_the_repeats_are_a_seeded_sample_with_the_asked_share_reordered() -> None:
    inputs = [item(f"c{n}") for n in range(10)]
    config = JudgeRepeatsConfig(count=4, sample=3, reorder_share=0.5)
    repeats = plan_repeats(inputs, CORRECTNESS, config, seed=7)
    assert repeats == plan_repeats(inputs, CORRECTNESS, config, seed=7)
    assert {r.case_id for r in repeats} != {r.case_id for r in plan_repeats(inputs, CORRECTNESS, config, 8)}
    by_case: dict[str, list] = {}
    for r in repeats:
        by_case.setdefault(r.case_id, []).append(r)
    assert len(by_case) == 3 and all([r.index for r in rs] == [1, 2, 3, 4] for rs in by_case.values())
    assert all(sum(r.reordered for r in rs) == 2 for rs in by_case.values())
    for r in repeats:
        if r.reordered:  # correctness shows no passages, and lists its five options one a line
            assert r.passages is None and r.options is not None
            assert sorted(r.options) == [0, 1, 2, 3, 4] and r.options != (0, 1, 2, 3, 4)
    assert len(plan_repeats(inputs[:2], CORRECTNESS, config, seed=7)) == 2 * 4  # all when fewer


def test_a_reordered_repeat_shows_the_passages_and_options_in_its_recorded_order() -> None:
    config = JudgeRepeatsConfig(count=2, sample=1, reorder_share=1.0)
    case = item("c0")
    [passages, _] = plan_repeats([case], CONTEXT, config, seed=1)
    assert passages.passages is not None and passages.options is None  # its options are not one a line
    user = repeat_request(CONTEXT, case, passages).messages[1]["content"]
    shown = sorted(range(3), key=lambda n: user.index(f"passage {n} of c0"))
    assert tuple(shown) == passages.passages
    [options, _] = plan_repeats([case], CORRECTNESS, config, seed=1)
    assert options.passages is None and options.options is not None  # correctness shows no passages
    system = repeat_request(CORRECTNESS, case, options).messages[0]["content"]
    listed = [line for line in CORRECTNESS.system.split("\n") if line[:4] in {f"{n} = " for n in range(6)}]
    assert len(listed) == 5
    assert [line for line in system.split("\n") if line in listed] == [listed[i] for i in options.options]
    assert reorder_options("no options here", (1, 0)) == "no options here"


def test_each_repeat_has_its_own_cache_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    config = JudgeRepeatsConfig(count=3, sample=1, reorder_share=0.0)
    case = item("c0")
    with FakeOpenAIServer() as server:
        client = server.client(tmp_path / "cache")
        requests = [
            repeat_request(CORRECTNESS, case, r) for r in plan_repeats([case], CORRECTNESS, config, 0)
        ]
        assert len({json.dumps(r.messages) for r in requests}) == 1  # identical prompts
        keys = {client.cache_key(r.messages, r.response_schema, 0, r.repeat) for r in requests}
        assert len(keys) == 3
        assert client.cache_key(requests[0].messages, requests[0].response_schema) not in keys


# -- a judge that answers at random near the threshold, through the real client ---------------------


class NoisyJudge:
    """Scores 5 for most answers; for the answers named noisy, 3 or 4 at random (the pass threshold is
    4), drawn per prompt and per time it was asked, so identical repeats are redrawn."""

    def __init__(self, noisy: set[str]) -> None:
        self.noisy, self.asked, self.lock = noisy, dict[str, int](), threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        case = user.split("Question ", 1)[1].split("?", 1)[0]
        with self.lock:
            n = self.asked[user] = self.asked.get(user, 0) + 1
        score = random.Random(f"{user}:{n}").choice((3, 4)) if case in self.noisy else 5
        return json.dumps({"reasoning": "Scored.", "score": score})


def test_the_flip_rate_of_a_planted_noisy_judge_is_measured(tmp_path: Path, monkeypatch) -> None:
    """A quarter of the answers flip at random: each repeat differs from the first verdict's pass/fail
    with probability 1/2 on them, so the flip rate is 1/8; the straddling share is 1/4 * (1 - 2/2^5)."""
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    inputs = [item(f"c{n}") for n in range(24)]
    noisy = {f"c{n}" for n in range(0, 24, 4)}
    config = JudgeRepeatsConfig(count=4, sample=24, reorder_share=0.5)
    with FakeOpenAIServer(responder=NoisyJudge(noisy)) as server:
        client = server.client(tmp_path / "cache", max_retries=0, concurrency=8)
        judged = judge_answers(client, inputs, rubrics=[CORRECTNESS])
        verdicts = judge_repeats(client, inputs, [CORRECTNESS], config, seed=5)
        assert server.request_count == 24 + 24 * 4  # no repeat was served the first verdict from cache
        judge_repeats(client, inputs, [CORRECTNESS], config, seed=5)
        assert server.request_count == 24 + 24 * 4  # a re-run's repeats are
    firsts = {j.case_id: j.scores["correctness"] for j in judged}
    assert not [v for v in verdicts if v.error]
    answers = [
        RepeatedAnswer(
            case_id,
            first,
            [(v.scores["correctness"], v.repeat.reordered) for v in verdicts if v.repeat.case_id == case_id],
        )
        for case_id, first in firsts.items()
    ]
    found = correctness_repeatability(answers)
    assert found is not None and found.answers == 24 and found.repeats == 4
    assert abs(found.flip_rate - 1 / 8) < 3 * 0.026  # sd of the mean: sqrt(6 * 1/16) / 24
    assert found.flip_low is not None and found.flip_high is not None
    assert found.flip_low <= 1 / 8 <= found.flip_high
    assert abs(found.straddling - 0.25 * (1 - 2 / 32)) < 0.1
    assert found.judge_variance > 0


# -- the statistics on planted values ---------------------------------------------------------------


def test_the_statistics_of_planted_repeats() -> None:
    answers = [
        RepeatedAnswer("a", 4, [(3, False), (4, True)]),
        RepeatedAnswer("b", 5, [(5, False), (5, True)]),
        RepeatedAnswer("c", 2, []),  # no repeats: left out
    ]
    found = correctness_repeatability(answers)
    assert found is not None
    assert (found.answers, found.repeats, found.pass_at) == (2, 2, 4)
    assert found.flip_rate == pytest.approx(0.25) and found.straddling == pytest.approx(0.5)
    assert found.identical_flip == pytest.approx(0.5) and found.reordered_flip == pytest.approx(0.0)
    assert found.position_shift == pytest.approx(0.125)
    assert found.judge_variance == pytest.approx((0.125 / 3) / 2 / 2)
    assert found.flip_low is None  # two answers: too few for an interval
    assert "flip rate 0.25" in found.line() and "50% straddle" in found.line()


def test_a_pass_fail_judge_flips_when_its_verdict_changes() -> None:
    answers = [RepeatedAnswer(str(n), 1, [(0, True), (1, True)]) for n in range(4)]
    found = repeatability(
        answers,
        judge="j",
        cell="c",
        cell_id="c",
        criterion="refusal",
        column="refusal",
        scale="pass_fail",
        value=float,
    )
    assert found is not None and found.pass_at is None and found.flip_rate == pytest.approx(0.5)
    assert found.identical_flip is None and found.position_shift is None


def test_nothing_repeated_gives_no_statistics() -> None:
    answers = [RepeatedAnswer("a", 4, [])]
    assert (
        repeatability(
            answers, judge="j", cell="c", cell_id="c", criterion="x", column="x", scale="1-5", value=value
        )
        is None
    )


def test_the_judge_variance_widens_a_cell_interval_in_quadrature() -> None:
    interval = Interval(mean=0.5, low=0.4, high=0.6, n=10, method="betting")
    wider = with_judge_variance(interval, 0.01, bounds=(0.0, 1.0))
    half = (0.01 + 1.959964**2 * 0.01 / 10) ** 0.5
    assert wider.low == pytest.approx(0.5 - half, abs=1e-5) and wider.high == pytest.approx(
        0.5 + half, abs=1e-5
    )
    assert with_judge_variance(interval, 0.0, bounds=(0.0, 1.0)) == interval
    assert with_judge_variance(interval, 5.0, bounds=(0.0, 1.0)).high == 1.0
    few = Interval(mean=0.5, low=None, high=None, n=2, method="too_few")
    assert with_judge_variance(few, 0.01, bounds=(0.0, 1.0)) == few


# -- the dry run ------------------------------------------------------------------------------------

CASES = [{"id": "a", "question": "What is a?", "reference_answer": "A.", "expected_sources": ["a.md"]}]


def planned_calls(tmp_path: Path, repeats: str) -> int:
    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        CASES,
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: [openai/j]}\n"
        f"evaluation: {{rubrics: [correctness], judge_check: null{repeats}}}\n",
    )
    config = load_config(tmp_path / "config.yaml")
    (row,) = plan_rows(config, [EvalCase.model_validate(c) for c in CASES], set(), cells=expand_grid(config))
    return row["llm_calls"]


def test_the_dry_run_prices_the_repeats(tmp_path: Path) -> None:
    without = planned_calls(tmp_path / "without", "")
    with_repeats = planned_calls(tmp_path / "with", ", judge_repeats: {count: 3, sample: 5}")
    assert with_repeats - without == 3  # one case to repeat (all when fewer), three times
