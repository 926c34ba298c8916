"""A loopback-only fake of the OpenAI chat-completions API, so the real LLM client can be tested offline.

It serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) on 127.0.0.1 (an ephemeral port by
default), and counts requests and the peak number in flight so tests can check retries and concurrency
through the real HTTP stack. Faults come from three sources, strongest first: the all-fail switch
(``all_fail``: a provider outage, every request a 5xx), faults scripted for the next requests
(``inject``), and seeded random fault rates (``rates``). ``echo_headers`` makes error bodies repeat
the request's headers, ``Authorization`` included, as some proxies do, so tests can check that an
API key never leaks from an error message into logs or results.

Started on its own it serves until interrupted, for manual or benchmark runs against a flaky provider::

    python -m tests.fake_openai_server --port 8765 --rate-limit 0.3 --retry-after 0.1 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal, get_args

from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings

try:
    from tests.loopback import LoopbackHTTPServer, LoopbackServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from loopback import LoopbackHTTPServer, LoopbackServer  # type: ignore[no-redef]

FaultKind = Literal["rate_limit", "server_error", "client_error", "timeout", "malformed_json", "bad_body"]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
# What each chat request got, in `FakeOpenAIServer.fault_log`: a fault kind, the outage, or nothing.
ServedFault = FaultKind | Literal["all_fail"] | None
# The all-fail mode alternates these, so a client meets both kinds of outage reply.
ALL_FAIL_STATUSES = (503, 500)

Responder = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Fault:
    """One injected failure, consumed by the next request that arrives.

    - ``rate_limit``: HTTP 429 with a ``Retry-After`` header of ``retry_after`` seconds.
    - ``server_error``: HTTP 500 (``status`` can pick another 5xx).
    - ``client_error``: HTTP ``status`` as a 4xx (set e.g. 400 or 401; the default 500 becomes 400),
      with ``message`` as the error text if given.
    - ``timeout``: sleep ``delay_s`` (meant to exceed the client's timeout), then answer normally.
    - ``malformed_json``: a normal 200 reply whose message content is not valid JSON.
    - ``bad_body``: HTTP 200 whose body is not JSON at all.
    """

    kind: FaultKind
    retry_after: float | None = 0.0
    status: int = 500
    delay_s: float = 5.0
    message: str | None = None


def last_user_text(request: dict[str, Any]) -> str:
    """The content of the last user message, which most responders key on."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def default_responder(request: dict[str, Any]) -> str:
    """Echo the last user message; as a JSON object when the request asked for JSON."""
    text = last_user_text(request)
    if request.get("response_format"):
        return json.dumps({"answer": f"echo: {text}"})
    return f"echo: {text}"


def with_request_headers(payload: dict[str, Any], request_headers: dict[str, str]) -> dict[str, Any]:
    """An error payload as a leaky proxy writes it: the request's headers verbatim in the message (which
    clients put into their exceptions) and beside it."""
    error = dict(payload.get("error", {}))
    dump = "; ".join(f"{name}: {value}" for name, value in request_headers.items())
    error["message"] = f"{error.get('message', '')} (request headers: {dump})"
    error["request_headers"] = request_headers
    return {**payload, "error": error}


def _count_words(text: str) -> int:
    return len(text.split())


def _checked_rates(rates: Mapping[FaultKind, float]) -> dict[FaultKind, float]:
    """The fault rates in `FAULT_KINDS` order (so a seed means the same faults however they were
    written), each in [0, 1] and summing to at most 1, since a request meets at most one fault."""
    unknown = sorted(set(rates) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; choose from {', '.join(FAULT_KINDS)}")
    if any(not 0 <= rate <= 1 for rate in rates.values()) or sum(rates.values()) > 1:
        raise ValueError(f"fault rates must each be in [0, 1] and sum to at most 1, got {dict(rates)}")
    return {kind: rates[kind] for kind in FAULT_KINDS if rates.get(kind)}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, delayed ACKs add ~40 ms to every reply.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests read the counters instead."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": self.server.owner.model_name}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}}
            )
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        fault = owner._enter(request, self.headers.get("Authorization"))
        try:
            self._serve(request, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired); nothing to answer
        finally:
            owner._leave()

    def _serve(self, request: dict[str, Any], fault: Fault | None) -> None:
        owner = self.server.owner
        if owner.latency_s > 0:
            owner._sleep(owner.latency_s)
        if fault is not None:
            if fault.kind == "rate_limit":
                headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
                self._send_json(
                    429,
                    {"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "429"}},
                    headers,
                )
                return
            if fault.kind == "server_error":
                self._send_json(
                    fault.status, {"error": {"message": "Internal server error", "type": "server_error"}}
                )
                return
            if fault.kind == "client_error":
                status = fault.status if 400 <= fault.status < 500 else 400
                kind = "authentication_error" if status == 401 else "invalid_request_error"
                message = fault.message or f"fake {status}"
                self._send_json(status, {"error": {"message": message, "type": kind}})
                return
            if fault.kind == "timeout":
                owner._sleep(fault.delay_s)
            if fault.kind == "bad_body":
                self._send_raw(200, b"<html>upstream proxy error</html>", "text/html")
                return
        content = (
            "Sure! {not: valid json,,"
            if fault is not None and fault.kind == "malformed_json"
            else owner.responder(request)
        )
        prompt_text = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
        prompt_tokens, completion_tokens = _count_words(prompt_text) + 1, _count_words(content) + 1
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", owner.model_name),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        if status >= 400 and self.server.owner.echo_headers:
            payload = with_request_headers(payload, dict(self.headers.items()))
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


class _Server(LoopbackHTTPServer):
    owner: FakeOpenAIServer


class FakeOpenAIServer(LoopbackServer):
    """Threaded OpenAI-compatible server on 127.0.0.1; use as ``with FakeOpenAIServer() as srv:``.

    ``base_url`` is what a client passes as ``api_base``. Each chat request waits ``latency_s``, then
    meets at most one fault:

    - ``all_fail`` (settable while serving): every request fails with 503 or 500, alternately; faults
      scripted meanwhile stay queued for after the outage.
    - ``inject(...)`` queues faults for the next requests in arrival order.
    - ``rates`` maps fault kinds to probabilities (summing to at most 1): every request draws one
      number from a generator seeded with ``seed``, so request *n* meets the same random fault in
      every run whatever the switches and scripts above did to requests before it. Random faults use
      ``retry_after`` (rate limits) and ``timeout_delay_s`` (timeouts).

    ``echo_headers`` puts the request's headers into every error body. ``request_count``,
    ``max_in_flight``, ``requests`` (the parsed bodies) and ``fault_log`` (what each request met), in
    arrival order, are there for assertions.
    """

    handler_class = _Handler
    server_class = _Server

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        responder: Responder | None = None,
        model_name: str = "fake-model",
        rates: Mapping[FaultKind, float] | None = None,
        seed: int = 0,
        retry_after: float | None = 0.0,
        timeout_delay_s: float = 5.0,
        all_fail: bool = False,
        echo_headers: bool = False,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(host=host, port=port)
        self.latency_s = latency_s
        self.responder: Responder = responder or default_responder
        self.model_name = model_name
        self.rates = _checked_rates(rates or {})
        self.retry_after = retry_after
        self.timeout_delay_s = timeout_delay_s
        self.all_fail = all_fail
        self.echo_headers = echo_headers
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # the Authorization header of each request, in order
        self.fault_log: list[ServedFault] = []
        self.request_count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._random = random.Random(seed)
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:54321/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def client(self, cache_dir: Path, **settings: Any) -> LLMClient:
        """An `LLMClient` on this server: model ``openai/fake``, near-zero backoff, no progress bars.

        The caller sets a dummy ``OPENAI_API_KEY`` (litellm wants one for the openai provider).
        """
        fields: dict[str, Any] = {"model": "openai/fake", "api_base": self.base_url, "timeout_s": 10.0}
        fields.update(settings)
        return LLMClient(
            LLMSettings(**fields), cache_location=cache_dir, backoff_base_s=0.001, progress=False
        )

    # -- configuration ---------------------------------------------------------------------------
    def inject(self, *faults: Fault | FaultKind) -> None:
        """Queue faults (or bare kinds with default options) for the next requests, in order."""
        with self._lock:
            self._faults.extend(Fault(f) if isinstance(f, str) else f for f in faults)

    def reset_counters(self) -> None:
        """Forget requests seen, their faults and the in-flight peak (pending faults stay queued)."""
        with self._lock:
            self.requests.clear()
            self.authorizations.clear()
            self.fault_log.clear()
            self.request_count = 0
            self.max_in_flight = self.in_flight

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    # -- used by the handler ---------------------------------------------------------------------
    def _enter(self, request: dict[str, Any], authorization: str | None = None) -> Fault | None:
        with self._lock:
            self.request_count += 1
            self.requests.append(request)
            self.authorizations.append(authorization)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            random_fault = self._draw_fault()
            if self.all_fail:
                status = ALL_FAIL_STATUSES[self.request_count % len(ALL_FAIL_STATUSES)]
                self.fault_log.append("all_fail")
                return Fault("server_error", status=status)
            fault = self._faults.popleft() if self._faults else random_fault
            self.fault_log.append(None if fault is None else fault.kind)
            return fault

    def _draw_fault(self) -> Fault | None:
        """This request's random fault (drawn for every request, so the sequence depends only on the seed)."""
        draw = self._random.random()
        for kind, rate in self.rates.items():
            if draw < rate:
                return Fault(kind, retry_after=self.retry_after, delay_s=self.timeout_delay_s)
            draw -= rate
        return None

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _sleep(self, seconds: float) -> None:
        """Sleep, but wake early when the server stops, so shutdown is never held up."""
        self._stopping.wait(seconds)


# -- command line ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fake_openai_server",
        description="Serve the fake OpenAI chat-completions API on 127.0.0.1 until interrupted; "
        "replies echo the last user message. Rates are per-request probabilities of one fault.",
    )
    parser.add_argument("--port", type=int, default=8765, help="loopback port; 0 picks a free one")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every request waits")
    parser.add_argument("--rate-limit", type=float, default=0.0, help="share of HTTP 429 replies")
    parser.add_argument(
        "--retry-after", type=float, default=None, help="Retry-After seconds of a 429 (default: no header)"
    )
    parser.add_argument("--server-error", type=float, default=0.0, help="share of HTTP 500 replies")
    parser.add_argument("--timeout", type=float, default=0.0, help="share of replies held --timeout-delay")
    parser.add_argument("--timeout-delay", type=float, default=5.0, help="seconds a timed-out reply waits")
    parser.add_argument("--malformed-json", type=float, default=0.0, help="share of non-JSON contents")
    parser.add_argument("--all-fail", action="store_true", help="answer every request with 503 or 500")
    parser.add_argument("--echo-headers", action="store_true", help="echo request headers in error bodies")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random faults")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; print the base URL on stdout once the port is bound."""
    args = parse_args(argv)
    rates: dict[FaultKind, float] = {
        "rate_limit": args.rate_limit,
        "server_error": args.server_error,
        "timeout": args.timeout,
        "malformed_json": args.malformed_json,
    }
    try:
        server = FakeOpenAIServer(
            latency_s=args.latency,
            rates=rates,
            seed=args.seed,
            retry_after=args.retry_after,
            timeout_delay_s=args.timeout_delay,
            all_fail=args.all_fail,
            echo_headers=args.echo_headers,
            port=args.port,
        ).start()
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return server.serve_until_signalled(server.base_url)


if __name__ == "__main__":
    sys.exit(main())
