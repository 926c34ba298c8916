"""The one LLM client: every LLM call in the project goes through `LLMClient`.

It sends each request through the model's provider (`ragbench.llm.providers`: litellm for any litellm
model string, the in-process ``local/`` models, a registered provider) and adds what every provider
shares: a disk cache, our own counted retries, the spend cap, structured-output validation with re-asks,
bounded concurrency and running stats. Failures of single calls come back as results with `error` set so a
benchmark can count and exclude them; setup problems (auth, bad request, unknown model) raise
`LLMConfigError` at once, because every further call would fail the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from tqdm.auto import tqdm

from ragbench.llm.budget import BudgetExhausted, SpendLedger, current_ledger, is_budget_refusal, refusal
from ragbench.llm.cache import ResultCache, SQLResultCache, cache_key, open_result_cache, remember_outcome
from ragbench.llm.errors import short_error
from ragbench.llm.pricing import as_messages
from ragbench.llm.provider import ProviderReply
from ragbench.llm.providers import provider_for
from ragbench.llm.retry import Failure, Retrying
from ragbench.llm.structured import parse_structured, reask_messages, schema_json, with_schema_instruction
from ragbench.llm.types import (
    INVALID_REPLY,
    LLMConfigError,
    LLMRequest,
    LLMResult,
    LLMSettings,
    LLMStats,
    Message,
)


class LLMClient:
    """Cached, retried, counted access to one configured LLM; safe to share between threads.

    `cache_location` is a folder for the SQLite cache (default ``$RAGBENCH_CACHE_DIR/llm`` or
    ``~/.cache/ragbench/llm``) or a database URL (see `ragbench.llm.cache`); `use_cache=False` turns the
    cache off. `backoff_base_s` scales the exponential backoff (tests make it tiny).
    `progress` controls tqdm bars in `complete_many` (None: only on a terminal).
    `max_consecutive_failures`: after that many calls in a row exhausted their retries (server down,
    wrong api_base), raise `LLMConfigError` instead of slowly failing every remaining request.
    `ledger`: the run's spend account every call sent is charged to first (`ragbench.llm.budget`); by
    default the one of the `spending` block the client is made in, if any.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        cache_location: str | Path | None = None,
        use_cache: bool = True,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        progress: bool | None = None,
        max_consecutive_failures: int | None = 8,
        ledger: SpendLedger | None = None,
    ) -> None:
        self.settings = settings
        self.provider = provider_for(settings)
        self.ledger = ledger if ledger is not None else current_ledger()
        self.retrying = Retrying(
            settings.max_retries, backoff_base_s, backoff_max_s, breaker_limit=max_consecutive_failures
        )
        self.cache: ResultCache | SQLResultCache | None = (
            open_result_cache(cache_location) if use_cache else None
        )
        self.progress = progress
        self.stats = LLMStats()
        self._slots = threading.BoundedSemaphore(self.effective_concurrency)
        self._ready_lock = threading.Lock()
        self._ready = False
        self._json_mode: str | None = None
        self._guards: dict[str, list[Any]] = {}
        self._guards_lock = threading.Lock()

    # -- public API ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the cache's database connections (the client must not be used afterwards)."""
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def effective_concurrency(self) -> int:
        """Requests in flight at once: the setting, or 1 for a provider that computes in this process."""
        return 1 if self.provider.in_process else self.settings.concurrency

    def cache_key(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        response_schema: type[BaseModel] | None = None,
        sample: int = 0,
        repeat: Mapping[str, Any] | None = None,
    ) -> str:
        """Hash of everything that changes the output; credentials are never part of it. A repeat
        (`sample` > 0, or a judge `repeat`) has a key of its own; the first keeps the key it always had."""
        s = self.settings
        return cache_key(
            ({"sample": sample} if sample else {})
            | ({"repeat": dict(repeat)} if repeat else {})
            | {
                "model": s.model,
                "api_base": s.api_base,
                "messages": as_messages(messages),
                "temperature": s.temperature,
                "max_tokens": s.max_tokens,
                "seed": s.seed,
                "json_mode": self._resolved_json_mode() if response_schema is not None else None,
                "schema": schema_json(response_schema) if response_schema is not None else None,
                "extra": s.extra,
            }
        )

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        *,
        response_schema: type[BaseModel] | None = None,
        sample: int = 0,
        repeat: Mapping[str, Any] | None = None,
    ) -> LLMResult:
        """One chat completion (a str is one user message); validated against `response_schema` if given.
        `sample` numbers repeats of the same request (see `LLMRequest.sample`), `repeat` a judge repeat
        (`LLMRequest.repeat`).

        Never raises for a failed call (the result's `error` says why) except `LLMConfigError`.
        """
        msgs = as_messages(messages)
        key = self.cache_key(msgs, response_schema, sample, repeat)
        guard = self._guard(key) if self.cache is not None else nullcontext()
        with guard:
            if self.cache is not None:
                cached = self._cached_result(key)
                if cached is not None:
                    self.stats.record_hit()
                    return cached
            result = self._generate(msgs, response_schema, sample)
            refused = is_budget_refusal(result.error)
            if self.cache is not None and not refused:  # a refused call was never made: nothing to remember
                result = self._remember(key, result)
        self.stats.record_fresh(result)
        return result

    def complete_many(
        self,
        requests: Sequence[LLMRequest | Sequence[Mapping[str, Any]] | str],
        *,
        desc: str = "LLM calls",
    ) -> list[LLMResult]:
        """Results in input order, computed `concurrency` at a time (local models one at a time)."""
        items = [r if isinstance(r, LLMRequest) else LLMRequest(messages=r) for r in requests]  # type: ignore[arg-type]
        results: list[LLMResult | None] = [None] * len(items)
        workers = max(1, min(self.effective_concurrency, len(items)))
        failed = cached = 0
        with tqdm(total=len(items), desc=desc, unit="call", disable=self._bar_disabled()) as bar:

            def done(index: int, result: LLMResult) -> None:
                nonlocal failed, cached
                results[index] = result
                failed += result.error is not None
                cached += result.cached
                bar.update(1)
                bar.set_postfix(cached=cached, failed=failed, refresh=False)

            if workers == 1:
                for index, item in enumerate(items):
                    done(
                        index,
                        self.complete(
                            item.messages,
                            response_schema=item.response_schema,
                            sample=item.sample,
                            repeat=item.repeat,
                        ),
                    )
            else:
                pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragbench-llm")
                try:
                    futures = {
                        pool.submit(
                            self.complete,
                            item.messages,
                            response_schema=item.response_schema,
                            sample=item.sample,
                            repeat=item.repeat,
                        ): index
                        for index, item in enumerate(items)
                    }
                    for future in as_completed(futures):
                        done(futures[future], future.result())
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
        return [r for r in results if r is not None]

    # -- internals -------------------------------------------------------------------------------
    def _cached_result(self, key: str) -> LLMResult | None:
        """The stored result, marked cached; an entry that no longer parses counts as a miss."""
        assert self.cache is not None
        raw = self.cache.get(key)
        if raw is None:
            return None
        try:
            return LLMResult.model_validate_json(raw).model_copy(
                update={"cached": True, "retried_earlier_failure": False}
            )
        except ValidationError:
            return None

    def _remember(self, key: str, result: LLMResult) -> LLMResult:
        """Store a success; remember a failure without storing it as a result (a later run makes the
        call again, and that call is marked as the retry of an earlier failure)."""
        assert self.cache is not None
        value = result.model_dump_json() if result.error is None else None
        retried = remember_outcome(self.cache, key, self.settings.model, value, result.error)
        return result.model_copy(update={"retried_earlier_failure": retried})

    def _resolved_json_mode(self) -> str:
        if self._json_mode is None:
            self._json_mode = self.provider.json_mode()
        return self._json_mode

    def _bar_disabled(self) -> bool | None:
        return None if self.progress is None else not self.progress

    @contextmanager
    def _guard(self, key: str) -> Iterator[None]:
        """One in-flight computation per cache key: a duplicate waits, then finds the cached result."""
        with self._guards_lock:
            entry = self._guards.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guards_lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._guards[key]

    def _ensure_ready(self) -> None:
        """Run the pre-flight once, before the first real call (cache hits need no credentials)."""
        with self._ready_lock:
            if self._ready:
                return
            self.provider.open()
            self._ready = True

    def _call_params(self, response_schema: type[BaseModel] | None, sample: int = 0) -> dict[str, Any]:
        """What every provider's request carries (the provider adds its own, such as credentials)."""
        s = self.settings
        params: dict[str, Any] = {
            "model": s.model,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "timeout": s.timeout_s,
            **s.extra,
        }
        if s.seed is not None:
            params["seed"] = s.seed + sample
        if s.api_base:
            params["api_base"] = s.api_base
        if response_schema is not None:
            response_format = self.provider.response_format(
                self._resolved_json_mode(), response_schema, schema_json(response_schema)
            )
            if response_format is not None:
                params["response_format"] = response_format
        return params

    def _call(self, messages: list[Message], params: dict[str, Any], out: LLMResult) -> ProviderReply | None:
        """One provider call with our retries; accumulates into `out`; None (and out.error) on failure."""
        most = self._most(messages)  # the prompt is tokenized once; each attempt is charged it

        def attempt() -> ProviderReply:
            reserved = self._reserve(most)
            self.stats.add(calls=1)
            reply = None
            started = time.monotonic()
            try:
                reply = self.provider.send(messages, params)
                return reply
            finally:
                if reserved is not None:
                    self._settle(reserved, reply, time.monotonic() - started)

        try:
            done = self.retrying.run(attempt, self._classify, slot=self._slots)
        except BudgetExhausted as refused:  # not the provider's failure: no retry, no breaker
            out.error = refusal(refused)
            return None
        out.attempts += done.attempts
        out.latency_s += done.latency_s
        self.stats.add(retries=done.retries)
        if self.ledger is not None:
            self.ledger.retried(done.retries)
        if done.value is not None:
            self.retrying.succeeded()
            self._account(done.value, out)
            return done.value
        out.error = done.error
        if done.exhausted and (in_a_row := self.retrying.failed()) is not None:
            # not chained: the provider's error text may echo credentials
            raise LLMConfigError(
                f"provider of {self.settings.model} is failing: {in_a_row} calls in a row failed after "
                f"{self.settings.max_retries} retries each (last: {done.failure.message}); is it "
                f"reachable{' at ' + self.settings.api_base if self.settings.api_base else ''}?"
            ) from None
        return None

    def _most(self, messages: list[Message]) -> tuple[int, float] | None:
        """The most a call of `messages` can cost: prompt tokens plus `max_tokens` of completion, and
        their price (a price the provider does not know as 0, which the plan refuses under a cost cap); None
        without a ledger, which needs no estimate."""
        if self.ledger is None:
            return None
        completion = self.settings.max_tokens
        prompt = self.provider.count_prompt_tokens(messages)
        return prompt + completion, self.provider.price_usd(prompt, completion) or 0.0

    def _reserve(self, most: tuple[int, float] | None) -> tuple[int, float] | None:
        """Charge the attempt about to be sent its most (a retry resends the prompt, so each attempt is
        charged); the reservation, or None without a ledger. `BudgetExhausted` when the cap would be
        crossed."""
        if self.ledger is None or most is None:
            return None
        self.ledger.reserve(1, *most)
        return most

    def _settle(self, reserved: tuple[int, float], reply: ProviderReply | None, seconds: float) -> None:
        """The reservation corrected to what the call used (a failed call: no tokens, no cost), and the
        call's seconds (a local model's compute) added to the step's."""
        assert self.ledger is not None
        self.ledger.timed(seconds)
        tokens = 0 if reply is None else reply.prompt_tokens + reply.completion_tokens
        self.ledger.settle(*reserved, tokens, 0.0 if reply is None else reply.cost_usd or 0.0)

    def _classify(self, error: Exception) -> Failure:
        """A setup problem raises at once (every further call would fail the same way); a problem with
        this request fails it; anything else (rate limit, 5xx, timeout, connection) is retried. A call the
        cap refused was never sent: it ends the loop (`_call` records it)."""
        if isinstance(error, BudgetExhausted):
            raise error
        kind = self.provider.classify(error)
        if kind == "config":  # not chained: the provider's error text may echo credentials
            raise LLMConfigError(f"{self.settings.model}: {short_error(error)}") from None
        return Failure(
            short_error(error), transient=kind != "item", retry_after_s=self.provider.retry_after_s(error)
        )

    @staticmethod
    def _account(reply: ProviderReply, out: LLMResult) -> None:
        out.prompt_tokens += reply.prompt_tokens
        out.completion_tokens += reply.completion_tokens
        if reply.cost_usd is None:
            out.cost_known = False
        else:
            out.cost_usd += reply.cost_usd

    def _generate(
        self, messages: list[Message], schema: type[BaseModel] | None, sample: int = 0
    ) -> LLMResult:
        self._ensure_ready()
        params = self._call_params(schema, sample)
        convo = with_schema_instruction(messages, schema) if schema is not None else messages
        out = LLMResult(model=self.settings.model)  # the calls' numbers add up here
        reasks = 0
        parsed: dict[str, Any] | None = None
        while True:
            reply = self._call(convo, params, out)
            if reply is None:
                break
            if reply.text is None:
                out.error = "request_failed: the provider returned no choices"
                break
            out.text = reply.text
            out.finish_reason = reply.finish_reason
            if schema is None:
                break
            parsed, problem = parse_structured(out.text, schema)
            if parsed is not None:
                break
            if reasks >= self.settings.json_retries:
                out.error = f"{INVALID_REPLY}: {problem}"
                self.stats.add(json_failures=1)
                break
            reasks += 1
            self.stats.add(json_reasks=1)
            convo = [*convo, *reask_messages(out.text, problem or "invalid JSON")]
        return out.model_copy(
            update={
                "parsed": parsed if out.error is None else None,
                "latency_s": round(out.latency_s, 6),
                "json_reasks": reasks,
            }
        )
