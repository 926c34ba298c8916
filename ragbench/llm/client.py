"""The one LLM client: every LLM call in the project goes through `LLMClient`.

It wraps `litellm.completion` (any litellm model string, plus the in-process ``local/`` provider) with
a disk cache, our own counted retries, structured-output validation with re-asks, bounded
concurrency and running stats. Failures of single calls come back as results with `error` set so a
benchmark can count and exclude them; setup problems (auth, bad request, unknown model) raise
`LLMConfigError` at once, because every further call would fail the same way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from tqdm.auto import tqdm

from ragbench.llm import local
from ragbench.llm.budget import BudgetExhausted, SpendLedger, current_ledger, is_budget_refusal, refusal
from ragbench.llm.cache import ResultCache, SQLResultCache, cache_key, open_result_cache, remember_outcome
from ragbench.llm.errors import classify_error, retry_after_s, short_error
from ragbench.llm.pricing import as_messages, estimate_cost_usd, estimate_prompt_tokens
from ragbench.llm.readiness import PLACEHOLDER_KEY, check_llm_ready, json_mode, sends_placeholder_key
from ragbench.llm.retry import Failure, Retrying
from ragbench.llm.runtime import get_litellm
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

# --------------------------------------------------------------------------------------------------
# Pre-flight and estimates (no LLM call)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Error classification
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------------


@dataclass
class _Outcome:
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cost_known: bool = True
    attempts: int = 0


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
        self.ledger = ledger if ledger is not None else current_ledger()
        self.retrying = Retrying(
            settings.max_retries, backoff_base_s, backoff_max_s, breaker_limit=max_consecutive_failures
        )
        self.cache: ResultCache | SQLResultCache | None = (
            open_result_cache(cache_location) if use_cache else None
        )
        self.progress = progress
        self.stats = LLMStats()
        self._slots = threading.BoundedSemaphore(1 if settings.is_local else settings.concurrency)
        self._ready_lock = threading.Lock()
        self._ready = False
        self._api_key: str | None = None  # set only for a server at api_base (see sends_placeholder_key)
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
        """Requests in flight at once: the setting, or 1 for in-process local models."""
        return 1 if self.settings.is_local else self.settings.concurrency

    def cache_key(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        response_schema: type[BaseModel] | None = None,
        sample: int = 0,
    ) -> str:
        """Hash of everything that changes the output; credentials are never part of it. A repeat
        (`sample` > 0) has a key of its own; the first keeps the key it always had."""
        s = self.settings
        return cache_key(
            ({"sample": sample} if sample else {})
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
    ) -> LLMResult:
        """One chat completion (a str is one user message); validated against `response_schema` if given.
        `sample` numbers repeats of the same request (see `LLMRequest.sample`).

        Never raises for a failed call (the result's `error` says why) except `LLMConfigError`.
        """
        msgs = as_messages(messages)
        key = self.cache_key(msgs, response_schema, sample)
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
                            item.messages, response_schema=item.response_schema, sample=item.sample
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
            self._json_mode = json_mode(self.settings)
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
            readiness = check_llm_ready(self.settings)
            if self.settings.api_key_env is not None:
                self._api_key = os.environ[self.settings.api_key_env]
            elif sends_placeholder_key(self.settings, readiness.provider):
                self._api_key = PLACEHOLDER_KEY  # the SDK insists on some key; a local server ignores it
            if self.settings.is_local:
                local.register_local_provider()
                local.get_local_model(local.local_model_name(self.settings.model))
            self._ready = True

    def _call_params(self, response_schema: type[BaseModel] | None, sample: int = 0) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {
            "model": s.model,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "timeout": s.timeout_s,
            "num_retries": 0,  # retries are ours, so they are counted
            "max_retries": 0,  # nor may the OpenAI SDK retry underneath
            "drop_params": True,  # e.g. seed for providers without it
            **s.extra,
        }
        if s.seed is not None:
            params["seed"] = s.seed + sample
        if s.api_base:
            params["api_base"] = s.api_base
        if self._api_key is not None:
            params["api_key"] = self._api_key
        if response_schema is not None:
            mode = self._resolved_json_mode()
            schema = schema_json(response_schema)
            if mode == "json_schema" and s.is_local:
                params["response_format"] = {"type": "json_object", "schema": schema}  # llama-cpp's form
            elif mode == "json_schema":
                name = "".join(c if c.isalnum() or c in "_-" else "_" for c in response_schema.__name__)[:64]
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name or "response", "schema": schema, "strict": False},
                }
            elif mode == "json_object":
                params["response_format"] = {"type": "json_object"}
        return params

    def _call(self, messages: list[Message], params: dict[str, Any], out: _Outcome) -> Any | None:
        """One provider call with our retries; accumulates into `out`; None (and out.error) on failure."""
        litellm = get_litellm()
        most = self._most(messages)  # the prompt is tokenized once; each attempt is charged it

        def attempt() -> Any:
            reserved = self._reserve(most)
            self.stats.add(calls=1)
            response = None
            started = time.monotonic()
            try:
                response = litellm.completion(messages=messages, **params)
                return response
            finally:
                if reserved is not None:
                    self._settle(reserved, response, time.monotonic() - started)

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
        if done.failure is None:
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
        their price (a price litellm does not know as 0, which the plan refuses under a cost cap); None
        without a ledger, which needs no estimate."""
        if self.ledger is None:
            return None
        model, completion = self.settings.model, self.settings.max_tokens
        prompt = estimate_prompt_tokens(model, messages)
        return prompt + completion, estimate_cost_usd(model, prompt, completion) or 0.0

    def _reserve(self, most: tuple[int, float] | None) -> tuple[int, float] | None:
        """Charge the attempt about to be sent its most (a retry resends the prompt, so each attempt is
        charged); the reservation, or None without a ledger. `BudgetExhausted` when the cap would be
        crossed."""
        if self.ledger is None or most is None:
            return None
        self.ledger.reserve(1, *most)
        return most

    def _settle(self, reserved: tuple[int, float], response: Any | None, seconds: float) -> None:
        """The reservation corrected to what the call used (a failed call: no tokens, no cost), and the
        call's seconds (a local model's compute) added to the step's."""
        assert self.ledger is not None
        self.ledger.timed(seconds)
        used = _Outcome()
        if response is not None:
            self._account(response, used)
        self.ledger.settle(*reserved, used.prompt_tokens + used.completion_tokens, used.cost_usd)

    def _classify(self, error: Exception) -> Failure:
        """A setup problem raises at once (every further call would fail the same way); a problem with
        this request fails it; anything else (rate limit, 5xx, timeout, connection) is retried. A call the
        cap refused was never sent: it ends the loop (`_call` records it)."""
        if isinstance(error, BudgetExhausted):
            raise error
        kind = classify_error(error)
        if kind == "config":  # not chained: the provider's error text may echo credentials
            raise LLMConfigError(f"{self.settings.model}: {short_error(error)}") from None
        return Failure(short_error(error), transient=kind != "item", retry_after_s=retry_after_s(error))

    def _account(self, response: Any, out: _Outcome) -> None:
        usage = getattr(response, "usage", None)
        out.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        out.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        if self.settings.is_local:
            return  # free, and known to be
        litellm = get_litellm()
        try:
            out.cost_usd += float(litellm.completion_cost(completion_response=response))
        except Exception:
            out.cost_known = False

    def _generate(
        self, messages: list[Message], schema: type[BaseModel] | None, sample: int = 0
    ) -> LLMResult:
        self._ensure_ready()
        params = self._call_params(schema, sample)
        convo = with_schema_instruction(messages, schema) if schema is not None else messages
        out = _Outcome()
        reasks = 0
        parsed: dict[str, Any] | None = None
        while True:
            response = self._call(convo, params, out)
            if response is None:
                break
            if not response.choices:
                out.error = "request_failed: the provider returned no choices"
                break
            choice = response.choices[0]
            out.text = choice.message.content or ""
            out.finish_reason = choice.finish_reason
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
        return LLMResult(
            model=self.settings.model,
            text=out.text,
            parsed=parsed if out.error is None else None,
            error=out.error,
            finish_reason=out.finish_reason,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            latency_s=round(out.latency_s, 6),
            cost_usd=out.cost_usd,
            cost_known=out.cost_known,
            attempts=out.attempts,
            json_reasks=reasks,
        )
