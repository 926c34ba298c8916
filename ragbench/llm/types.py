"""Settings, request, result and stats types shared by the LLM client, its cache and its providers."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragbench.llm.redaction import is_credential_key, refuse_url_credentials

Message = dict[str, Any]

# How the error of a call starts when the provider answered, but never with a reply that fits the schema.
INVALID_REPLY = "json_invalid"

# Request arguments that the client or its provider sets itself; `extra` must not override them, and
# never carry credentials (settings end up in configs, logs and cache keys).
RESERVED_EXTRA_KEYS = frozenset(
    {
        "model",
        "messages",
        "api_base",
        "base_url",
        "api_key",
        "temperature",
        "max_tokens",
        "seed",
        "timeout",
        "num_retries",
        "max_retries",
        "response_format",
        "stream",
        "drop_params",
    }
)


def credential_paths(value: Any, path: str = "extra") -> list[str]:
    """Where a nested mapping holds something credential-like (by key name, e.g. headers or AWS keys)."""
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        where = f"{path}.{key}"
        if is_credential_key(str(key)) and not isinstance(item, dict):
            found.append(where)
        found += credential_paths(item, where)
    return found


class LLMConfigError(RuntimeError):
    """A setup problem (unknown model, missing key, bad request, auth): retrying would not help."""


class LLMSettings(BaseModel):
    """Everything that selects and tunes one LLM; embedded in the benchmark config, hence strict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        min_length=1,
        description="a litellm model string (openai/gpt-4o-mini, ollama/llama3, openai/<alias> + api_base), "
        "local/<packaged GGUF name or .gguf path> for the in-process llama.cpp model, or <name>/<model> "
        "for a provider registered as <name>",
    )
    api_base: str | None = Field(default=None, description="base URL of an OpenAI-compatible or other server")
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the key for api_base; without it no real key is sent "
        "to a self-hosted OpenAI-compatible server",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="sampling temperature")
    max_tokens: int = Field(default=512, ge=1, description="longest reply, in tokens")
    concurrency: int = Field(default=4, ge=1, le=256, description="requests in flight at once (local: 1)")
    timeout_s: float = Field(default=120.0, gt=0, description="seconds one request may take")
    max_retries: int = Field(default=4, ge=0, description="retries of rate limits, timeouts, 5xx")
    json_retries: int = Field(default=2, ge=0, description="re-asks after an invalid structured answer")
    seed: int | None = Field(default=0, description="sampling seed, where the provider supports one")
    json_mode: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        default="auto",
        description="how structured output is requested: auto picks json_schema where litellm says the "
        "provider supports it, else json_object; 'prompt' sends no response_format (schema in prompt only)",
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="further litellm.completion arguments, e.g. top_p or stop"
    )

    @field_validator("api_base")
    @classmethod
    def _no_credential_in_api_base(cls, value: str | None) -> str | None:
        """api_base is part of the cell id and the cache key: a credential must not ride in it."""
        if value is None:
            return value
        return refuse_url_credentials(
            value,
            "api_base",
            "give the key through the environment (the provider's variable, or api_key_env)",
        )

    @field_validator("extra")
    @classmethod
    def _check_extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(RESERVED_EXTRA_KEYS.intersection(value))
        if clash:
            raise ValueError(
                f"extra must not set {', '.join(clash)}: they are LLMSettings fields or set by the client "
                "(API keys come from the environment only)"
            )
        credentials = sorted(credential_paths(value))
        if credentials:
            raise ValueError(
                f"extra holds credentials ({', '.join(credentials)}): a config is stored in the ZenML "
                "database, so credentials must come from the environment (the provider's variables, or "
                "api_key_env for a server at api_base)"
            )
        return value

    def result_fields(self) -> dict[str, Any]:
        """The settings that can change what the model returns: a cell's identity and cache keys hold
        these only, so tuning how a provider is reached renames nothing and recomputes nothing."""
        return self.model_dump(mode="json", include=set(RESULT_FIELDS))

    def operations(self) -> dict[str, Any]:
        """The settings that only change how the provider is reached (concurrency, timeouts, retries,
        which variable holds the key)."""
        return self.model_dump(mode="json", exclude=set(RESULT_FIELDS))

    @property
    def result_key(self) -> str:
        """`result_fields` as one canonical string, to look up this model's operations by."""
        return json.dumps(self.result_fields(), sort_keys=True, separators=(",", ":"))


RESULT_FIELDS = ("model", "api_base", "temperature", "max_tokens", "seed", "json_mode", "extra")


@dataclass(frozen=True)
class LLMRequest:
    """One item of `complete_many`: the messages and, optionally, the schema the answer must match."""

    messages: list[Message] | str
    response_schema: type[BaseModel] | None = None
    # Which repeat of the same request this is: repeats are cached apart (a repeat is never served the
    # first one's result) and, when the settings fix a seed, sample with seed + sample.
    sample: int = 0
    # A judge repeat (`ragbench.scoring.repeats`): its index and the orders its passages and options were
    # shown in. Part of the cache key, so an identical repeat is asked again instead of served from cache.
    repeat: Mapping[str, Any] | None = None


