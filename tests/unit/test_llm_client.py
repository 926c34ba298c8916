"""The LLM client end to end against a loopback fake OpenAI server: real litellm, real HTTP, no network."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from ragbench.llm.cache import ResultCache
from ragbench.llm.client import LLMClient
from ragbench.llm.litellm_provider import LiteLLMProvider
from ragbench.llm.local import LocalProvider
from ragbench.llm.pricing import estimate_cost, estimate_cost_usd, estimate_prompt_tokens
from ragbench.llm.providers import provider_class
from ragbench.llm.readiness import check_llm_ready
from ragbench.llm.retry import Retrying
from ragbench.llm.structured import extract_json_object
from ragbench.llm.types import LLMConfigError, LLMRequest, LLMSettings, nearest_rank_percentile

try:
    from tests.fake_openai_server import FakeOpenAIServer, Fault, last_user_text
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer, Fault, last_user_text  # type: ignore[no-redef]

DUMMY_KEY = "sk-test-DUMMY-not-a-real-key-1234"


class Answer(BaseModel):
    answer: str
    confidence: int = Field(ge=1, le=5)


def json_responder(request: dict[str, Any]) -> str:
    """A well-behaved model: a valid `Answer` for every request."""
    return json.dumps({"answer": f"echo: {last_user_text(request)}", "confidence": 4})


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)


@pytest.fixture
def make_client(server: FakeOpenAIServer, tmp_path: Path) -> Callable[..., LLMClient]:
    """A client on the fake server, with a per-test cache and near-zero backoff."""

    def make(cache_dir: Path | None = None, **overrides: Any) -> LLMClient:
        return server.client(cache_dir or tmp_path / "cache", **{"model": "openai/fake-alias", **overrides})

    return make


# -- cache ---------------------------------------------------------------------------------------


def test_cache_hit_makes_no_second_request_and_survives_a_new_client(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client()
    first = client.complete("What is RAG?")
    second = client.complete([{"role": "user", "content": "What is RAG?"}])
    assert server.request_count == 1
    assert first.ok and not first.cached
    assert second.cached and second.text == first.text == "echo: What is RAG?"
    # A cached result keeps the numbers of the call that produced it.
    assert (second.prompt_tokens, second.completion_tokens, second.latency_s, second.attempts) == (
        first.prompt_tokens,
        first.completion_tokens,
        first.latency_s,
        first.attempts,
    )
    assert client.stats.snapshot()["cache_hits"] == 1

    reopened = make_client()
    third = reopened.complete("What is RAG?")
    assert third.cached and third.text == first.text
    assert server.request_count == 1
    assert reopened.stats.snapshot()["calls"] == 0


def test_output_changing_settings_miss_the_cache(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = json_responder
    make_client().complete("q")
    make_client(temperature=0.7).complete("q")
    make_client(model="openai/other-alias").complete("q")
    make_client(max_tokens=7).complete("q")
    make_client(seed=1).complete("q")
    make_client(extra={"top_p": 0.5}).complete("q")
    make_client().complete("q", response_schema=Answer)
    assert server.request_count == 7
    assert [r["model"] for r in server.requests[:3]] == ["fake-alias", "fake-alias", "other-alias"]
    assert server.requests[1]["temperature"] == 0.7
    make_client().complete("q")  # the first one again: a hit
    assert server.request_count == 7


def test_duplicate_requests_in_one_batch_are_computed_once(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    results = make_client().complete_many(["a", "b", "a", "a"], desc="dupes")
    assert [r.text for r in results] == ["echo: a", "echo: b", "echo: a", "echo: a"]
    assert server.request_count == 2


def test_unreadable_cache_entry_counts_as_a_miss(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client()
    assert client.cache is not None
    client.cache.put(client.cache_key("q"), "openai/fake-alias", '{"not": "an LLMResult"}')
    result = client.complete("q")
    assert result.ok and not result.cached and server.request_count == 1
    assert make_client().complete("q").cached  # and the fresh result replaced it


def test_use_cache_false_always_calls(server: FakeOpenAIServer, tmp_path: Path) -> None:
    settings = LLMSettings(model="openai/fake-alias", api_base=server.base_url)
    client = LLMClient(settings, use_cache=False, progress=False)
    client.complete("x")
    client.complete("x")
    assert server.request_count == 2
    assert client.cache is None


def test_api_key_is_never_stored(server: FakeOpenAIServer, make_client: Callable[..., LLMClient]) -> None:
    client = make_client()
    result = client.complete("secret?")
    assert client.cache is not None
    blob = b"".join(p.read_bytes() for p in client.cache.directory.iterdir() if p.is_file())
    assert DUMMY_KEY.encode() not in blob
    assert DUMMY_KEY not in result.model_dump_json()
    assert DUMMY_KEY not in json.dumps(client.stats.snapshot())
    with sqlite3.connect(client.cache.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1


def test_cache_is_shared_safely_between_processes(tmp_path: Path) -> None:
    """Three processes writing and reading one cache at once: no lost writes, no 'database is locked'."""
    script = (
        "import sys\n"
        "from ragbench.llm.cache import ResultCache\n"
        "cache = ResultCache(sys.argv[1])\n"
        "for i in range(60):\n"
        "    cache.put(f'{sys.argv[2]}-{i}', 'm', str(i))\n"
        "    assert cache.get(f'{sys.argv[2]}-{i}') == str(i)\n"
        "    cache.get(f'shared-{i % 7}')\n"
        "    cache.put(f'shared-{i % 7}', 'm', sys.argv[2])\n"
    )
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), name], cwd=root, stderr=subprocess.PIPE
        )
        for name in ("p0", "p1", "p2")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    assert len(ResultCache(tmp_path)) == 3 * 60 + 7


def test_cache_connections_of_finished_threads_are_closed(tmp_path: Path) -> None:
    """complete_many starts fresh worker threads per batch; their SQLite handles must not pile up."""
    cache = ResultCache(tmp_path)
    fds_before = len(os.listdir("/proc/self/fd"))

    def work(n: int) -> None:
        cache.put(f"k{n}", "m", "v")
        assert cache.get(f"k{n}") == "v"

    for batch in range(40):
        threads = [threading.Thread(target=work, args=(batch * 4 + i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 4
    assert len(cache) == 160
    cache.close()


# -- retries -------------------------------------------------------------------------------------


def test_rate_limit_then_success_is_retried_and_counted(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client()
    server.inject(Fault("rate_limit", retry_after=0))
    result = client.complete("hello")
    assert result.ok and result.text == "echo: hello"
    assert result.attempts == 2 and result.retries == 1
    stats = client.stats.snapshot()
    assert (stats["calls"], stats["retries"], stats["failures"]) == (2, 1, 0)
    assert server.request_count == 2


def test_retry_after_header_is_honoured(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client()
    client.complete("warm-up")  # litellm's first call carries one-off setup time
    server.inject(Fault("rate_limit", retry_after=0.4))
    started = time.perf_counter()
    result = client.complete("after")
    assert result.ok and result.attempts == 2
    assert time.perf_counter() - started >= 0.4
    assert result.latency_s < 0.4  # the wait is backoff, not model latency


def test_server_errors_exhaust_retries_into_an_error_result(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client(max_retries=2)
    server.inject("server_error", Fault("server_error", status=503), "server_error")
    result = client.complete("doomed")
    assert not result.ok and result.error is not None
    assert result.error.startswith("retries_exhausted")
    assert result.attempts == 3 and result.parsed is None
    stats = client.stats.snapshot()
    assert (stats["calls"], stats["retries"], stats["failures"]) == (3, 2, 1)
    # Not cached: asking again reaches the (now healthy) server.
    again = client.complete("doomed")
    assert again.ok and not again.cached and server.request_count == 4


def test_unreachable_provider_trips_the_breaker(tmp_path: Path) -> None:
    with FakeOpenAIServer() as gone:
        dead_base = gone.base_url  # nothing listens there once the server has stopped
    settings = LLMSettings(model="openai/fake-alias", api_base=dead_base, max_retries=1, concurrency=2)
    client = LLMClient(
        settings, cache_location=tmp_path, backoff_base_s=0.001, progress=False, max_consecutive_failures=3
    )
    with pytest.raises(LLMConfigError, match="3 calls in a row failed"):
        client.complete_many([f"q{i}" for i in range(20)], desc="down")
    assert client.stats.snapshot()["calls"] < 20


# -- the breaker under concurrency: a fake provider whose calls finish in a scripted order -----------


class _OrderedProvider:
    """Stands in for `litellm.completion`: every call waits in the provider until the test releases it,
    then succeeds or fails (a 503) as scripted by its prompt, so the calls in flight at once finish in an
    order the test chooses; no sleep, no timing."""

    def __init__(self, outcomes: dict[str, str]) -> None:
        self.outcomes = outcomes
        self.released = {prompt: threading.Event() for prompt in outcomes}
        self.arrived = 0
        self._arrival = threading.Condition()

    def __call__(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        from types import SimpleNamespace

        import litellm

        prompt = messages[-1]["content"]
        with self._arrival:
            self.arrived += 1
            self._arrival.notify_all()
        assert self.released[prompt].wait(timeout=30), f"{prompt} never released"
        if self.outcomes[prompt] == "fail":
            raise litellm.ServiceUnavailableError(message="down", llm_provider="openai", model="fake")
        message = SimpleNamespace(content=f"answer to {prompt}")
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message, finish_reason="stop")],
            usage=SimpleNamespace(prompt_tokens=1, completion_tokens=1),
        )

    def wait_for_all(self) -> None:
        with self._arrival:
            assert self._arrival.wait_for(lambda: self.arrived == len(self.outcomes), timeout=30)


def _finish_in_order(client: LLMClient, provider: _OrderedProvider) -> dict[str, Any]:
    """Start every scripted call at once (all in flight together), then let them finish one by one in
    script order, each only after the previous call has returned (its bookkeeping done). Returns each
    prompt's result, or the exception its call raised."""
    outcomes: dict[str, Any] = {}

    def call(prompt: str) -> None:
        try:
            outcomes[prompt] = client.complete(prompt)
        except Exception as error:  # the test looks at what was raised
            outcomes[prompt] = error

    threads = {prompt: threading.Thread(target=call, args=(prompt,)) for prompt in provider.outcomes}
    for thread in threads.values():
        thread.start()
    provider.wait_for_all()
    for prompt, thread in threads.items():
        provider.released[prompt].set()
        thread.join(timeout=30)
        assert not thread.is_alive(), f"{prompt} did not return"
    return outcomes


