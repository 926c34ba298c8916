"""ragbench.generation.external against a loopback fake RAG service and a fake Python RAG system: replies
read through
JMESPath, the result cache and its key, counted retries that honour Retry-After, failures never cached,
the breaker, credentials that never leak, config validation, source matching and bounded concurrency."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from ragbench.generation.external import ExternalClient, ExternalResult
from ragbench.generation.systems import ExternalSystem, ExternalSystemError, SourceMatch, missing_environment
from ragbench.llm.retry import parse_retry_after
from tests import fake_rag_system
from tests.fake_rag_service import FakeRagService

REPO_ROOT = Path(__file__).resolve().parents[2]
# A credential under a deliberately harmless variable name, so only the client's own redaction of its
# header values (not the generic secret-looking-name rule) can keep it out of text.
SECRET_ENV = "RAG_HEADER_VALUE"
TOKEN = "s3cr3t-TOKEN-value-123"
SECRET_VALUE = f"Bearer {TOKEN}"
SECRET_HEADERS_ENV = {"Authorization": SECRET_ENV}


# -- helpers -----------------------------------------------------------------------------------------


def http_system(url: str, *, http: dict[str, Any] | None = None, **fields: Any) -> ExternalSystem:
    return ExternalSystem(name="team-rag", http={"url": url, **(http or {})}, **fields)


def python_system(target: str, **fields: Any) -> ExternalSystem:
    return ExternalSystem(name="team-py", python=target, **fields)


@contextmanager
def client_for(
    system: ExternalSystem, tmp_path: Path, environment: dict[str, str] | None = None, **settings: Any
) -> Iterator[ExternalClient]:
    """A client with its cache in `tmp_path`, a near-zero backoff and no progress bar; as in one pipeline
    run (`run_scope`), so a system without a version is cached too (see the unversioned tests)."""
    fields: dict[str, Any] = {
        "cache_location": str(tmp_path / "cache"),
        "environment": environment or {},
        "run_scope": "run-1",
        "backoff_base_s": 0.001,
        "progress": False,
    }
    fields.update(settings)
    with ExternalClient(system, **fields) as client:
        yield client


def sources_of(result: ExternalResult) -> list[str | None]:
    assert result.reply is not None, result.error
    return [context.source for context in result.reply.contexts]


def texts_of(result: ExternalResult) -> list[str]:
    assert result.reply is not None, result.error
    return [context.text for context in result.reply.contexts]


def assert_no_secret(text: str) -> None:
    """Neither the header value nor any 6-character piece of its token is in `text`."""
    assert SECRET_VALUE not in text
    pieces = [TOKEN[start : start + 6] for start in range(len(TOKEN) - 5)]
    leaked = [piece for piece in pieces if piece in text]
    assert not leaked, f"pieces of the credential {leaked} in: {text}"


def exception_text(error: BaseException) -> str:
    """Everything a traceback of `error` would print, its chained exceptions included."""
    return f"{error!s}\n{error!r}\n" + "".join(traceback.format_exception(error))


@pytest.fixture
def service() -> Iterator[FakeRagService]:
    with FakeRagService() as fake:
        yield fake


@pytest.fixture
def rag_system() -> Iterator[ModuleType]:
    fake_rag_system.reset()
    yield fake_rag_system
    fake_rag_system.reset()


# -- replies -----------------------------------------------------------------------------------------


def test_reply_is_parsed_with_the_default_paths(service: FakeRagService, tmp_path: Path) -> None:
    questions = ["What is the refund window?", "How long does shipping take?"]
    with client_for(http_system(service.url), tmp_path) as client:
        results = client.ask_many(questions)
    assert [result.question for result in results] == questions
    for question, result in zip(questions, results, strict=True):
        assert result.error is None and result.reply is not None
        assert result.reply.answer == f"echo: {question}"
        assert texts_of(result) == [f"A passage that mentions {question}"]
        assert sources_of(result) == ["doc.md"]
        assert (result.attempts, result.retries, result.cached) == (1, 0, False)
        assert result.latency_s > 0
    assert service.request_count == service.answered == 2
    assert sorted(service.questions) == sorted(questions)
    assert service.methods == ["POST", "POST"]
    assert sorted(body["question"] for body in service.bodies) == sorted(questions)
    assert all(headers.get("Accept") == "application/json" for headers in service.headers_seen)


def test_custom_paths_and_body_template(service: FakeRagService, tmp_path: Path) -> None:
    def nested(question: str) -> dict[str, Any]:
        return {
            "data": {"output": {"text": f"A: {question}"}},
            "hits": [
                {"doc": {"content": "first passage", "uri": "kb/a.md"}},
                {"doc": {"content": "second passage", "uri": "kb/b.md"}},
            ],
        }

    service.responder = nested
    body = {"question": "Q: {question}", "options": {"top_k": 2, "tags": ["{question}", "fixed"]}, "n": 1}
    system = http_system(
        service.url,
        http={
            "body": body,
            "headers": {"X-Team": "search"},
            "answer": "data.output.text",
            "contexts": "hits[*].doc.content",
            "sources": "hits[*].doc.uri",
        },
    )
    # Quotes and braces in a question go in as a JSON string value, never spliced into the JSON text.
    question = 'He said "hi" {and} \\ left'
    with client_for(system, tmp_path) as client:
        result = client.ask(question)
    assert result.reply is not None, result.error
    assert result.reply.answer == f"A: Q: {question}"
    assert texts_of(result) == ["first passage", "second passage"]
    assert sources_of(result) == ["kb/a.md", "kb/b.md"]
    assert service.bodies == [
        {"question": f"Q: {question}", "options": {"top_k": 2, "tags": [question, "fixed"]}, "n": 1}
    ]
    assert service.headers_seen[0]["X-Team"] == "search"


def test_null_paths_give_a_reply_without_contexts(service: FakeRagService, tmp_path: Path) -> None:
    system = http_system(service.url, http={"contexts": None, "sources": None})
    with client_for(system, tmp_path) as client:
        result = client.ask("anything")
    assert result.reply is not None and result.reply.answer == "echo: anything"
    assert result.reply.contexts == []


def test_contexts_without_sources_path(service: FakeRagService, tmp_path: Path) -> None:
    with client_for(http_system(service.url, http={"sources": None}), tmp_path) as client:
        result = client.ask("q")
    assert texts_of(result) == ["A passage that mentions q"]
    assert sources_of(result) == [None]


def test_get_method_sends_the_body_as_query(service: FakeRagService, tmp_path: Path) -> None:
    system = http_system(service.url, http={"method": "GET", "body": {"question": "{question}", "k": "3"}})
    question = "what & why? a=b"
    with client_for(system, tmp_path) as client:
        result = client.ask(question)
    assert result.reply is not None and result.reply.answer == f"echo: {question}"
    assert service.methods == ["GET"]
    assert service.bodies == [{"question": question, "k": "3"}]


# -- the cache ---------------------------------------------------------------------------------------


def test_second_ask_is_a_cache_hit_and_a_new_version_asks_afresh(
    service: FakeRagService, tmp_path: Path
) -> None:
    v1 = http_system(service.url, version="v1")
    with client_for(v1, tmp_path) as client:
        first = client.ask("q")
        second = client.ask("q")
    assert (first.cached, second.cached) == (False, True)
    assert second.reply == first.reply and second.attempts == first.attempts
    assert service.request_count == 1
    with client_for(v1, tmp_path) as client:  # a new run on the same cache
        assert client.ask("q").cached
    assert service.request_count == 1
    with client_for(http_system(service.url, version="v2"), tmp_path) as client:
        fresh = client.ask("q")
        assert not fresh.cached
        assert client.ask("q").cached
    assert service.request_count == 2
    with client_for(v1, tmp_path, use_cache=False) as client:
        assert not client.ask("q").cached
    assert service.request_count == 3


def test_version_env_is_read_from_the_environment_mapping(service: FakeRagService, tmp_path: Path) -> None:
    system = http_system(service.url, version_env="RAG_DEPLOY_SHA")
    with client_for(system, tmp_path, environment={"RAG_DEPLOY_SHA": "abc123"}) as client:
        assert client.version == "abc123"
        assert not client.ask("q").cached
    with client_for(system, tmp_path, environment={"RAG_DEPLOY_SHA": "def456"}) as client:
        assert not client.ask("q").cached
    with client_for(system, tmp_path, environment={"RAG_DEPLOY_SHA": "abc123"}) as client:
        assert client.ask("q").cached
    assert service.request_count == 2
    for environment in ({}, {"RAG_DEPLOY_SHA": "  "}):
        with pytest.raises(ExternalSystemError, match="RAG_DEPLOY_SHA"):
            ExternalClient(system, environment=environment, use_cache=False)


def test_the_cache_key_never_depends_on_credentials(tmp_path: Path) -> None:
    with FakeRagService(token=TOKEN) as fake:
        system = http_system(fake.url, http={"headers_env": SECRET_HEADERS_ENV})
        with client_for(system, tmp_path, environment={SECRET_ENV: SECRET_VALUE}) as client:
            assert client.ask("q").reply is not None
        # A rotated credential is the same system: its answers stay cached.
        with client_for(system, tmp_path, environment={SECRET_ENV: "Bearer rotated-value-456"}) as client:
            assert client.ask("q").cached
        assert fake.request_count == 1
        assert fake.headers_seen[0]["Authorization"] == SECRET_VALUE
    assert TOKEN not in json.dumps(system.identity())
    assert system.environment_names() == [SECRET_ENV]


def test_a_system_without_a_version_is_never_served_another_runs_answers(tmp_path: Path) -> None:
    with FakeRagService() as fake:
        system = http_system(fake.url)
        assert system.version is None and system.version_env is None
        with client_for(system, tmp_path, run_scope="night-1") as client:
            assert not client.ask("q").cached
            assert client.ask("q").cached  # within one run a repeated question is asked once
        with client_for(system, tmp_path, run_scope="night-2") as client:
            assert not client.ask("q").cached  # the deploy may have changed since night 1
        with client_for(system, tmp_path, run_scope=None) as client:
            assert not client.ask("q").cached and client.cache is None  # no run: nothing cached at all
        assert fake.request_count == 3
        versioned = http_system(fake.url, version="abc123")
        with client_for(versioned, tmp_path, run_scope="night-1") as client:
            client.ask("q")
        with client_for(versioned, tmp_path, run_scope="night-2") as client:
            assert client.ask("q").cached  # a version says the deploy is the same: reused across runs
        assert fake.request_count == 4


# -- retries -----------------------------------------------------------------------------------------


def test_retries_on_503_and_429_honour_retry_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeRagService(retry_after=0.2) as fake:
        fake.inject([503, 429])
        with client_for(http_system(fake.url, max_retries=3), tmp_path) as client:
            waits: list[float] = []
            backoff = client.retrying.wait_s

            def spy(attempt: int, retry_after_s: float | None) -> float:
                waits.append(backoff(attempt, retry_after_s))
                return waits[-1]

            monkeypatch.setattr(client.retrying, "wait_s", spy)
            started = time.monotonic()
            result = client.ask("q")
            elapsed = time.monotonic() - started
        assert result.reply is not None and result.reply.answer == "echo: q"
        assert (result.attempts, result.retries) == (3, 2)
        assert waits == [0.2, 0.2]  # the server's Retry-After, not the near-zero backoff
        assert elapsed >= 0.35  # a lower bound only: sleeping never ends early
        assert fake.request_count == 3 and fake.answered == 1
        assert fake.statuses == [503, 429, 200]


def test_without_retry_after_the_backoff_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeRagService(retry_after=None) as fake:
        fake.inject([500, 502, 408])
        with client_for(http_system(fake.url, max_retries=3), tmp_path) as client:
            waits: list[float] = []
            backoff = client.retrying.wait_s
            monkeypatch.setattr(
                client.retrying,
                "wait_s",
                lambda attempt, after: waits.append(backoff(attempt, after)) or waits[-1],
            )
            result = client.ask("q")
        assert result.attempts == 4 and result.reply is not None
        assert len(waits) == 3 and all(0 <= wait <= 0.004 for wait in waits)
        assert fake.request_count == 4


def test_a_malformed_retry_after_falls_back_to_the_backoff(tmp_path: Path) -> None:
    with FakeRagService(retry_after="soon") as fake:
        fake.inject([503])
        with client_for(http_system(fake.url), tmp_path) as client:
            result = client.ask("q")
        assert result.reply is not None and result.attempts == 2
        assert fake.request_count == 2


def test_retry_after_values() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3600))
    wait = parse_retry_after(future)
    assert wait is not None and 3000 < wait <= 3600


def test_a_4xx_is_not_retried(service: FakeRagService, tmp_path: Path) -> None:
    service.inject([400])
    with client_for(http_system(service.url, max_retries=3), tmp_path) as client:
        result = client.ask("q")
    assert result.reply is None and result.attempts == 1
    assert result.error is not None and "HTTP 400" in result.error
    assert service.request_count == 1


def test_seeded_failures_are_retried_and_every_request_is_counted(tmp_path: Path) -> None:
    questions = [f"question {i}" for i in range(12)]
    with FakeRagService(failure_rate=0.3, seed=3) as fake:
        system = http_system(fake.url, concurrency=1, max_retries=6, max_consecutive_failures=50)
        with client_for(system, tmp_path) as client:
            results = client.ask_many(questions)
        assert all(result.reply is not None for result in results)
        assert sum(result.attempts for result in results) == fake.request_count
        assert fake.request_count == fake.answered + fake.statuses.count(503)
        assert fake.answered == len(questions)


def test_the_fake_draws_the_same_failures_for_the_same_seed() -> None:
    def statuses(seed: int) -> list[int]:
        with FakeRagService(failure_rate=0.5, seed=seed) as fake, httpx.Client() as http:
            return [http.post(fake.url, json={"question": "q"}).status_code for _ in range(16)]

    first = statuses(7)
    assert first == statuses(7)
    assert set(first) == {200, 503}


# -- failures are never cached -----------------------------------------------------------------------


def test_an_exhausted_failure_is_not_cached(service: FakeRagService, tmp_path: Path) -> None:
    system = http_system(service.url, max_retries=1)
    service.inject([503, 503])
    with client_for(system, tmp_path) as client:
        failed = client.ask("q")
    assert failed.reply is None and failed.attempts == 2
    assert failed.error is not None and failed.error.startswith("retries_exhausted")
    assert "HTTP 503" in failed.error
    assert service.request_count == 2
    with client_for(system, tmp_path) as client:  # the next run asks again
        retried = client.ask("q")
    assert retried.reply is not None and not retried.cached
    assert retried.retried_earlier_failure and retried.attempts == 1
    assert service.request_count == 3
    with client_for(system, tmp_path) as client:  # and then it is cached
        cached = client.ask("q")
    assert cached.cached and not cached.retried_earlier_failure
    assert service.request_count == 3


# -- the breaker -------------------------------------------------------------------------------------


def test_an_outage_trips_the_breaker_and_the_next_run_reuses_cached_answers(
    service: FakeRagService, tmp_path: Path
) -> None:
    system = http_system(service.url, concurrency=1, max_retries=1, max_consecutive_failures=3)
    before, during = ["q1", "q2"], ["q3", "q4", "q5", "q6"]
    with client_for(system, tmp_path) as client:
        assert all(result.reply is not None for result in client.ask_many(before))
    assert service.request_count == 2

    service.outage = True
    with client_for(system, tmp_path) as client, pytest.raises(ExternalSystemError) as raised:
        client.ask_many(before + during)
    message = str(raised.value)
    assert "3 calls in a row failed" in message and "team-rag" in message and "HTTP 503" in message
    # q1 and q2 came from the cache; q3..q5 met the outage twice each (q6 may have started meanwhile).
    assert service.request_count >= 2 + 3 * 2
    assert service.answered == 2

    service.outage = False
    asked_before_recovery = service.request_count
    with client_for(system, tmp_path) as client:
        results = client.ask_many(before + during)
    assert [result.question for result in results] == before + during
    assert all(result.reply is not None for result in results)
    assert [result.cached for result in results] == [True, True, False, False, False, False]
    assert results[0].reply is not None and results[0].reply.answer == "echo: q1"
    assert service.request_count - asked_before_recovery == len(during)
    assert results[2].retried_earlier_failure  # q3 failed (and was recorded) before the breaker tripped


def test_an_outage_stops_a_concurrent_run(service: FakeRagService, tmp_path: Path) -> None:
    service.outage = True
    system = http_system(service.url, concurrency=4, max_retries=0, max_consecutive_failures=2)
    with client_for(system, tmp_path) as client, pytest.raises(ExternalSystemError, match="in a row"):
        client.ask_many([f"q{i}" for i in range(20)])
    assert service.answered == 0


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_refused_requests_stop_at_once(service: FakeRagService, tmp_path: Path, status: int) -> None:
    service.inject([status])
    system = http_system(service.url, max_retries=3, max_consecutive_failures=8)
    with client_for(system, tmp_path) as client, pytest.raises(ExternalSystemError, match=f"HTTP {status}"):
        client.ask_many(["q"])
    assert service.request_count == 1


def test_a_wrong_token_stops_the_run_at_once(tmp_path: Path) -> None:
    with FakeRagService(token="the-right-token-456") as fake:
        system = http_system(fake.url, http={"headers_env": SECRET_HEADERS_ENV}, max_retries=3)
        with (
            client_for(system, tmp_path, environment={SECRET_ENV: SECRET_VALUE}) as client,
            pytest.raises(ExternalSystemError, match="HTTP 401") as raised,
        ):
            client.ask_many(["q1", "q2", "q3"])
        assert "headers_env" in str(raised.value)
        assert fake.answered == 0 and fake.request_count <= 3  # no retries: each call stops at once
        with client_for(http_system(fake.url), tmp_path) as client, pytest.raises(ExternalSystemError):
            client.ask("q")  # no credential at all
        right = {SECRET_ENV: "Bearer the-right-token-456"}
        with client_for(system, tmp_path, environment=right) as client:
            assert client.ask("q").reply is not None


def test_a_wrong_url_stops_at_once(service: FakeRagService, tmp_path: Path) -> None:
    system = http_system(service.url.replace("/ask", "/nowhere"))
    with client_for(system, tmp_path) as client, pytest.raises(ExternalSystemError, match="HTTP 404"):
        client.ask("q")


def test_an_unreachable_service_is_retried_then_trips_the_breaker(tmp_path: Path) -> None:
    with FakeRagService() as fake:
        url = fake.url
    # The port is closed now: connection refused is transient, retried, then counted.
    system = http_system(url, max_retries=1, max_consecutive_failures=2, timeout_s=5)
    with client_for(system, tmp_path) as client:
        first = client.ask("q1")
        assert first.reply is None and first.attempts == 2
        assert first.error is not None and first.error.startswith("retries_exhausted")
        with pytest.raises(ExternalSystemError, match="2 calls in a row"):
            client.ask("q2")


# -- credentials -------------------------------------------------------------------------------------


def test_the_header_secret_never_leaks_into_results_or_errors(tmp_path: Path) -> None:
    environment = {SECRET_ENV: SECRET_VALUE}
    with FakeRagService(token=TOKEN, echo_headers=True) as fake:
        # The fake does echo it: whatever the client shows of an error body has to be cleaned.
        with httpx.Client() as http:
            echoed = http.post(fake.url, json={}, headers={"Authorization": SECRET_VALUE}).text
        assert SECRET_VALUE in echoed and echoed.index(SECRET_VALUE) < 200

        system = http_system(
            fake.url,
            http={"headers_env": SECRET_HEADERS_ENV},
            max_retries=1,
            max_consecutive_failures=100,
        )
        with client_for(system, tmp_path, environment=environment) as client:
            fake.inject([503, 503])
            exhausted = client.ask("q-retry")
            fake.inject([400])
            refused = client.ask("q-400")
            answered = client.ask("q-ok")
        for result in (exhausted, refused):
            assert result.reply is None and result.error is not None
            assert f"<{SECRET_ENV}>" in result.error  # the echoed value was there, and was replaced
            assert_no_secret(result.model_dump_json())
            assert_no_secret(repr(result))
        assert answered.reply is not None
        assert_no_secret(answered.model_dump_json())
        assert all(headers["Authorization"] == SECRET_VALUE for headers in fake.headers_seen[1:])

        # Stopped by a 401 reply ...
        fake.inject([401])
        with (
            client_for(system, tmp_path, environment=environment) as client,
            pytest.raises(ExternalSystemError) as refused_error,
        ):
            client.ask("q-401")
        assert f"<{SECRET_ENV}>" in str(refused_error.value)
        assert_no_secret(exception_text(refused_error.value))

        # ... and by the breaker, whose traceback chains the last failure.
        fake.outage = True
        breaker = http_system(
            fake.url,
            http={"headers_env": SECRET_HEADERS_ENV},
            concurrency=1,
            max_retries=0,
            max_consecutive_failures=2,
        )
        with (
            client_for(breaker, tmp_path, environment=environment) as client,
            pytest.raises(ExternalSystemError) as tripped,
        ):
            client.ask_many(["a", "b", "c"])
        assert_no_secret(exception_text(tripped.value))


def test_no_piece_of_the_secret_survives_truncation_of_an_error_body(tmp_path: Path) -> None:
    """A padding header (echoed before Authorization: the fake sorts them) moves the credential across
    the first 200 characters of an error body, all a client keeps of it."""
    environment = {SECRET_ENV: SECRET_VALUE}
    cut = 200
    with FakeRagService(token=TOKEN, echo_headers=True) as fake:
        fake.inject([503])
        with httpx.Client() as http:  # where the credential sits in the error body without padding
            headers = {"Accept": "application/json", "Authorization": SECRET_VALUE}
            at = http.post(fake.url, json={"question": "q"}, headers=headers).text.index(SECRET_VALUE)
        padding_entry = len('"A-Pad": "", ')
        # Pads that put the cut anywhere from just before the credential to just after it.
        first = cut - at - padding_entry - len(SECRET_VALUE) - 4
        assert first >= 0, at
        for pad in range(first, cut - at - padding_entry + 4):
            system = http_system(
                fake.url,
                http={"headers_env": SECRET_HEADERS_ENV, "headers": {"A-Pad": "p" * pad}},
                max_retries=0,
                max_consecutive_failures=1000,
            )
            with client_for(system, tmp_path, environment=environment, use_cache=False) as client:
                fake.inject([503])
                result = client.ask("q")
            assert result.error is not None and result.error.startswith("retries_exhausted: HTTP 503")
            assert_no_secret(result.model_dump_json())


def test_a_missing_environment_variable_stops_at_construction(service: FakeRagService) -> None:
    system = http_system(service.url, http={"headers_env": SECRET_HEADERS_ENV})
    assert missing_environment(system, {}) == [SECRET_ENV]
    assert missing_environment(system, {SECRET_ENV: SECRET_VALUE}) == []
    for environment in ({}, {SECRET_ENV: ""}, {SECRET_ENV: "   "}):
        with pytest.raises(ExternalSystemError, match=SECRET_ENV):
            ExternalClient(system, environment=environment, use_cache=False)
    assert service.request_count == 0


# -- invalid replies ---------------------------------------------------------------------------------


def _no_answer(question: str) -> dict[str, Any]:
    return {"text": "the answer under the wrong key", "contexts": []}


def _fewer_sources(question: str) -> dict[str, Any]:
    return {"answer": "a", "contexts": [{"text": "t1"}, {"text": "t2"}], "ids": ["only-one"]}


def _not_json(question: str) -> str:
    return "<html>upstream proxy error</html>"


def _numeric_contexts(question: str) -> dict[str, Any]:
    return {"answer": "a", "contexts": [{"text": 42, "source": "x.md"}]}


@pytest.mark.parametrize(
    ("responder", "paths"),
    [
        pytest.param(_no_answer, {}, id="missing-answer"),
        pytest.param(_fewer_sources, {"sources": "ids"}, id="sources-length-mismatch"),
        pytest.param(_not_json, {}, id="not-json"),
        pytest.param(_numeric_contexts, {}, id="contexts-not-strings"),
    ],
)
def test_an_invalid_reply_is_a_counted_failure_never_cached(
    service: FakeRagService, tmp_path: Path, responder: Any, paths: dict[str, Any]
) -> None:
    service.responder = responder
    system = http_system(service.url, http=paths, max_retries=3, max_consecutive_failures=3)
    with client_for(system, tmp_path) as client:
        first = client.ask("q")
        assert first.reply is None and first.attempts == 1  # not retried
        assert first.error is not None and "invalid_reply" in first.error
        assert service.request_count == 1
        second = client.ask("q")  # not cached: asked again
        assert second.reply is None and service.request_count == 2
        with pytest.raises(ExternalSystemError, match="invalid_reply"):  # counted by the breaker
            client.ask("q")
    assert service.request_count == 3


# -- configuration -----------------------------------------------------------------------------------

URL = "http://127.0.0.1:9/ask"


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"name": "x", "http": {"url": URL}, "python": "m:f"}, id="both-http-and-python"),
        pytest.param({"name": "x"}, id="neither"),
        pytest.param(
            {"name": "x", "http": {"url": URL, "headers": {"Authorization": "Bearer a"}}}, id="auth"
        ),
        pytest.param({"name": "x", "http": {"url": URL, "headers": {"X-API-Key": "k"}}}, id="api-key"),
        pytest.param({"name": "x", "http": {"url": URL, "headers": {"Cookie": "s=1"}}}, id="cookie"),
        pytest.param({"name": "x", "http": {"url": URL, "body": {"q": "hello"}}}, id="body-without-question"),
        pytest.param({"name": "x", "http": {"url": URL, "body": "{query}"}}, id="body-other-placeholder"),
        pytest.param({"name": "x", "http": {"url": URL, "answer": "answer["}}, id="bad-jmespath-answer"),
        pytest.param({"name": "x", "http": {"url": URL, "contexts": "a[*.b"}}, id="bad-jmespath-contexts"),
        pytest.param({"name": "x", "http": {"url": URL, "sources": "]["}}, id="bad-jmespath-sources"),
        pytest.param(
            {"name": "x", "python": "m:f", "source_match": {"rule": "regex", "pattern": "("}}, id="bad-regex"
        ),
        pytest.param(
            {"name": "x", "python": "m:f", "source_match": {"rule": "regex"}}, id="regex-no-pattern"
        ),
        pytest.param(
            {"name": "x", "python": "m:f", "source_match": {"rule": "basename", "pattern": "(.*)"}},
            id="pattern-without-regex-rule",
        ),
        pytest.param(
            {"name": "x", "python": "m:f", "source_match": {"rule": "regex", "pattern": "kb/.*"}},
            id="replace-refers-to-a-missing-group",
        ),
        pytest.param({"name": "x", "http": {"url": "ftp://host/ask"}}, id="not-http-url"),
        pytest.param({"name": "x", "http": {"url": "localhost:8000/ask"}}, id="url-without-scheme"),
        pytest.param({"name": "x", "http": {"url": "https://me:pw@rag.example/ask"}}, id="password-in-url"),
        pytest.param({"name": "x", "http": {"url": "https://rag.example/ask?api_key=k"}}, id="key-in-query"),
        pytest.param(
            {"name": "x", "http": {"url": URL, "method": "GET", "body": {"question": "{question}", "k": 3}}},
            id="get-body-not-strings",
        ),
        pytest.param({"name": "x", "http": {"url": URL, "method": "PUT"}}, id="method"),
        pytest.param({"name": "my system", "python": "m:f"}, id="bad-name"),
        pytest.param({"name": "x", "python": "module.function"}, id="bad-python-target"),
        pytest.param({"name": "x", "python": "m:f", "version": "1", "version_env": "V"}, id="two-versions"),
        pytest.param({"name": "x", "python": "m:f", "concurency": 2}, id="unknown-key"),
        pytest.param({"name": "x", "http": {"url": URL, "answr": "a"}}, id="unknown-http-key"),
        pytest.param({"name": "x", "python": "m:f", "concurrency": 0}, id="no-concurrency"),
        pytest.param({"name": "x", "python": "m:f", "max_consecutive_failures": 0}, id="no-breaker"),
    ],
)
def test_invalid_configs_are_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ExternalSystem.model_validate(config)


def test_valid_configs() -> None:
    http = ExternalSystem.model_validate(
        {
            "name": "team-rag.v2",
            "http": {"url": URL + "?tenant=a", "headers_env": SECRET_HEADERS_ENV, "headers": {"X-Team": "a"}},
            "version_env": "RAG_SHA",
        }
    )
    assert http.kind == "http" and http.endpoint == URL
    assert "headers_env" not in http.identity()["http"]
    assert http.environment_names() == [SECRET_ENV, "RAG_SHA"]
    python = ExternalSystem.model_validate({"name": "py", "python": "tests.fake_rag_system:answer"})
    assert python.kind == "python" and python.endpoint == "tests.fake_rag_system:answer"
    assert python.identity() == {"python": "tests.fake_rag_system:answer"}


# -- source matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "returned", "source_id"),
    [
        ({}, "kb/docs/guide.md", "kb/docs/guide.md"),
        ({"rule": "exact"}, "guide.md", "guide.md"),
        ({"rule": "basename"}, "kb/docs/guide.md", "guide.md"),
        ({"rule": "basename"}, "https://wiki.example/docs/guide.md?rev=3#intro", "guide.md"),
        ({"rule": "basename"}, "C:\\kb\\docs\\guide.md", "guide.md"),
        ({"rule": "basename"}, "guide.md", "guide.md"),
        ({"rule": "regex", "pattern": r"kb://([^#]+)#.*"}, "kb://docs/guide.md#chunk-3", "docs/guide.md"),
        ({"rule": "regex", "pattern": r"kb://([^#]+)#.*"}, "other/guide.md", "other/guide.md"),
        (
            {"rule": "regex", "pattern": r"(\w+)-chunk-\d+", "replace": r"docs/\1.md"},
            "guide-chunk-7",
            "docs/guide.md",
        ),
        ({"rule": "regex", "pattern": r"doc-\d+", "replace": "fixed.md"}, "doc-12", "fixed.md"),
    ],
)
def test_source_match_rules(match: dict[str, Any], returned: str, source_id: str) -> None:
    assert SourceMatch(**match).source_id(returned) == source_id


def test_source_match_expected_ids() -> None:
    assert SourceMatch(rule="basename").expected_id("kb/docs/guide.md") == "guide.md"
    assert SourceMatch().expected_id("kb/docs/guide.md") == "kb/docs/guide.md"
    assert SourceMatch(rule="regex", pattern="(.*)").expected_id("kb/guide.md") == "kb/guide.md"


# -- concurrency -------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 2])
def test_concurrency_is_bounded(service: FakeRagService, tmp_path: Path, concurrency: int) -> None:
    service.delay_s = 0.05
    questions = [f"q{i}" for i in range(8)]
    with client_for(http_system(service.url, concurrency=concurrency), tmp_path) as client:
        results = client.ask_many(questions)
    assert [result.question for result in results] == questions
    assert all(result.reply is not None for result in results)
    assert 1 <= service.peak_in_flight <= concurrency
    assert service.answered == len(questions)


# -- Python callables --------------------------------------------------------------------------------


def test_a_python_callable_system(rag_system: ModuleType, tmp_path: Path) -> None:
    system = python_system("tests.fake_rag_system:answer")
    questions = ["How long is the warranty?", "When do orders ship?"]
    with client_for(system, tmp_path) as client:
        results = client.ask_many(questions)
    assert rag_system.CALLS == 2
    assert sources_of(results[0])[0] == "kb/warranty.md"
    assert sources_of(results[1])[0] == "kb/shipping.md"
    assert all(len(result.reply.contexts) == 2 for result in results if result.reply is not None)
    assert results[0].reply is not None and "warranty" in results[0].reply.answer
    assert all(result.attempts == 1 and not result.cached for result in results)
    with client_for(system, tmp_path) as client:
        assert all(result.cached for result in client.ask_many(questions))
    assert rag_system.CALLS == 2


def test_a_flaky_python_system_is_retried_and_counted(rag_system: ModuleType, tmp_path: Path) -> None:
    with client_for(python_system("tests.fake_rag_system:flaky", max_retries=2), tmp_path) as client:
        results = client.ask_many(["a", "b", "c"])
    assert all(result.reply is not None for result in results)
    assert [result.attempts for result in results] == [2, 2, 2]
    assert rag_system.CALLS == 6


def test_a_flaky_python_system_without_retries_fails_then_recovers(
    rag_system: ModuleType, tmp_path: Path
) -> None:
    system = python_system("tests.fake_rag_system:flaky", max_retries=0)
    with client_for(system, tmp_path) as client:
        failed = client.ask("a")
    assert failed.reply is None and failed.error is not None
    assert failed.error.startswith("retries_exhausted: RuntimeError")
    with client_for(system, tmp_path) as client:
        recovered = client.ask("a")
    assert recovered.reply is not None and recovered.retried_earlier_failure
    assert rag_system.CALLS == 2


def test_a_python_system_returning_no_mapping_is_invalid(rag_system: ModuleType, tmp_path: Path) -> None:
    with client_for(python_system("tests.fake_rag_system:not_a_mapping"), tmp_path) as client:
        result = client.ask("a")
    assert result.reply is None and result.error is not None and "invalid_reply" in result.error
    assert result.attempts == 1 and rag_system.CALLS == 1


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.no_such_module_for_ragbench:answer", "cannot import"),
        ("tests.fake_rag_system:no_such_function", "cannot import"),
        ("tests.fake_rag_system:TOP_K", "not callable"),
    ],
)
def test_an_unusable_python_target_stops_at_construction(target: str, message: str) -> None:
    with pytest.raises(ExternalSystemError, match=message):
        ExternalClient(python_system(target), use_cache=False, environment={})


# -- the fake service on its own ---------------------------------------------------------------------


def test_the_fake_service_answers_get_and_rejects_bad_requests(service: FakeRagService) -> None:
    with httpx.Client() as http:
        assert http.get(service.url, params={"question": "hi"}).json()["answer"] == "echo: hi"
        assert http.post(service.url, content=b"not json").status_code == 400
        assert http.post(service.url, json={"query": "no question key"}).status_code == 400
        assert http.post(service.url.replace("/ask", "/other"), json={"question": "q"}).status_code == 404
        service.inject([429])
        limited = http.post(service.url, json={"question": "q"})
        assert limited.status_code == 429 and limited.headers["Retry-After"] == "0"
    assert service.request_count == 5 and service.answered == 1 and service.questions == ["hi"]


def test_the_fake_service_command_line() -> None:
    command = [sys.executable, "-m", "tests.fake_rag_service", "--port", "0", "--failure-rate", "1"]
    command += ["--retry-after", "0.5"]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "the service printed no URL within 30 s"
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/ask"), url
        reply = httpx.post(url, json={"question": "q"}, timeout=10)
        assert reply.status_code == 503 and reply.headers["Retry-After"] == "0.5"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=20) == 0
        finally:
            process.kill()


# -- conversations -----------------------------------------------------------------------------------

TURNS = [
    {"role": "user", "content": "How long is the warranty on a device?"},
    {"role": "assistant", "content": "Two years against manufacturing defects."},
]


def test_an_http_system_receives_the_turns_as_openai_style_messages(
    service: FakeRagService, tmp_path: Path
) -> None:
    with client_for(http_system(service.url), tmp_path) as client:
        single, follow_up = client.ask_many(
            ["Is it free?", "And does it cover water damage?"], histories=[[], TURNS]
        )
        assert client.cache_key("Is it free?") == client.cache_key(
            "Is it free?", []
        )  # unchanged for one question
        assert client.cache_key("Q") != client.cache_key("Q", TURNS)
    assert single.error is None and follow_up.error is None
    bodies = {body["question"]: body for body in service.bodies}
    assert "messages" not in bodies["Is it free?"]  # a single question's request is as before
    assert bodies["And does it cover water damage?"]["messages"] == [
        *TURNS,
        {"role": "user", "content": "And does it cover water damage?"},
    ]


def test_the_messages_placeholder_places_the_conversation(service: FakeRagService, tmp_path: Path) -> None:
    post = http_system(service.url, http={"body": {"input": {"q": "{question}", "chat": "{messages}"}}})
    with client_for(post, tmp_path) as client:
        client.ask("And water damage?", TURNS)
    assert service.bodies[-1]["input"]["chat"][0] == TURNS[0]
    get = http_system(
        service.url, http={"method": "GET", "body": {"question": "{question}", "chat": "{messages}"}}
    )
    with client_for(get, tmp_path / "get") as client:
        client.ask("And water damage?", TURNS)
    assert json.loads(service.bodies[-1]["chat"])[-1] == {"role": "user", "content": "And water damage?"}
    listed = http_system(service.url, http={"body": ["{question}"]})
    with (
        client_for(listed, tmp_path / "list") as client,
        pytest.raises(ExternalSystemError, match="messages"),
    ):
        client.ask("And water damage?", TURNS)


def test_a_python_system_receives_the_turns_as_history(rag_system: ModuleType, tmp_path: Path) -> None:
    rag_system.HISTORIES.clear()
    with client_for(python_system("tests.fake_rag_system:converse"), tmp_path) as client:
        single, follow_up = client.ask_many(
            ["When do orders ship?", "Is it the same abroad?"], histories=[[], TURNS]
        )
    assert sorted(map(len, rag_system.HISTORIES)) == [0, 2]
    assert single.reply is not None and sources_of(single)[0] == "kb/shipping.md"
    assert follow_up.reply is not None and sources_of(follow_up)[0] == "kb/warranty.md"  # found via the turns
    with client_for(python_system("tests.fake_rag_system:answer"), tmp_path / "plain") as client:
        assert (
            client.ask("When do orders ship?").error is None
        )  # a function without history: single questions
        with pytest.raises(ExternalSystemError, match="takes no `history` parameter"):
            client.ask("Is it the same abroad?", TURNS)
