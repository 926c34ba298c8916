"""The spend cap on the one LLM client, against the loopback fake OpenAI server (real litellm, real HTTP):
every call sent is charged first, retries included; a call past the cap is not sent, not cached and not
counted as the provider's failure; cached results cost nothing; the account is shared by every client and
thread that charges it, and never passes its cap even when they race."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ragbench.llm.budget import BUDGET_EXHAUSTED, BudgetConfig, SpendAccount, SpendLedger, spending
from tests.fake_openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")


def account(tmp_path: Path, **caps: float) -> SpendAccount:
    return SpendAccount.new(BudgetConfig(**caps), tmp_path / "cache")


def test_a_call_past_the_cap_is_not_sent_not_cached_and_not_a_provider_failure(tmp_path):
    budget = account(tmp_path, max_calls=3)
    with FakeOpenAIServer() as server, spending(budget) as ledger:
        server.inject("server_error")  # the first call is retried: two calls sent, both charged
        client = server.client(tmp_path / "cache", max_retries=2)
        results = [client.complete(f"question {n}") for n in range(4)]
        assert server.request_count == 3  # 2 for the first question (one retry), 1 for the second
        assert [r.error is None for r in results] == [True, True, False, False]
        refusal = f"{BUDGET_EXHAUSTED}: the run's cap (max_calls 3)"
        assert all(r.error.startswith(refusal) for r in results[2:])
        spent = ledger.spent()
        assert (spent.calls, spent.refused) == (3, 2)
        # refused calls are not remembered: a run with a higher cap makes them, and serves the others
        with spending(account(tmp_path, max_calls=2)) as second:
            again = server.client(tmp_path / "cache")
            assert [again.complete(f"question {n}").cached for n in range(4)] == [True, True, False, False]
            assert second.spent().calls == 2 and server.request_count == 5


def test_tokens_are_charged_at_their_most_first_then_settled_to_what_was_used(tmp_path):
    budget = account(tmp_path, max_tokens=10_000)
    with FakeOpenAIServer() as server, spending(budget) as ledger:
        client = server.client(tmp_path / "cache", max_tokens=500)
        result = client.complete("How many tokens is this?")
        assert result.error is None
        assert ledger.spent().tokens == result.prompt_tokens + result.completion_tokens
        # a call whose prompt plus max_tokens would cross the cap is refused though it might fit
        tight = SpendLedger(budget)
        tight.reserve(0, 10_000 - ledger.spent().tokens - 100, 0.0)
        assert client.complete("another question").error.startswith(BUDGET_EXHAUSTED)
        assert server.request_count == 1
        tight.close()


def test_a_priced_model_is_charged_its_cost_and_a_cost_cap_holds(tmp_path):
    budget = account(tmp_path, max_cost_usd=0.0001)
    with FakeOpenAIServer() as server, spending(budget) as ledger:
        client = server.client(tmp_path / "cache", model="openai/gpt-4o-mini", max_tokens=100)
        results = [client.complete(f"question {n} " + "word " * 50) for n in range(10)]
        sent = sum(r.error is None for r in results)
        assert 0 < sent < 10 and server.request_count == sent
        assert 0 < ledger.spent().cost_usd <= 0.0001


def test_no_account_no_charge_and_no_cap(tmp_path):
    with FakeOpenAIServer() as server:
        client = server.client(tmp_path / "cache")
        assert client.ledger is None
        assert all(client.complete(f"q{n}").error is None for n in range(3))


def test_concurrent_charges_never_pass_the_cap(tmp_path):
    """Eight threads, each with its own ledger on one SQLite store, race for 25 calls: exactly 25 pass."""
    budget = account(tmp_path, max_calls=25)
    passed: list[int] = []
    lock = threading.Lock()

    def charge() -> None:
        ledger = SpendLedger(budget)
        for _ in range(10):
            try:
                ledger.reserve(1, 0, 0.0)
            except Exception:
                continue
            with lock:
                passed.append(1)
        ledger.close()

    threads = [threading.Thread(target=charge) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ledger = SpendLedger(budget)
    spent = ledger.spent()
    ledger.close()
    assert len(passed) == spent.calls == 25 and spent.refused == 80 - 25


def test_the_budget_section_is_validated():
    assert not BudgetConfig().capped and BudgetConfig(max_calls=5).capped
    assert BudgetConfig(max_calls=5, max_cost_usd=0.5).describe() == "max_cost_usd 0.5, max_calls 5"
    with pytest.raises(ValueError):
        BudgetConfig(max_calls=0)
    with pytest.raises(ValueError):
        BudgetConfig(max_dollars=1)
