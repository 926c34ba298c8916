"""A spend cap that holds: every call a run sends (retries, re-asks and repeated samples included) is
charged to the run's account before it is sent, and a call that would take the account past a cap is not
sent at all.

Tokens and cost are unknown until a call returns, so a call is charged its most: its prompt tokens (counted
by the model's tokenizer) plus `max_tokens` of completion, at the model's price; when it returns, the
charge is corrected to what it really used. So the cap is never crossed, and a run stops a little before
it rather than a little after. A cached result costs nothing and is never charged.

The account lives in the LLM cache's store (`ragbench.llm.cache`): a SQLite file on one machine, the
shared database on a team's stack, so steps in separate processes or pods charge one account and a run
against a shared PostgreSQL cache charges only the calls it really sends. A step enters `spending` with its
run's account (from the run's operations artifact), and every client made inside it charges that account.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt

from ragbench.llm.cache import Charge, ResultCache, SQLResultCache, open_result_cache
from ragbench.section import Section

# The error a refused call's result carries: never cached, never retried, never counted as the provider's.
BUDGET_EXHAUSTED = "budget_exhausted"
# What a run stopped by its cap says to do.
BUDGET_ADVICE = (
    "(calls not sent: raise the config's budget and run again; the calls made are cached and not paid again)"
)


def refusal(reason: Exception | str) -> str:
    """The error a call the cap refused carries: one form, so every reader of results can tell it apart."""
    return f"{BUDGET_EXHAUSTED}: {reason}"


def is_budget_refusal(error: str | None) -> bool:
    """Whether a result's error is the cap's refusal (never sent) rather than a provider's failure."""
    return error is not None and error.startswith(BUDGET_EXHAUSTED)


_UNCAPPED_CALLS = _UNCAPPED_TOKENS = 2**62
_UNCAPPED_COST = 1e300


class BudgetConfig(Section):
    """The most a run may spend; any of the three, or none (no cap). Checked against the plan before any
    model loads, and against every call while the run goes."""

    max_cost_usd: PositiveFloat | None = Field(
        default=None, description="USD at litellm's prices; local models cost 0 (seconds of compute)"
    )
    max_calls: PositiveInt | None = Field(
        default=None, description="LLM and external-system calls sent, retries and re-asks included"
    )
    max_tokens: PositiveInt | None = Field(default=None, description="prompt plus completion tokens")

    @property
    def capped(self) -> bool:
        return any(cap is not None for cap in (self.max_cost_usd, self.max_calls, self.max_tokens))

    @property
    def caps(self) -> Charge:
        return (
            self.max_calls if self.max_calls is not None else _UNCAPPED_CALLS,
            self.max_tokens if self.max_tokens is not None else _UNCAPPED_TOKENS,
            self.max_cost_usd if self.max_cost_usd is not None else _UNCAPPED_COST,
        )

    def describe(self) -> str:
        parts = [
            f"{name} {value}"
            for name, value in (
                ("max_cost_usd", self.max_cost_usd),
                ("max_calls", self.max_calls),
                ("max_tokens", self.max_tokens),
            )
            if value is not None
        ]
        return ", ".join(parts) or "no cap"


class SpendAccount(BaseModel):
    """One run's account: where it is kept (the LLM cache's location) and its caps. Made once per run, when
    the pipeline is composed, and handed to every step in the run's operations."""

    account: str = Field(description="a fresh id per run: a rerun with a higher cap starts from zero")
    store: str | None = Field(default=None, description="the LLM cache: a folder or a database URL")
    budget: BudgetConfig

    @classmethod
    def new(cls, budget: BudgetConfig, store: str | Path | None) -> SpendAccount:
        return cls(account=uuid.uuid4().hex, store=None if store is None else str(store), budget=budget)


