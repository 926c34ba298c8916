"""The one retry loop and breaker (`ragbench.llm.retry.Retrying`) both clients use: bounded retries with a
wait between them, failures counted, the breaker tripped by failures in a row and reset by a success."""

from __future__ import annotations

import threading

import pytest

from ragbench.llm.retry import Failure, Retrying


class Flaky:
    """Fails with the scripted exceptions, then returns "ok"; records whether the slot was held."""

    def __init__(self, *failures: Exception, slot: threading.Semaphore | None = None) -> None:
        self.failures = list(failures)
        self.calls = 0
        self.slot = slot

    def __call__(self) -> str:
        self.calls += 1
        if self.slot is not None:
            assert not self.slot.acquire(blocking=False), "the slot is held while calling"
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def classify(error: Exception) -> Failure:
    if isinstance(error, KeyError):
        raise RuntimeError("setup") from None
    return Failure(str(error), transient=isinstance(error, TimeoutError), retry_after_s=0.0)


def test_transient_failures_are_retried_with_waits_outside_the_slot() -> None:
    slot = threading.Semaphore(1)
    retrying = Retrying(max_retries=2, base_s=0.001, max_s=0.001, breaker_limit=None)
    waits: list[tuple[int, float | None]] = []
    wait_s = retrying.wait_s
    retrying.wait_s = lambda attempt, after: waits.append((attempt, after)) or wait_s(attempt, after)  # type: ignore[method-assign]
    call = Flaky(TimeoutError("slow"), TimeoutError("slow"), slot=slot)
    done = retrying.run(call, classify, slot=slot)
    assert (done.value, done.failure, done.error, done.attempts, done.retries) == ("ok", None, None, 3, 2)
    assert waits == [(1, 0.0), (2, 0.0)]
    assert slot.acquire(blocking=False)  # released after the last attempt


def test_exhausted_and_item_failures_say_so_and_a_setup_error_raises() -> None:
    retrying = Retrying(max_retries=1, base_s=0.001, max_s=0.001, breaker_limit=None)
    exhausted = retrying.run(Flaky(TimeoutError("slow"), TimeoutError("slower")), classify)
    assert exhausted.exhausted and exhausted.error == "retries_exhausted: slower (after 2 attempts)"
    item = retrying.run(Flaky(ValueError("bad reply")), classify)
    assert not item.exhausted and item.attempts == 1 and item.error == "request_failed: bad reply"
    with pytest.raises(RuntimeError, match="setup"):
        retrying.run(Flaky(KeyError("key")), classify)


def test_the_breaker_trips_on_failures_in_a_row_and_a_success_resets_it() -> None:
    retrying = Retrying(max_retries=0, base_s=0.001, max_s=0.001, breaker_limit=3)
    assert [retrying.failed(), retrying.failed()] == [None, None]
    retrying.succeeded()
    assert [retrying.failed(), retrying.failed(), retrying.failed()] == [None, None, 3]
    never = Retrying(max_retries=0, base_s=0.001, max_s=0.001, breaker_limit=None)
    assert {never.failed() for _ in range(20)} == {None}
