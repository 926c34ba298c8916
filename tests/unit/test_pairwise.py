"""The blinded pairwise judge through the real client against the loopback fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragbench.llm.client import LLMClient
from ragbench.llm.pricing import estimate_cost
from ragbench.llm.types import LLMSettings
from ragbench.report.pairwise import pairwise_html
from ragbench.scoring.pairwise import (
    DEFAULT_CRITERION,
    PairwiseInput,
    PairwiseVerdict,
    build_pairwise_calls,
    candidate_shown_first,
    combine,
    judge_pairs,
)
from ragbench.stats.inference import sign_test, wilson_interval

try:
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer  # type: ignore[no-redef]

DUMMY_KEY = "sk-test-DUMMY-not-a-real-key-1234"
REPO_ROOT = Path(__file__).resolve().parents[2]

# A policy gets (answer 1, answer 2, attempt) and returns the reply text; attempt counts re-asks.
Policy = Callable[[str, str, int], str]


def verdict(choice: str, reasoning: str = "Compared the facts.") -> str:
    return json.dumps({"reasoning": reasoning, "verdict": choice})


def fair(answer_1: str, answer_2: str, attempt: int) -> str:
    """Prefers a "good" answer to a "bad" one, whatever its position; ties otherwise."""
    good_1, good_2 = answer_1.startswith("good"), answer_2.startswith("good")
    return verdict("tie" if good_1 == good_2 else "1" if good_1 else "2")


def always_first(answer_1: str, answer_2: str, attempt: int) -> str:
    return verdict("1", "The first answer is better.")


def never_json(answer_1: str, answer_2: str, attempt: int) -> str:
    return "Sure! Answer 1 wins, no JSON today"


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def parts(request: dict[str, Any]) -> tuple[str, str, str]:
    """(question, answer 1, answer 2) of a request, from its first user message."""
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return (
        between(prompt, "<question>\n", "\n</question>"),
        between(prompt, '<answer id="1">\n', "\n</answer>"),
        between(prompt, '<answer id="2">\n', "\n</answer>"),
    )


class ScriptedPairJudge:
    """Replies by question: that question's policy, else `fair`."""

    def __init__(self) -> None:
        self.policies: dict[str, Policy] = {}

    def __call__(self, request: dict[str, Any]) -> str:
        question, answer_1, answer_2 = parts(request)
        attempt = sum(m["role"] == "assistant" for m in request["messages"])
        return self.policies.get(question, fair)(answer_1, answer_2, attempt)


@pytest.fixture
def script() -> ScriptedPairJudge:
    return ScriptedPairJudge()


@pytest.fixture
def server(script: ScriptedPairJudge) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=script) as srv:
        yield srv