class PlannedSpend(BaseModel, frozen=True):
    """What a run's plan (its dry run) says it would send at most, new calls only (cached ones are free),
    with what the config's previous run says to expect of it; the run carries it as its `planned`
    parameter, and its report shows it beside what it spent (`ragbench.analysis.spend.RunSpend`)."""

    calls: int = Field(description="first attempts plus the expected retries")
    tokens: int = Field(description="prompt tokens counted plus max_tokens of completion per call: a bound")
    cost_usd: float | None = Field(description="None: a model litellm cannot price")
    retry_rate: float = Field(default=0.0, description="the expected retries per call, from history")
    expected_tokens: int | None = Field(default=None, description="at the previous run's share of the bound")
    expected_calls: int | None = Field(default=None, description="at the previous run's share of the plan")

    @property
    def first_attempts(self) -> int:
        """The plan's calls without the retries it expected."""
        return round(self.calls / (1 + self.retry_rate))

    def as_metadata(self) -> dict[str, int | float | None]:
        """The plan as the run carries it (its pipeline's `planned` parameter)."""
        return self.model_dump(mode="json") | {"retry_rate": round(self.retry_rate, 4)}

    def bounds_text(self) -> str:
        """The bounds, each with what the previous run's shares make of it: the dry run's and the run's."""
        about_calls = f" (about {self.expected_calls} expected)" if self.expected_calls is not None else ""
        about_tokens = f" (about {self.expected_tokens} expected)" if self.expected_tokens is not None else ""
        return f"{self.calls} calls{about_calls}, up to {self.tokens} tokens{about_tokens}"

    def text(self) -> str:
        cost = "unknown cost" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        retries = f", {self.retry_rate:.0%} retries expected" if self.retry_rate else ""
        return f"{self.bounds_text()}, {cost}{retries}"

    def over(self, budget: BudgetConfig, lower: str) -> list[str]:
        """Each cap the plan exceeds, by how much, and what to lower (`lower`: the config's knobs that
        change this plan, e.g. "generation.sample_size (3) or the grid's cells"); [] when within."""
        problems = []
        if budget.max_calls is not None and self.calls > budget.max_calls:
            problems.append(
                f"{self.calls} calls planned, {self.calls - budget.max_calls} over budget.max_calls "
                f"{budget.max_calls}"
            )
        if budget.max_tokens is not None and self.tokens > budget.max_tokens:
            problems.append(
                f"up to {self.tokens} tokens planned, {self.tokens - budget.max_tokens} over "
                f"budget.max_tokens {budget.max_tokens}"
            )
        if budget.max_cost_usd is not None and self.cost_usd is None:
            problems.append(
                "budget.max_cost_usd is set but litellm cannot price a model of this run: name a priced "
                "model, or cap calls or tokens instead"
            )
        elif (
            budget.max_cost_usd is not None
            and self.cost_usd is not None
            and self.cost_usd > budget.max_cost_usd
        ):
            problems.append(
                f"up to ${self.cost_usd:.4f} planned, ${self.cost_usd - budget.max_cost_usd:.4f} over "
                f"budget.max_cost_usd {budget.max_cost_usd}"
            )
        if problems:
            problems.append(f"lower {lower}, or raise the cap")
        return problems


class BudgetExhausted(Exception):
    """A call was not sent: it would have taken the run past its cap."""


@dataclass(frozen=True)
class Spent:
    calls: int
    tokens: int
    cost_usd: float
    refused: int  # calls not sent because of the cap


@dataclass
class Measured:
    """What one ledger (one step) sent: the account sums every step's, this is the step's own share, kept
    in the step's metadata so the run's spend reads per step and per role. `seconds`: time in calls, the
    measure of a local model's work (its cost is 0)."""

    calls: int = 0
    retries: int = 0  # of the calls, those that repeated a failed one (the plan's expected retries)
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0

    def as_metadata(self) -> dict[str, float | int]:
        return {
            "calls": self.calls,
            "retries": self.retries,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "seconds": round(self.seconds, 3),
        }


class SpendLedger:
    """Charges one account in its store; safe to share between threads (the store is)."""

    def __init__(self, account: SpendAccount) -> None:
        self.account = account
        self._store: ResultCache | SQLResultCache = open_result_cache(account.store)
        self._lock = threading.Lock()
        self.refused_here = 0  # calls this ledger refused (the account counts every process's)
        self.here = Measured()

    def reserve(self, calls: int, tokens: int, cost_usd: float) -> None:
        """Charge a call its most before it is sent; `BudgetExhausted` (nothing charged) past a cap."""
        if self._store.charge(self.account.account, (calls, tokens, cost_usd), self.account.budget.caps):
            with self._lock:
                self.here.calls += calls
                self.here.tokens += tokens
                self.here.cost_usd += cost_usd
        else:
            with self._lock:
                self.refused_here += 1
            spent = self.spent()
            raise BudgetExhausted(
                f"the run's cap ({self.account.budget.describe()}) would be crossed by this call "
                f"({calls} call(s), at most {tokens} tokens, ${cost_usd:.4f}); spent so far: {spent.calls} "
                f"calls, {spent.tokens} tokens, ${spent.cost_usd:.4f}"
            )

    def settle(self, reserved_tokens: int, reserved_cost: float, tokens: int, cost_usd: float) -> None:
        """Replace a reservation's tokens and cost by what the call used."""
        if (tokens, cost_usd) != (reserved_tokens, reserved_cost):
            self._store.settle(self.account.account, tokens - reserved_tokens, cost_usd - reserved_cost)
            with self._lock:
                self.here.tokens += tokens - reserved_tokens
                self.here.cost_usd += cost_usd - reserved_cost

    def timed(self, seconds: float) -> None:
        """Add a sent call's wall time (its retries' waits not included) to this step's seconds."""
        with self._lock:
            self.here.seconds += seconds

    def retried(self, retries: int) -> None:
        """Count the retries among this step's calls: what the dry run expects more of next time."""
        with self._lock:
            self.here.retries += retries

    def spent(self) -> Spent:
        return Spent(*self._store.spent(self.account.account))

    def close(self) -> None:
        self._store.close()


_current: contextvars.ContextVar[SpendLedger | None] = contextvars.ContextVar("ragbench_spend", default=None)


@contextmanager
def spending(account: SpendAccount | dict | None) -> Iterator[SpendLedger | None]:
    """Inside: every LLM and external-system client made charges `account` (None: no cap, nothing kept)."""
    if account is None:
        yield None
        return
    ledger = SpendLedger(SpendAccount.model_validate(account))
    token = _current.set(ledger)
    try:
        yield ledger
    finally:
        _current.reset(token)
        ledger.close()


def current_ledger() -> SpendLedger | None:
    """The ledger of the `spending` block this code runs in, if any (a client keeps the one it was made in,
    so its worker threads charge it too)."""
    return _current.get()
