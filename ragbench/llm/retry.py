"""Retries and the breaker, one implementation for the LLM client and the external-system client.

Both clients make a call, retry it when it failed for a reason that may pass (rate limit, 5xx, timeout)
after a wait (the server's Retry-After when it sent one, capped, else exponential backoff with equal
jitter), give up after `max_retries` retries with a counted failure, and stop the whole run with one
message once a number of calls in a row have failed (the breaker: the provider is down, not flaky).
What counts as transient, and which failures feed the breaker, each client decides: it owns the meaning
of its errors, this module only the loop and the counting."""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Generic, TypeVar

MAX_RETRY_AFTER_S = 120.0

T = TypeVar("T")


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After value (a number of seconds or an HTTP date); None when it is absent or
    neither, so the caller falls back to its backoff."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def backoff_s(attempt: int, retry_after_s: float | None, base_s: float, max_s: float) -> float:
    """The wait before retry `attempt` (1-based)."""
    if retry_after_s is not None:
        return min(retry_after_s, MAX_RETRY_AFTER_S)
    ceiling = min(max_s, base_s * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)  # "equal jitter"


@dataclass(frozen=True)
class Failure:
    """One failed attempt as the calling client classifies it. `message` is already safe to show (the
    client has cleaned it of secrets); `transient` failures are retried, others fail the item at once."""

    message: str
    transient: bool
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Attempts(Generic[T]):
    """A retried call's outcome: the value, or the last failure (`exhausted` when it was transient and
    the retries ran out); the attempts made and the seconds spent in them (waits between attempts
    excluded: they are backoff, not latency)."""

    value: T | None
    failure: Failure | None
    exhausted: bool
    attempts: int
    latency_s: float

    @property
    def retries(self) -> int:
        return self.attempts - 1

    @property
    def error(self) -> str | None:
        """The failure as both clients record it: `retries_exhausted: ...` or `request_failed: ...`."""
        if self.failure is None:
            return None
        if self.exhausted:
            return f"retries_exhausted: {self.failure.message} (after {self.attempts} attempts)"
        return f"request_failed: {self.failure.message}"


class Retrying:
    """A client's retry policy and breaker; safe to share between its threads.

    `breaker_limit`: failures in a row that trip the breaker (None: never). The count is read and written
    only under its lock, since worker threads finish in any order."""

    def __init__(self, max_retries: int, base_s: float, max_s: float, breaker_limit: int | None) -> None:
        self.max_retries = max_retries
        self.base_s = base_s
        self.max_s = max_s
        self.breaker_limit = breaker_limit
        self._lock = threading.Lock()
        self._count = 0

    def wait_s(self, attempt: int, retry_after_s: float | None) -> float:
        return backoff_s(attempt, retry_after_s, self.base_s, self.max_s)

    def run(
        self,
        call: Callable[[], T],
        classify: Callable[[Exception], Failure],
        slot: AbstractContextManager[object] | None = None,
    ) -> Attempts[T]:
        """`call` until it returns, fails for good, or has been retried `max_retries` times.

        `classify` turns an exception into a `Failure`, or raises (a setup error no retry can fix ends
        the loop at once). `slot` (a semaphore: bounded concurrency) is held for each attempt only, never
        while waiting."""
        latency = 0.0
        for attempt in range(1, self.max_retries + 2):
            with slot if slot is not None else nullcontext():
                started = time.perf_counter()
                try:
                    value = call()
                except Exception as error:
                    latency += time.perf_counter() - started
                    caught = error
                else:
                    latency += time.perf_counter() - started
                    return Attempts(value, None, False, attempt, latency)
            failure = classify(caught)
            if not failure.transient or attempt > self.max_retries:
                return Attempts(None, failure, failure.transient, attempt, latency)
            time.sleep(self.wait_s(attempt, failure.retry_after_s))
        raise AssertionError("unreachable")

    def succeeded(self) -> None:
        """A call succeeded: the failures so far were not in a row."""
        with self._lock:
            self._count = 0

    def failed(self) -> int | None:
        """Count one more failure in a row; the count when it trips the breaker, else None (the caller
        raises its own error, in its own words)."""
        with self._lock:
            self._count += 1
            in_a_row = self._count
        tripped = self.breaker_limit is not None and in_a_row >= self.breaker_limit
        return in_a_row if tripped else None