@pytest.fixture
def client(server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LLMClient:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    return server.client(tmp_path / "cache", max_retries=1, json_retries=1)


def pair(case_id: str, candidate: str | None, baseline: str | None, **fields: Any) -> PairwiseInput:
    return PairwiseInput(
        case_id=case_id,
        question=fields.pop("question", f"Q-{case_id}"),
        candidate_answer=candidate,
        baseline_answer=baseline,
        **fields,
    )


def run(client: LLMClient, inputs: list[PairwiseInput], **options: Any) -> Any:
    fields: dict[str, Any] = {"candidate": "cand", "baseline": "base", "judge": "openai/fake"} | options
    return judge_pairs(client, inputs, **fields)


# -- counting ---------------------------------------------------------------------------------------


def test_wins_ties_losses_failures_and_statistics(
    client: LLMClient, script: ScriptedPairJudge, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = [pair(f"w{n}", f"good {n}", f"bad {n}") for n in range(8)]
    inputs += [pair(f"l{n}", f"bad {n}", f"good {n}") for n in range(2)]
    inputs.append(pair("tie", "good a", "good b"))
    inputs.append(pair("biased", "good c", "bad c"))
    inputs.append(pair("broken", "good d", "bad d"))
    inputs.append(pair("skipped", "good e", None))
    script.policies["Q-biased"] = always_first
    script.policies["Q-broken"] = never_json
    batches: list[int] = []
    original = client.complete_many

    def spy(requests: Any, **kwargs: Any) -> Any:
        batches.append(len(requests))
        return original(requests, **kwargs)

    monkeypatch.setattr(client, "complete_many", spy)

    result = run(client, inputs)

    assert batches == [26]  # 13 judgeable pairs x 2 orders, one batch
    assert server.request_count == 26 + 2  # the broken case's two calls are re-asked once each
    assert (result.wins, result.ties, result.losses) == (8, 2, 2)
    assert (result.failures, result.skipped, result.judged) == (1, 1, 12)
    assert [c.case_id for c in result.cases] == [i.case_id for i in inputs[:-1]]  # input order
    by_id = {c.case_id: c for c in result.cases}
    assert all(by_id[f"w{n}"].outcome == "win" and by_id[f"w{n}"].flipped is False for n in range(8))
    assert by_id["l0"].outcome == "loss" and by_id["l0"].verdict_first_order == "baseline"
    assert by_id["tie"].outcome == "tie" and by_id["tie"].flipped is False
    assert by_id["biased"].outcome == "tie" and by_id["biased"].flipped is True
    broken = by_id["broken"]
    assert broken.outcome is None and broken.flipped is None
    assert broken.verdict_first_order is None and broken.verdict_swapped_order is None
    assert broken.error is not None and broken.error.count("json_invalid") == 2
    assert broken.error.startswith("first order: ") and "; swapped order: " in broken.error

    assert result.flip_share == pytest.approx(1 / 12)
    assert result.first_position_share == pytest.approx(12 / 24)  # fair: 1 of 2 per decided case
    assert result.tie_share == pytest.approx(2 / 12)
    assert result.win_rate == pytest.approx(0.8)
    assert result.sign_test_p == pytest.approx(0.109375)
    assert result.win_rate_low == pytest.approx(0.4902, abs=1e-4)
    assert result.win_rate_high == pytest.approx(0.9433, abs=1e-4)
    assert result.json_reasks == 2 and result.retries == 0 and result.prompt_tokens > 0
    assert result.cost_usd is None  # litellm has no price for "openai/fake": unknown, not free
    assert type(result).model_validate_json(result.model_dump_json()) == result


def test_both_orders_are_asked_with_the_answers_swapped(client: LLMClient, server: FakeOpenAIServer) -> None:
    inputs = [
        pair("a", "good alpha", "bad alpha", reference_answer="Alpha is right."),
        pair("b", "bad beta", "good beta"),
        pair("c", "good gamma", "good gamma too", reference_answer="  "),
    ]
    result = run(client, inputs)
    assert server.request_count == 6
    seen: dict[str, list[tuple[str, str]]] = {}
    for request in server.requests:
        question, answer_1, answer_2 = parts(request)
        seen.setdefault(question, []).append((answer_1, answer_2))
    for item in inputs:
        assert sorted(seen[item.question]) == sorted(
            [(item.candidate_answer, item.baseline_answer), (item.baseline_answer, item.candidate_answer)]
        )
    # the first order puts the candidate first exactly when the case says so
    calls = build_pairwise_calls(inputs)
    for case, (first, swapped) in zip(result.cases, zip(calls[::2], calls[1::2], strict=True), strict=True):
        assert not first.swapped and swapped.swapped
        assert first.candidate_is_answer_1 == case.candidate_first != swapped.candidate_is_answer_1
        answer_1 = parts({"messages": first.request.messages})[1]
        assert (answer_1 == inputs[first.index].candidate_answer) == case.candidate_first
    assert [c.outcome for c in result.cases] == ["win", "loss", "tie"]

    prompts = {parts(r)[0]: r["messages"] for r in server.requests}
    system, user = prompts["Q-a"][0]["content"], prompts["Q-a"][-1]["content"]
    assert "never instructions" in system and DEFAULT_CRITERION in system
    assert "<reference_answer>\nAlpha is right.\n</reference_answer>" in user
    assert "reference_answer" not in prompts["Q-b"][-1]["content"]
    assert "reference_answer" not in prompts["Q-c"][-1]["content"]  # blank counts as none
    assert "cand" not in user and "base" not in user  # blinded: no system names


def test_position_biased_judge_flips_every_case(
    client: LLMClient, script: ScriptedPairJudge, server: FakeOpenAIServer
) -> None:
    inputs = [pair(f"c{n}", f"good {n}", f"bad {n}") for n in range(6)]
    for item in inputs:
        script.policies[item.question] = always_first
    result = run(client, inputs)
    assert result.flip_share == 1.0 and result.first_position_share == 1.0
    assert (result.wins, result.ties, result.losses, result.failures) == (0, 6, 0, 0)
    assert result.tie_share == 1.0
    assert result.win_rate is result.win_rate_low is result.sign_test_p is None
    for case in result.cases:
        assert case.flipped is True and case.outcome == "tie"
        assert case.verdict_first_order == ("candidate" if case.candidate_first else "baseline")
        assert case.verdict_swapped_order == ("baseline" if case.candidate_first else "candidate")
    assert {case.candidate_first for case in result.cases} == {True, False}  # both orders occur


# -- failures -------------------------------------------------------------------------------------


def test_invalid_reply_after_reasks_is_a_failure_not_a_score(
    client: LLMClient, script: ScriptedPairJudge, server: FakeOpenAIServer
) -> None:
    def broken_when_candidate_first(answer_1: str, answer_2: str, attempt: int) -> str:
        return "{not json" if answer_1 == "cand x" else verdict("1")

    def fixed_on_reask(answer_1: str, answer_2: str, attempt: int) -> str:
        return verdict("maybe") if attempt == 0 else fair(answer_1, answer_2, attempt)

    script.policies["Q-x"] = broken_when_candidate_first
    script.policies["Q-y"] = fixed_on_reask
    result = run(client, [pair("x", "cand x", "base x"), pair("y", "good y", "bad y")])

    x, y = result.cases
    order = "first order" if x.candidate_first else "swapped order"
    assert x.error is not None and x.error.startswith(f"{order}: json_invalid") and ";" not in x.error
    assert x.outcome is None and x.flipped is None
    kept = x.verdict_swapped_order if x.candidate_first else x.verdict_first_order
    assert kept == "baseline"  # the verdict that came back is kept for reading, not scored
    assert y.outcome == "win" and y.error is None
    assert (result.wins, result.ties, result.losses, result.failures) == (1, 0, 0, 1)
    assert result.flip_share == 0.0 and result.json_reasks == 3
    assert server.request_count == 4 + 3


def test_call_failure_is_counted_not_scored(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    # one call at a time, in batch order: the first call (case a, first order) meets both faults
    client = server.client(tmp_path / "cache", max_retries=1, concurrency=1)
    server.inject("server_error", "server_error")
    result = run(client, [pair("a", "good a", "bad a"), pair("b", "good b", "bad b")])
    a, b = result.cases
    assert a.error is not None and a.error.startswith("first order: retries_exhausted")
    assert a.verdict_first_order is None and a.verdict_swapped_order == "candidate"
    assert a.outcome is None and b.outcome == "win"
    assert (result.wins, result.failures, result.retries) == (1, 1, 1)

    # the next run makes the failed call again (only it: the rest comes from the cache) and scores it
    server.reset_counters()
    again = run(client, [pair("a", "good a", "bad a"), pair("b", "good b", "bad b")])
    assert server.request_count == 1
    assert (again.wins, again.failures, again.calls_retried) == (2, 0, 1)


# -- order, cache, dry run ------------------------------------------------------------------------


def test_order_is_seeded_per_case_and_reruns_hit_the_cache(
    client: LLMClient, server: FakeOpenAIServer
) -> None:
    inputs = [pair(f"c{n}", f"good {n}", f"bad {n}") for n in range(40)]
    orders = [call.candidate_is_answer_1 for call in build_pairwise_calls(inputs, seed=7)[::2]]
    assert orders == [call.candidate_is_answer_1 for call in build_pairwise_calls(inputs, seed=7)[::2]]
    assert orders == [candidate_shown_first(item.case_id, 7) for item in inputs]
    assert 10 < sum(orders) < 30  # a fair coin per case, not one order for all
    other = [candidate_shown_first(item.case_id, 8) for item in inputs]
    assert other != orders
    # a case keeps its order whatever else is in the batch
    assert build_pairwise_calls(inputs[5:6], seed=7)[0].candidate_is_answer_1 == orders[5]

    # the same in another process with another hash salt (str hashing is salted, the order is not)
    code = (
        "from ragbench.scoring.pairwise import candidate_shown_first as f; "
        "print(''.join('1' if f(f'c{n}', 7) else '0' for n in range(40)))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "".join("1" if o else "0" for o in orders)

    first = run(client, inputs[:5], seed=7)
    assert server.request_count == 10
    again = run(client, inputs[:5], seed=7)
    assert server.request_count == 10  # same prompts: all from the cache
    assert again.cases == first.cases and again.wins == 5


def test_dry_run_builds_two_calls_per_pair_without_calling(server: FakeOpenAIServer) -> None:
    inputs = [pair("a", "good", "bad"), pair("b", None, "bad"), pair("c", "good", "")]
    calls = build_pairwise_calls(inputs)
    assert len(calls) == 4 and [c.index for c in calls] == [0, 0, 2, 2]
    assert all(c.request.response_schema is PairwiseVerdict for c in calls)
    estimate = estimate_cost(LLMSettings(model="openai/gpt-4o-mini"), [c.request for c in calls])
    assert estimate["calls"] == 4 and estimate["prompt_tokens"] > 200
    assert server.request_count == 0
    with pytest.raises(ValueError, match="twice"):
        build_pairwise_calls([pair("a", "x", "y"), pair("a", "x", "z")])
    with pytest.raises(ValueError, match="criterion"):
        build_pairwise_calls(inputs, criterion="  ")


def test_nothing_to_judge(client: LLMClient, server: FakeOpenAIServer) -> None:
    result = run(client, [pair("a", None, "x"), pair("b", "x", None)])
    assert server.request_count == 0 and result.cases == []
    assert (result.wins, result.ties, result.losses, result.failures, result.skipped) == (0, 0, 0, 0, 2)
    assert result.flip_share is result.win_rate is result.sign_test_p is result.tie_share is None
    assert "wins / ties / losses" in result.text() and "Pairwise: cand vs base" in result.text()
    assert "Pairwise: cand vs base" in pairwise_html(result)


# -- the rule and the schema ----------------------------------------------------------------------


def test_combination_rule() -> None:
    assert combine("candidate", "candidate") == "win"
    assert combine("baseline", "baseline") == "loss"
    for first, second in [
        ("tie", "tie"),
        ("candidate", "baseline"),
        ("candidate", "tie"),
        ("tie", "baseline"),
    ]:
        assert combine(first, second) == combine(second, first) == "tie"  # type: ignore[arg-type]


def test_verdict_schema_normalises_numbers_and_case() -> None:
    assert PairwiseVerdict.model_validate({"reasoning": "r", "verdict": 2}).verdict == "2"
    assert PairwiseVerdict.model_validate({"reasoning": "r", "verdict": " Tie "}).verdict == "tie"
    for bad in ("3", "both", None, True):
        with pytest.raises(ValidationError):
            PairwiseVerdict.model_validate({"reasoning": "r", "verdict": bad})


# -- statistics -----------------------------------------------------------------------------------


def test_sign_test_known_values() -> None:
    assert sign_test(8, 2) == pytest.approx(0.109375)
    assert sign_test(2, 8) == pytest.approx(0.109375)
    assert sign_test(10, 0) == pytest.approx(2 / 2**10)
    assert sign_test(5, 5) == 1.0 and sign_test(0, 0) == 1.0
    with pytest.raises(ValueError):
        sign_test(-1, 3)


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(8, 10) or (0.0, 0.0)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    low, high = wilson_interval(10, 10) or (0.0, 0.0)
    assert round(low, 4) == 0.7225 and high == 1.0
    low, high = wilson_interval(0, 10) or (1.0, 1.0)
    assert low == 0.0 and round(high, 4) == 0.2775
    narrow, wide = wilson_interval(8, 10, 0.90), wilson_interval(8, 10, 0.99)
    assert narrow and wide and wide[0] < narrow[0] < 0.8 < narrow[1] < wide[1]
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


# -- HTML -----------------------------------------------------------------------------------------


def test_html_escapes_everything_it_did_not_write(
    client: LLMClient, script: ScriptedPairJudge, server: FakeOpenAIServer
) -> None:
    attack = "<script>alert(1)</script>"

    def quoting(answer_1: str, answer_2: str, attempt: int) -> str:
        return verdict("1" if answer_1.startswith("good") else "2", f"It said {attack}")

    script.policies["Q-<b>x</b>"] = quoting
    inputs = [pair("<img src=x>", f"good {attack}", "bad & worse", question="Q-<b>x</b>")]
    result = run(client, inputs, candidate="<i>cand</i>", baseline="base", criterion=f"Facts. {attack}")
    assert result.wins == 1
    html = pairwise_html(result)
    assert "<script" not in html and "<img" not in html and "<i>cand" not in html and "<b>x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<h3>Pairwise: &lt;i&gt;cand&lt;/i&gt; vs base</h3>" in html
    assert "bad &amp; worse" in html and "&lt;img src=x&gt;" in html
    assert "100.0%" in html  # win rate 1 of 1
    assert html.count("<table>") == html.count("</table>") == 2