class LLMResult(BaseModel):
    """The outcome of one logical call; `error` is set (and `parsed` None) when it did not succeed.

    Token, latency and cost numbers add up every provider call this result needed (retries and
    JSON re-asks included); a cached result keeps the numbers of the call that produced it.
    `latency_s` excludes backoff sleeps, so it measures the model, not the rate limiter.
    """

    model: str
    text: str = ""
    parsed: dict[str, Any] | None = None
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cost_known: bool = True
    cached: bool = False
    attempts: int = 0
    json_reasks: int = 0
    retried_earlier_failure: bool = False  # this call failed in an earlier run and was made again

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def invalid_reply(self) -> bool:
        """The model answered every time, but no reply fitted the schema (re-asks included): a verdict on
        the model's output, not a provider failure that a later run could retry."""
        return self.error is not None and self.error.startswith(INVALID_REPLY)

    @property
    def known_cost_usd(self) -> float | None:
        """`cost_usd`, or None when litellm has no price for the model: unknown must not look free."""
        return self.cost_usd if self.cost_known else None

    @property
    def retries(self) -> int:
        """Provider calls repeated after a failure (rate limit, timeout, server error); re-asks excluded."""
        return max(0, self.attempts - 1 - self.json_reasks)


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of `known_cost_usd` values; None when any of them is unknown."""
    costs = list(costs)
    return None if any(cost is None for cost in costs) else sum(costs)


class Usage(BaseModel):
    """What some LLM calls cost, summed: calls asked (a cached one too), tokens and dollars; a cached call
    keeps the numbers it had."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: litellm has no price for the model

    def add(self, result: LLMResult) -> None:
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost_usd = total_cost([self.cost_usd, result.known_cost_usd])


class CallUsage(Usage):
    """What the LLM calls behind one record used, with how often they were repeated; `calls` is what a race
    counts against a full evaluation."""

    retries: int = 0
    json_reasks: int = 0
    calls_retried: int = 0  # calls that failed in an earlier run and were made again

    def add(self, result: LLMResult) -> None:
        super().add(result)
        self.retries += result.retries
        self.json_reasks += result.json_reasks
        self.calls_retried += result.retried_earlier_failure


def nearest_rank_percentile(values: Iterable[float], share: float) -> float:
    """The nearest-rank percentile (an observed value, never interpolated); 0.0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class LLMStats:
    """Running totals of one client, updated from many threads; `snapshot()` gives a plain dict.

    Tokens, cost and latencies count fresh provider work only (what was actually spent in this
    process); cache hits are counted separately.
    """

    requests: int = 0
    cache_hits: int = 0
    calls: int = 0
    retries: int = 0
    failures: int = 0
    json_reasks: int = 0
    json_failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0
    latencies_s: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **increments: float) -> None:
        """Add to counters atomically, e.g. ``stats.add(calls=1, retries=1)``."""
        with self._lock:
            for name, amount in increments.items():
                setattr(self, name, getattr(self, name) + amount)

    def record_fresh(self, result: LLMResult) -> None:
        """Account a result that came from the provider (not from the cache)."""
        with self._lock:
            self.requests += 1
            self.failures += result.error is not None
            self.prompt_tokens += result.prompt_tokens
            self.completion_tokens += result.completion_tokens
            self.cost_usd += result.cost_usd
            self.cost_unknown += not result.cost_known
            self.latencies_s.append(result.latency_s)

    def record_hit(self) -> None:
        with self._lock:
            self.requests += 1
            self.cache_hits += 1

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy of the totals, with latency summaries instead of the raw list."""
        with self._lock:
            latencies = sorted(self.latencies_s)
            data: dict[str, Any] = {
                name: getattr(self, name)
                for name in (
                    "requests",
                    "cache_hits",
                    "calls",
                    "retries",
                    "failures",
                    "json_reasks",
                    "json_failures",
                    "prompt_tokens",
                    "completion_tokens",
                    "cost_usd",
                    "cost_unknown",
                )
            }
        data["cost_usd"] = round(data["cost_usd"], 8)
        data["latency_s_total"] = round(sum(latencies), 4)
        data["latency_s_mean"] = round(sum(latencies) / len(latencies), 4) if latencies else 0.0
        data["latency_s_p50"] = round(nearest_rank_percentile(latencies, 0.5), 4)
        data["latency_s_p95"] = round(nearest_rank_percentile(latencies, 0.95), 4)
        data["latency_s_max"] = round(latencies[-1], 4) if latencies else 0.0
        return data


# A reader or judge as a config names it: a model string, or a mapping of LLMSettings fields.
LLMEntry = str | dict[str, Any]


def llm_settings(entry: LLMEntry, defaults: dict[str, Any]) -> LLMSettings:
    """A grid entry (model string or mapping) over the shared defaults of its role."""
    fields = {"model": entry} if isinstance(entry, str) else entry
    return LLMSettings(**{**defaults, **fields})
