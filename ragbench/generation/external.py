"""A RAG system the user already runs, benchmarked as one cell: an HTTP endpoint or a Python callable that
takes a question and returns the answer with the passages it used and their sources.

Calls get the LLM client's discipline: a result cache (the same store, keyed by the system's identity,
its `version` and the question, never by credentials), bounded concurrency, timeouts, counted retries
that honour Retry-After, failures recorded apart and never served, and a breaker that stops the run with
one message when the system is down. Header secrets are read from the environment where the step runs,
sent only to the system's own URL and redacted from every error text.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import jmespath
from pydantic import BaseModel, ValidationError
from tqdm.auto import tqdm

from ragbench.generation.systems import (
    MESSAGES_PLACEHOLDER,
    QUESTION_PLACEHOLDER,
    ExternalSystem,
    ExternalSystemError,
    missing_environment,
)
from ragbench.inputs.callables import load_callable
from ragbench.llm.budget import BudgetExhausted, current_ledger, is_budget_refusal, refusal
from ragbench.llm.cache import cache_key, open_result_cache, remember_outcome
from ragbench.llm.redaction import redact
from ragbench.llm.retry import Failure, Retrying, parse_retry_after


class ExternalContext(BaseModel):
    text: str
    source: str | None = None
    score: float | None = None  # the retriever's, when a trace logged it


class ExternalReply(BaseModel):
    """What a system returned for one question: the answer and the passages it used, in rank order."""

    answer: str
    contexts: list[ExternalContext] = []


class ExternalResult(BaseModel):
    """One question's outcome; `reply` is None exactly when the call failed (`error` says why)."""

    question: str
    reply: ExternalReply | None
    error: str | None = None
    latency_s: float = 0.0
    attempts: int = 0
    cached: bool = False
    retried_earlier_failure: bool = False

    @property
    def retries(self) -> int:
        return max(0, self.attempts - 1)


class _Retry(Exception):
    """A transient failure (429, 5xx, timeout, connection): retried, honouring `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class _ItemFailure(Exception):
    """This question failed (a 4xx other than auth, a reply without the answer): not retried."""


Messages = list[dict[str, str]]


def conversation_messages(question: str, history: Sequence[Mapping[str, str]]) -> Messages:
    """A case as OpenAI-style chat messages: its earlier turns, then the question as the user's."""
    return [{"role": t["role"], "content": t["content"]} for t in history] + [
        {"role": "user", "content": question}
    ]


def _filled(template: Any, question: str, messages: Any = None) -> Any:
    """The body template with the question put in every string (as a JSON string value, never spliced) and
    `messages` in place of every string that is exactly the messages placeholder."""
    if isinstance(template, str):
        if template == MESSAGES_PLACEHOLDER:
            return messages
        return template.replace(QUESTION_PLACEHOLDER, question)
    if isinstance(template, list):
        return [_filled(item, question, messages) for item in template]
    if isinstance(template, dict):
        return {key: _filled(value, question, messages) for key, value in template.items()}
    return template


def _as_reply(answer: Any, texts: Any, sources: Any) -> ExternalReply:
    if not isinstance(answer, str):
        raise _ItemFailure(f"invalid_reply: no answer text in the reply (got {type(answer).__name__})")
    texts = [] if texts is None else texts
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise _ItemFailure("invalid_reply: contexts is not a list of strings")
    if sources is not None and (not isinstance(sources, list) or len(sources) != len(texts)):
        raise _ItemFailure(f"invalid_reply: {len(texts)} contexts but sources {sources!r:.80}")
    sources = [None if source is None else str(source) for source in sources or [None] * len(texts)]
    return ExternalReply(
        answer=answer,
        contexts=[ExternalContext(text=t, source=s) for t, s in zip(texts, sources, strict=True)],
    )


