"""Spend as measured: a ledger with no cap still counts what its step sent (calls, the retries among them,
tokens, cost, seconds in calls) against the loopback fake OpenAI server; a run's steps sum per role; the
plan expects the previous run's retries and says so."""

from __future__ import annotations

import pytest

from ragbench.analysis.spend import RunSpend, Tally, role_of, run_spend
from ragbench.config.dry_run import planned_spend
from ragbench.llm.budget import BudgetConfig, SpendAccount, spending
from tests.fake_openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")


def test_an_uncapped_ledger_counts_calls_retries_tokens_and_seconds(tmp_path):
    uncapped = SpendAccount.new(BudgetConfig(), tmp_path / "cache")
    with FakeOpenAIServer() as server, spending(uncapped) as ledger:
        assert ledger is not None
        server.inject("server_error")  # the first call fails once: two calls sent for it
        client = server.client(tmp_path / "cache", max_retries=2)
        results = [client.complete(f"question {n}") for n in range(3)]
        assert all(r.error is None for r in results) and server.request_count == 4
        here = ledger.here
        assert (here.calls, here.retries) == (4, 1)
        # what the calls used, not what was reserved (prompt plus max_tokens)
        assert here.tokens == sum(r.prompt_tokens + r.completion_tokens for r in results)
        assert here.seconds > 0 and here.cost_usd == 0.0  # an unpriced (local) model: seconds, no cost
        assert ledger.spent().calls == 4  # the account in the store counts the same
        # a cached result is not sent, so not counted
        assert client.complete("question 0").cached and ledger.here.calls == 4
        assert here.as_metadata()["retries"] == 1


def test_a_runs_steps_sum_per_role_and_a_cached_step_counts_nothing():
    assert [role_of(s) for s in ("answer_a1", "judge_b2", "judge_card_1", "rewrite_hyde", "ingest")] == [
        "reader",
        "judge",
        "judge check",
        "rewrite",
        "other",
    ]
    step = {"calls": 5, "retries": 1, "tokens": 100, "cost_usd": 0.01, "seconds": 2.0}
    spend = run_spend(
        [
            ("answer_a", step),
            ("answer_b", step),
            ("judge_a", step),
            ("judge_b", None),
            ("ingest", {"calls": 0}),
            ("judge_card_0", step),  # listed apart by the plan: not in its token share
        ],
        planned={"calls": 12, "tokens": 400, "cost_usd": 0.05, "retry_rate": 0.25},
    )
    assert spend.roles["reader"] == Tally(calls=10, retries=2, tokens=200, cost_usd=0.02, seconds=4.0)
    assert set(spend.roles) == {"reader", "judge", "judge check"}  # the step that sent nothing: no role
    assert spend.total.calls == 20 and spend.total.retry_rate == 4 / 16
    (line,) = spend.lines()
    # spent on the plan's roles beside the plan; the judge card apart, as the dry run lists it
    planned_part, apart = line.split(" Besides the plan: ")
    assert planned_part.startswith(
        "Planned: 12 calls, up to 400 tokens, $0.0500, 25% retries expected. "
        "Spent on it: 15 calls (3 retries)"
    )
    assert "judge 5 calls (1 retries)" in planned_part and "reader 10 calls (2 retries)" in planned_part
    assert apart.startswith("judge check 5 calls (1 retries)")
    assert spend.token_share == 300 / 400  # what the next plan expects of its bound
    assert RunSpend().lines() == ["Spent: 0 calls (0 retries), 0 tokens, $0.0000, 0.0 s in calls."]


def test_the_plan_expects_the_previous_runs_retries_in_its_calls_not_its_tokens():
    rows = [{"llm_calls": 40, "prompt_tokens": 1000, "completion_tokens_max": 500, "cost_usd": 0.1}]
    plain, retried = planned_spend(rows), planned_spend(rows, retry_rate=0.25)
    assert (plain.calls, retried.calls) == (40, 50)
    assert plain.tokens == retried.tokens == 1500  # a failed call is charged no tokens
    # the budget check counts the expected retries: 50 calls are over a cap of 45
    assert not plain.over(BudgetConfig(max_calls=45), "x") and retried.over(BudgetConfig(max_calls=45), "x")
    assert plain.expected_tokens is None  # no earlier run: only the bound
    # the share of its bound the previous run used makes the bound an expectation
    # and the share of its first attempts it sent (a race stopped half its calls) makes the calls one
    expected = planned_spend(rows, retry_rate=0.25, token_share=0.4, call_share=0.5)
    assert expected.as_metadata() == {
        "calls": 50,
        "tokens": 1500,
        "cost_usd": 0.1,
        "retry_rate": 0.25,
        "expected_tokens": 600,
        "expected_calls": 25,  # 40 first attempts x 0.5 sent x 1.25 with retries
    }
    # the budget check keeps the bound: the cap must hold however far the run goes
    assert expected.over(BudgetConfig(max_calls=45), "x")


def test_the_share_of_its_first_attempts_a_run_sent_is_of_the_roles_the_plan_counts():
    planned = {"calls": 50, "tokens": 1000, "cost_usd": 0.0, "retry_rate": 0.25}  # 40 first attempts
    spend = run_spend(
        [
            ("answer_r1", {"calls": 16, "retries": 1}),
            ("judge_r1", {"calls": 9}),
            ("judge_card_0", {"calls": 5}),
        ],
        planned,
    )
    assert spend.call_share == (15 + 9) / 40  # retries and the judge card's calls left out
    assert RunSpend(roles=spend.roles).call_share is None  # a run without a plan expects nothing
    assert spend.as_metadata()["total"]["calls"] == 30