def _breaker_client(calls: int, max_consecutive_failures: int) -> LLMClient:
    settings = LLMSettings(
        model="openai/fake-alias", api_base="http://127.0.0.1:9", max_retries=0, concurrency=calls
    )
    return LLMClient(
        settings,
        use_cache=False,
        backoff_base_s=0.001,
        progress=False,
        max_consecutive_failures=max_consecutive_failures,
    )


@pytest.mark.parametrize(
    ("script", "tripped_by"),
    [
        # three in a row trip it, on the third
        (["fail", "fail", "fail", "ok"], 2),
        # a success between them resets the count: fail, fail, ok, fail, fail is never three in a row
        (["fail", "fail", "ok", "fail", "fail", "ok"], None),
        # ... and counting starts again after it: the third failure after the success trips it
        (["fail", "fail", "ok", "fail", "fail", "fail"], 5),
        (["ok", "fail", "ok", "fail", "ok", "fail", "fail", "fail"], 7),
    ],
)
def test_breaker_counts_failures_in_a_row_across_concurrent_calls(
    monkeypatch: pytest.MonkeyPatch, script: list[str], tripped_by: int | None
) -> None:
    import litellm

    provider = _OrderedProvider({f"q{i}": outcome for i, outcome in enumerate(script)})
    monkeypatch.setattr(litellm, "completion", provider)
    client = _breaker_client(len(script), max_consecutive_failures=3)
    outcomes = _finish_in_order(client, provider)
    for i, outcome in enumerate(script):
        got = outcomes[f"q{i}"]
        if i == tripped_by:
            assert isinstance(got, LLMConfigError), got
            assert "3 calls in a row failed" in str(got)
        elif outcome == "fail":
            assert not isinstance(got, Exception), f"q{i} tripped the breaker: {got}"
            assert got.error is not None and got.error.startswith("retries_exhausted")
        else:
            assert not isinstance(got, Exception) and got.ok, got