class ExternalClient:
    """Cached, retried, counted access to one external system; `ask_many` runs `concurrency` at a time.

    `environment` is where header secrets and the version are read (default: this process's, i.e. the
    step's). `run_scope` (the run's id) scopes the cache of a system without a version to one run; without
    either, nothing is cached. `backoff_base_s` scales the exponential backoff (tests make it tiny)."""

    def __init__(
        self,
        system: ExternalSystem,
        *,
        cache_location: str | None = None,
        use_cache: bool = True,
        environment: Mapping[str, str] | None = None,
        run_scope: str | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        progress: bool | None = None,
    ) -> None:
        environment = os.environ if environment is None else environment
        self.system = system
        self.version = system.resolved_version(environment)
        # A system without a version may have changed since any earlier run: its answers are cached for this
        # run only (`run_scope`), so a repeated question is asked once but no run is served another's answers.
        self.cache_scope = self.version if self.version is not None else f"unversioned run {run_scope}"
        if self.version is None and run_scope is None:
            use_cache = False
        if missing := missing_environment(system, environment):
            raise ExternalSystemError(f"system {system.name}: environment variable(s) {missing} not set")
        # Values only in memory, sent only to the system's own URL; every error text is cleaned of them.
        headers_env = system.http.headers_env if system.http is not None else {}
        self._secrets = {header: environment[variable] for header, variable in headers_env.items()}
        self._secret_names = {environment[variable]: variable for variable in headers_env.values()}
        self._function: Callable[..., Any] | None = None
        self._takes_history = False
        self._http: Any = None
        if system.http is not None:
            import httpx

            self._http = httpx.Client(timeout=system.timeout_s, follow_redirects=False)
        else:
            self._function = _load_callable(str(system.python))
            self._takes_history = _takes_history(self._function)
        self.cache = open_result_cache(cache_location) if use_cache else None
        self.retrying = Retrying(
            system.max_retries, backoff_base_s, backoff_max_s, system.max_consecutive_failures
        )
        self.progress = progress
        self.ledger = current_ledger()  # the run's spend account: each call sent is one call charged

    def __enter__(self) -> ExternalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        if self.cache is not None:
            self.cache.close()

    @property
    def label(self) -> str:
        return f"external:{self.system.name}"

    def cache_key(self, question: str, history: Sequence[Mapping[str, str]] = ()) -> str:
        """The question's key (a conversation's earlier turns with it; a single question keeps the key it
        had before conversations existed)."""
        asked: dict[str, Any] = {"question": question} | ({"history": list(history)} if history else {})
        return cache_key({"external": self.system.identity(), "version": self.cache_scope, **asked})

    def ask_many(
        self,
        questions: Sequence[str],
        *,
        histories: Sequence[Sequence[Mapping[str, str]]] | None = None,
        desc: str = "external",
    ) -> list[ExternalResult]:
        """Results in input order; `histories`: each question's earlier turns ({role, content}), if any.
        Raises ExternalSystemError when the system is down or unusable."""
        histories = [[] for _ in questions] if histories is None else histories
        if len(histories) != len(questions):
            raise ValueError(f"{len(histories)} histories for {len(questions)} questions")
        results: list[ExternalResult | None] = [None] * len(questions)
        workers = max(1, min(self.system.concurrency, len(questions)))
        disabled = None if self.progress is None else not self.progress
        with (
            tqdm(total=len(questions), desc=desc, unit="call", disable=disabled) as bar,
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragbench-external") as pool,
        ):
            futures = {
                pool.submit(self.ask, question, histories[index]): index
                for index, question in enumerate(questions)
            }
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
            finally:
                for future in futures:
                    future.cancel()
        return [result for result in results if result is not None]

    def ask(self, question: str, history: Sequence[Mapping[str, str]] = ()) -> ExternalResult:
        """One question (after its conversation's earlier turns, if any): from the cache, else from the
        system (retried); a failure is recorded apart and never served, so the next run asks again."""
        if history and self._function is not None and not self._takes_history:
            raise ExternalSystemError(
                f"system {self.system.name}: {self.system.python} takes no `history` parameter, but a case "
                "has earlier turns; give the function a `history` keyword (a list of {role, content})"
            )
        key = self.cache_key(question, history)
        if self.cache is not None and (raw := self.cache.get(key)) is not None:
            try:
                return ExternalResult.model_validate_json(raw).model_copy(
                    update={"cached": True, "retried_earlier_failure": False}
                )
            except ValidationError:
                pass
        result = self._ask_fresh(question, list(history))
        if is_budget_refusal(result.error):
            return result  # never asked: nothing to remember, and not the system's failure
        if self.cache is not None:
            value = result.model_dump_json() if result.reply is not None else None
            retried = remember_outcome(self.cache, key, self.label, value, result.error)
            result = result.model_copy(update={"retried_earlier_failure": retried})
        if result.reply is not None:
            self.retrying.succeeded()
        elif (in_a_row := self.retrying.failed()) is not None:  # after recording it: the breaker raises
            raise ExternalSystemError(
                f"external system {self.system.name} ({self.system.endpoint}) is failing: "
                f"{in_a_row} calls in a row failed (last: {result.error}); successful answers "
                "are cached: run again when it is back"
            ) from None
        return result

    def _clean(self, text: str) -> str:
        for value, variable in self._secret_names.items():
            text = text.replace(value, f"<{variable}>")
        return redact(" ".join(text.split()))[:300]

    def _ask_fresh(self, question: str, history: Messages) -> ExternalResult:
        try:
            done = self.retrying.run(lambda: self._charged_call(question, history), self._classify)
        except BudgetExhausted as refused:
            return ExternalResult(question=question, reply=None, error=refusal(refused))
        if self.ledger is not None:
            self.ledger.retried(done.retries)
        return ExternalResult(
            question=question,
            reply=done.value,
            error=done.error,
            latency_s=round(done.latency_s, 6),
            attempts=done.attempts,
        )

    def _classify(self, error: Exception) -> Failure:
        """`_Retry` (429, 5xx, timeout, connection) is retried, `_ItemFailure` fails this question, and
        anything else (ExternalSystemError: the system refuses us) ends the run."""
        if isinstance(error, _Retry):
            return Failure(self._clean(str(error)), transient=True, retry_after_s=error.retry_after_s)
        if isinstance(error, _ItemFailure):
            return Failure(self._clean(str(error)), transient=False)
        raise error

    def _charged_call(self, question: str, history: Messages) -> ExternalReply:
        """One attempt, charged to the run's account first: one call (what the system's own model calls
        use is out of sight, so no tokens or cost)."""
        if self.ledger is None:
            return self._call(question, history)
        self.ledger.reserve(1, 0, 0.0)
        started = time.monotonic()
        try:
            return self._call(question, history)
        finally:
            self.ledger.timed(time.monotonic() - started)

    def _call(self, question: str, history: Messages) -> ExternalReply:
        if self._function is not None:
            return self._call_python(question, history)
        return self._call_http(question, history)

    def _call_python(self, question: str, history: Messages) -> ExternalReply:
        assert self._function is not None
        try:
            payload = self._function(question, history=history) if history else self._function(question)
        except Exception as error:  # the user's code: a transient failure until the breaker says otherwise
            raise _Retry(f"{type(error).__name__}: {error}") from None
        if not isinstance(payload, Mapping):
            raise _ItemFailure(
                f"invalid_reply: {self.system.python} returned {type(payload).__name__}, not a mapping"
            )
        contexts = payload.get("contexts") or []
        if not isinstance(contexts, list) or not all(isinstance(c, Mapping) for c in contexts):
            raise _ItemFailure("invalid_reply: contexts is not a list of {text, source} mappings")
        return _as_reply(
            payload.get("answer"),
            [c.get("text") for c in contexts],
            [c.get("source") for c in contexts] if contexts else None,
        )

    def _call_http(self, question: str, history: Messages) -> ExternalReply:
        import httpx

        http = self.system.http
        assert http is not None and self._http is not None
        messages = conversation_messages(question, history)
        # a GET query carries text only: the messages go as their JSON text
        shown = json.dumps(messages) if http.method == "GET" else messages
        body = _filled(http.body, question, shown)
        if history and MESSAGES_PLACEHOLDER not in json.dumps(http.body):
            if not isinstance(body, dict):
                raise ExternalSystemError(
                    f"system {self.system.name}: a case has earlier turns, and the body is no mapping to "
                    f"add them to: place {MESSAGES_PLACEHOLDER} where the conversation goes"
                )
            body = {**body, "messages": shown}  # by default, OpenAI-style beside the question
        headers = {"Accept": "application/json", **http.headers, **self._secrets}
        try:
            if http.method == "GET":
                response = self._http.get(http.url, params=body, headers=headers)
            else:
                response = self._http.post(http.url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise _Retry(f"timeout after {self.system.timeout_s:g} s") from None
        except httpx.TransportError as error:
            raise _Retry(f"{type(error).__name__}: {error}") from None
        status = response.status_code
        if status in (401, 403, 404, 405):
            raise ExternalSystemError(
                f"external system {self.system.name} ({self.system.endpoint}) answered HTTP {status}: "
                f"{self._clean(response.text)} (check the url, method and headers_env)"
            )
        if status == 429 or status >= 500 or status in (408, 409):
            raise _Retry(
                f"HTTP {status}: {self._clean(response.text)[:200]}",
                parse_retry_after(response.headers.get("retry-after")),
            )
        if status >= 400:
            raise _ItemFailure(f"HTTP {status}: {self._clean(response.text)[:200]}")
        try:
            payload = response.json()
        except ValueError:
            raise _ItemFailure(f"invalid_reply: not JSON: {self._clean(response.text)[:120]!r}") from None
        return _as_reply(
            jmespath.search(http.answer, payload),
            jmespath.search(http.contexts, payload) if http.contexts else None,
            jmespath.search(http.sources, payload) if http.sources else None,
        )


def _takes_history(function: Callable[..., Any]) -> bool:
    """Whether a Python system can be given a conversation: a `history` parameter, or **kwargs."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it with the question only
        return False
    return any(p.name == "history" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _load_callable(target: str) -> Callable[[str], Any]:
    try:
        return load_callable(target)
    except ImportError as error:
        raise ExternalSystemError(f"python system {error}") from None