class _OwnedLock:
    """A lock that knows which thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: int | None = None

    def __enter__(self) -> _OwnedLock:
        self._lock.acquire()
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc: object) -> None:
        self.owner = None
        self._lock.release()


class _LockCheckedRetrying(Retrying):
    """Fails any read or write of the breaker's count made without holding the breaker's lock."""

    checking = False

    def _check(self) -> None:
        if self.checking:
            lock = self._lock
            assert isinstance(lock, _OwnedLock) and lock.owner == threading.get_ident(), (
                "the breaker's count was touched outside its lock"
            )

    @property
    def _count(self) -> int:  # type: ignore[override]
        self._check()
        return self.__dict__["_count_value"]

    @_count.setter
    def _count(self, value: int) -> None:
        self._check()
        self.__dict__["_count_value"] = value


def test_breaker_count_is_only_touched_under_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    script = ["fail", "ok", "fail", "fail", "ok", "fail"]
    provider = _OrderedProvider({f"q{i}": outcome for i, outcome in enumerate(script)})
    monkeypatch.setattr(litellm, "completion", provider)
    client = _breaker_client(len(script), max_consecutive_failures=3)
    retrying = _LockCheckedRetrying(0, 0.001, 0.001, breaker_limit=3)
    retrying._lock = _OwnedLock()  # type: ignore[assignment]
    retrying.checking = True
    client.retrying = retrying
    outcomes = _finish_in_order(client, provider)
    assert [isinstance(outcomes[f"q{i}"], Exception) for i in range(len(script))] == [False] * len(script), (
        outcomes
    )
    assert [outcomes[f"q{i}"].ok for i in range(len(script))] == [outcome == "ok" for outcome in script]


def test_timeout_is_retried(server: FakeOpenAIServer, make_client: Callable[..., LLMClient]) -> None:
    client = make_client(timeout_s=0.3)
    server.inject(Fault("timeout", delay_s=3.0))
    result = client.complete("slow")
    assert result.ok and result.attempts == 2
    assert client.stats.snapshot()["retries"] == 1


def test_non_json_http_body_is_retried(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.inject("bad_body")
    result = make_client().complete("proxy hiccup")
    assert result.ok and result.attempts == 2


@pytest.mark.parametrize("status", [400, 401])
def test_configuration_errors_raise_without_retrying(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient], status: int
) -> None:
    client = make_client()
    server.inject(Fault("client_error", status=status))
    with pytest.raises(LLMConfigError, match="openai/fake-alias"):
        client.complete("bad")
    assert server.request_count == 1
    assert client.stats.snapshot()["retries"] == 0


def test_errors_never_echo_the_api_key(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.inject(Fault("client_error", status=401, message=f"Incorrect API key provided: {DUMMY_KEY}"))
    with pytest.raises(LLMConfigError) as raised:
        make_client().complete("leak?")
    assert DUMMY_KEY not in str(raised.value) and "<OPENAI_API_KEY>" in str(raised.value)


def test_configuration_error_stops_a_batch(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.inject(Fault("client_error", status=401))
    with pytest.raises(LLMConfigError):
        make_client(concurrency=2).complete_many([f"q{i}" for i in range(6)], desc="auth")


# -- structured output ---------------------------------------------------------------------------


def test_malformed_json_is_reasked_once_then_parsed(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = json_responder
    server.inject("malformed_json")
    client = make_client()
    result = client.complete("2+3?", response_schema=Answer)
    assert result.ok and result.parsed is not None and result.parsed["confidence"] == 4
    assert result.json_reasks == 1 and result.attempts == 2
    assert result.retries == 0  # a re-ask is not a retry
    assert server.request_count == 2
    assert client.stats.snapshot()["json_reasks"] == 1
    # The re-ask shows the model its invalid output and what was wrong with it.
    followup = server.requests[1]["messages"]
    assert followup[-2] == {"role": "assistant", "content": "Sure! {not: valid json,,"}
    assert "not valid" in followup[-1]["content"]
    # The schema is stated in the prompt and JSON mode is requested.
    assert '"confidence"' in server.requests[0]["messages"][0]["content"]
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    # Token counts cover both calls.
    assert result.prompt_tokens > server.requests[0]["messages"][0]["content"].count(" ")


def test_always_malformed_json_gives_an_uncached_error_result(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = lambda request: '{"answer": "no confidence given"}'
    client = make_client(json_retries=2)
    result = client.complete("q", response_schema=Answer)
    assert result.error is not None and result.error.startswith("json_invalid")
    assert "confidence" in result.error
    assert result.parsed is None and result.json_reasks == 2
    assert server.request_count == 3
    stats = client.stats.snapshot()
    assert (stats["json_failures"], stats["failures"], stats["json_reasks"]) == (1, 1, 2)
    client.complete("q", response_schema=Answer)
    assert server.request_count == 6  # not cached


def test_fenced_json_with_prose_is_accepted_without_reask(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = lambda request: (
        'Here it is:\n```json\n{"answer": "x", "confidence": 2}\n```\nHope it helps.'
    )
    result = make_client().complete("q", response_schema=Answer)
    assert result.parsed == {"answer": "x", "confidence": 2} and result.json_reasks == 0


def test_json_mode_prompt_sends_no_response_format(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = json_responder
    result = make_client(json_mode="prompt").complete("q", response_schema=Answer)
    assert result.ok and "response_format" not in server.requests[0]


def test_json_schema_mode_sends_the_schema(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = json_responder
    make_client(json_mode="json_schema").complete("q", response_schema=Answer)
    response_format = server.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["answer", "confidence"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure, the result is {"a": {"b": [1, 2]}} as requested.', {"a": {"b": [1, 2]}}),
        ('Set {x} first, then {"a": 1}', {"a": 1}),
    ],
)
def test_extract_json_object(text: str, expected: dict[str, Any]) -> None:
    assert extract_json_object(text) == expected


def test_extract_json_object_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json_object("[1, 2, 3] and nothing else")


# -- concurrency, ordering, stats ----------------------------------------------------------------


def test_complete_many_runs_concurrently_up_to_the_limit(make_client: Callable[..., LLMClient]) -> None:
    with FakeOpenAIServer(latency_s=0.2) as slow:
        client = make_client(api_base=slow.base_url, concurrency=4)
        client.complete("warm-up")
        slow.reset_counters()
        prompts = [f"question {i}" for i in range(8)]
        started = time.perf_counter()
        results = client.complete_many(prompts, desc="concurrency")
        elapsed = time.perf_counter() - started
    assert [r.text for r in results] == [f"echo: {p}" for p in prompts]  # input order kept
    assert 2 <= slow.max_in_flight <= 4
    assert all(r.latency_s >= 0.2 for r in results)
    # Calls overlapped: one after another, their latencies would sum to less than the wall time they took.
    # A loaded machine slows both sides alike, so this holds however slow it is, and fails when serial.
    busy = sum(r.latency_s for r in results)
    assert busy > 1.5 * elapsed, f"8 calls spent {busy:.2f} s in {elapsed:.2f} s: not concurrent"


def test_complete_many_accepts_requests_with_schemas(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    server.responder = lambda request: (
        json_responder(request) if request.get("response_format") else f"plain: {last_user_text(request)}"
    )
    results = make_client().complete_many(
        [LLMRequest("a", response_schema=Answer), LLMRequest([{"role": "user", "content": "b"}]), "c"],
        desc="mixed",
    )
    assert results[0].parsed == {"answer": "echo: a", "confidence": 4}
    assert results[1].text == "plain: b" and results[1].parsed is None
    assert results[2].text == "plain: c"


def test_tokens_latency_and_stats_are_recorded(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    client = make_client()
    result = client.complete(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two"}]
    )
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.latency_s > 0 and result.finish_reason == "stop"
    assert result.cost_usd == 0.0 and result.cost_known is False  # an alias litellm has no price for
    client.complete([{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two"}])
    stats = client.stats.snapshot()
    assert stats["requests"] == 2 and stats["cache_hits"] == 1 and stats["calls"] == 1
    assert stats["prompt_tokens"] == result.prompt_tokens
    assert stats["completion_tokens"] == result.completion_tokens
    assert stats["latency_s_max"] == pytest.approx(result.latency_s, abs=1e-3)
    assert stats["cost_unknown"] == 1


def test_known_model_behind_api_base_is_priced(
    server: FakeOpenAIServer, make_client: Callable[..., LLMClient]
) -> None:
    result = make_client(model="openai/gpt-4o-mini").complete("price me")
    assert result.cost_known and result.cost_usd > 0


# -- pre-flight, settings, estimates -------------------------------------------------------------


def test_check_llm_ready_names_the_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        check_llm_ready(LLMSettings(model="openai/gpt-4o-mini"))
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    readiness = check_llm_ready(LLMSettings(model="openai/gpt-4o-mini"))
    assert readiness.provider == "openai"
    assert DUMMY_KEY not in repr(readiness)


def test_check_llm_ready_looks_where_the_steps_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the steps' environment, the client's own variables count for nothing, and litellm's check
    sees the steps' variables only for the check."""
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY, which are not set where the steps run"):
        check_llm_ready(LLMSettings(model="openai/gpt-4o-mini"), environment={})
    assert os.environ["OPENAI_API_KEY"] == DUMMY_KEY  # the process's environment is back as it was
    monkeypatch.delenv("OPENAI_API_KEY")
    assert check_llm_ready(LLMSettings(model="openai/gpt-4o-mini"), {"OPENAI_API_KEY": "<secret>"})
    assert "OPENAI_API_KEY" not in os.environ
    settings = LLMSettings(model="openai/m", api_base="http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    with pytest.raises(LLMConfigError, match="MY_KEY, which is not set or empty where the steps run"):
        check_llm_ready(settings, {"MY_KEY": " "})


def test_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient(LLMSettings(model="openai/gpt-4o-mini"), cache_location=tmp_path, progress=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        client.complete("hi")


def test_self_hosted_server_needs_no_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = LLMSettings(model="openai/fake-alias", api_base=server.base_url)
    check_llm_ready(settings)
    assert LLMClient(settings, cache_location=tmp_path, progress=False).complete("hi").ok


def test_unknown_model_string_is_rejected() -> None:
    with pytest.raises(LLMConfigError, match="unknown to litellm"):
        check_llm_ready(LLMSettings(model="no-such-provider/some-model"))


def test_unknown_local_model_is_rejected() -> None:
    with pytest.raises(LLMConfigError, match="packaged GGUF"):
        check_llm_ready(LLMSettings(model="local/no-such-model"))
    with pytest.raises(LLMConfigError, match="not found"):
        check_llm_ready(LLMSettings(model="local//nowhere/model.gguf"))


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "openai/x", "unknown_field": 1},
        {"model": "openai/x", "extra": {"api_key": "sk-..."}},
        {"model": "openai/x", "extra": {"num_retries": 3}},
        {"model": "openai/x", "concurrency": 0},
        {"model": ""},
    ],
)
def test_settings_are_strict(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        LLMSettings(**fields)


def test_settings_round_trip_and_pick_their_provider() -> None:
    settings = LLMSettings(model="local/qwen2.5-coder-1.5b-instruct", extra={"top_p": 0.9})
    assert provider_class(settings.model) is LocalProvider and LocalProvider.in_process
    assert provider_class("openai/gpt-4o-mini") is LiteLLMProvider and not LiteLLMProvider.in_process
    assert provider_class("gpt-4o-mini") is LiteLLMProvider  # no prefix: litellm reads it
    assert LLMSettings.model_validate(settings.model_dump()) == settings


def test_dry_run_estimates_make_no_call(server: FakeOpenAIServer) -> None:
    messages = [{"role": "user", "content": "How do I sort a list in Python?"}]
    tokens = estimate_prompt_tokens("openai/gpt-4o-mini", messages)
    assert 5 < tokens < 40
    assert estimate_prompt_tokens("local/qwen2.5-coder-1.5b-instruct", messages) > 0
    price = estimate_cost_usd("openai/gpt-4o-mini", 1_000_000, 0)
    assert price is not None and 0 < price < 10
    assert estimate_cost_usd("local/qwen2.5-coder-1.5b-instruct", 10**6, 10**6) == 0.0
    assert estimate_cost_usd("openai/not-a-priced-alias", 100, 100) is None
    batch: list[Any] = [messages, LLMRequest(messages, response_schema=Answer)]
    estimate = estimate_cost(LLMSettings(model="openai/gpt-4o-mini", max_tokens=100), batch)
    assert estimate["calls"] == 2 and estimate["completion_tokens"] == 200
    assert estimate["prompt_tokens"] > 2 * tokens  # the schema instruction counts too
    assert estimate["cost_usd"] is not None and estimate["cost_usd"] > 0
    assert server.request_count == 0


def test_fake_server_consumes_faults_in_order(server: FakeOpenAIServer) -> None:
    """The fake itself, over plain HTTP: faults apply to the next requests in order, then normal replies."""
    server.inject("server_error", Fault("rate_limit", retry_after=2))
    assert server.base_url.startswith("http://127.0.0.1:")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    statuses, retry_after = [], None
    for _ in range(3):
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                statuses.append(response.status)
                reply = json.loads(response.read())
        except urllib.error.HTTPError as error:
            statuses.append(error.code)
            retry_after = error.headers.get("Retry-After") or retry_after
    assert statuses == [500, 429, 200] and retry_after == "2"
    assert reply["choices"][0]["message"]["content"] == "echo: hi" and reply["usage"]["total_tokens"] > 0
    assert server.request_count == 3 and server.pending_faults == 0


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [
        ([], 0.95, 0.0),
        ([4.0], 0.95, 4.0),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([float(v) for v in range(1, 21)], 0.95, 19.0),
        # n = 30: 0.95 * 30 = 28.5 -> rank 29; rounding half to even would give rank 28 (the old bug)
        ([float(v) for v in range(1, 31)], 0.95, 29.0),
        ([float(v) for v in range(1, 11)], 1.0, 10.0),
    ],
)
def test_nearest_rank_percentile(values: list[float], share: float, expected: float) -> None:
    assert nearest_rank_percentile(values, share) == expected


def test_a_malformed_retry_after_falls_back_to_the_backoff_instead_of_raising():
    from types import SimpleNamespace

    from ragbench.llm.errors import retry_after_s

    assert retry_after_s(SimpleNamespace(headers={"retry-after": "soon"})) is None
    assert retry_after_s(SimpleNamespace(headers={"retry-after": "2"})) == 2.0
    assert retry_after_s(SimpleNamespace(headers={"retry-after-ms": "500"})) == 0.5
