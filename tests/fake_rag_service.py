"""A loopback-only fake of a team's RAG HTTP service, so ragbench's external-system client can be tested
through the real HTTP stack without any real service.

It serves ``POST /ask`` (a JSON body; the question is its ``question`` key) and ``GET /ask?question=...``
on 127.0.0.1 (an ephemeral port by default) and replies 200 with ``responder(question)`` as JSON, by
default ``{"answer": "echo: <question>", "contexts": [{"text": ..., "source": "doc.md"}]}``. A responder
that returns a ``str`` or ``bytes`` is sent as is (``text/plain``), to fake a reply that is not JSON.

Each request meets at most one failure, strongest first:

- ``inject([...])``: the next requests get these statuses in order (429 and 503 carry ``Retry-After``);
  a 2xx in the script is served normally.
- ``outage`` (settable while serving): every request gets 503 with ``Retry-After``.
- ``token``: a request without ``Authorization: Bearer <token>`` gets 401.
- ``failure_rate``: every request draws one number from a generator seeded with ``seed`` (so request
  *n* meets the same random failure in every run), and fails with 503 and ``Retry-After`` under the rate.

``retry_after`` is the ``Retry-After`` value in seconds (a string is sent verbatim, to fake a malformed
header; None sends none). ``echo_headers`` puts the request's headers into every error body, as some
proxies do (sorted by name and first in the body, as httpbin echoes them), so tests can check that a
credential never leaks from an error into results or logs.
``delay_s`` (settable) is slept before every reply. Counters, all updated under one lock, are there for
assertions: ``request_count`` (every HTTP request), ``answered`` (200 replies), ``questions`` (the
questions answered with 200), ``headers_seen`` (each request's headers, names as sent), ``bodies`` (the
parsed JSON body or query of each /ask request), ``methods``, ``statuses`` (each reply's status),
``in_flight`` and ``peak_in_flight``.

Started on its own it serves until interrupted, for manual runs::

    python -m tests.fake_rag_service --port 8766 --failure-rate 0.2 --retry-after 0.5 --token s3cr3t
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    from tests.loopback import LoopbackHTTPServer, LoopbackServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from loopback import LoopbackHTTPServer, LoopbackServer  # type: ignore[no-redef]

Responder = Callable[[str], Any]
ASK_PATH = "/ask"
_RETRY_AFTER_STATUSES = (429, 503)
_REASONS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    429: "rate limited",
    500: "internal server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}


def default_responder(question: str) -> dict[str, Any]:
    """An echo of the question with one passage."""
    return {
        "answer": f"echo: {question}",
        "contexts": [{"text": f"A passage that mentions {question}", "source": "doc.md"}],
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, delayed ACKs add ~40 ms to every reply.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests read the counters instead."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""  # read it all, so keep-alive stays in step
        request_headers = dict(self.headers.items())
        draw = owner._enter(request_headers)
        try:
            status, body, content_type, extra = owner._reply(
                method, self.path, raw, self.headers.get("Authorization"), draw
            )
            if status >= 400 and owner.echo_headers and isinstance(body, dict):
                # As httpbin does: the headers sorted by name, first in the body (so the credential
                # falls within the first ~200 characters a client keeps of an error), and in the message.
                echoed = dict(sorted(request_headers.items()))
                dump = "; ".join(f"{name}: {value}" for name, value in echoed.items())
                body = {
                    "request_headers": echoed,
                    **body,
                    "error": f"{body.get('error', '')} (request headers: {dump})",
                }
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired); nothing to answer
        finally:
            owner._leave()


class _Server(LoopbackHTTPServer):
    owner: FakeRagService


class FakeRagService(LoopbackServer):
    """Threaded fake RAG service on 127.0.0.1; use as ``with FakeRagService() as service:``, then point a
    client at ``service.url``."""

    handler_class = _Handler
    server_class = _Server

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        token: str | None = None,
        failure_rate: float = 0.0,
        retry_after: float | str | None = 0.0,
        seed: int = 0,
        echo_headers: bool = False,
        delay_s: float = 0.0,
        port: int = 0,
    ) -> None:
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be in [0, 1], got {failure_rate}")
        super().__init__(port=port)
        self.responder: Responder = responder or default_responder
        self.token = token
        self.failure_rate = failure_rate
        self.retry_after = retry_after
        self.echo_headers = echo_headers
        self.delay_s = delay_s
        self.outage = False
        self.request_count = 0
        self.answered = 0
        self.questions: list[str] = []
        self.headers_seen: list[dict[str, str]] = []
        self.bodies: list[Any] = []
        self.methods: list[str] = []
        self.statuses: list[int] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._random = random.Random(seed)
        self._script: deque[int] = deque()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{ASK_PATH}"

    # -- configuration ---------------------------------------------------------------------------
    def inject(self, statuses: Iterable[int]) -> None:
        """The next requests get these HTTP statuses, in arrival order (a 2xx is served normally)."""
        with self._lock:
            self._script.extend(int(status) for status in statuses)

    @property
    def pending(self) -> int:
        """Injected statuses not yet served."""
        with self._lock:
            return len(self._script)

    def reset_counters(self) -> None:
        """Forget the requests seen and the in-flight peak (injected statuses stay queued)."""
        with self._lock:
            self.request_count = 0
            self.answered = 0
            self.questions.clear()
            self.headers_seen.clear()
            self.bodies.clear()
            self.methods.clear()
            self.statuses.clear()
            self.peak_in_flight = self.in_flight

    # -- used by the handler ---------------------------------------------------------------------
    def _enter(self, headers: dict[str, str]) -> float:
        """Count the request; its random draw (one per request, so failures depend only on the seed)."""
        with self._lock:
            self.request_count += 1
            self.headers_seen.append(headers)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return self._random.random()

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _retry_after_header(self) -> dict[str, str]:
        value = self.retry_after
        if value is None:
            return {}
        return {"Retry-After": value if isinstance(value, str) else f"{value:g}"}

    def _error(self, status: int, message: str | None = None) -> tuple[int, Any, str, dict[str, str]]:
        headers = self._retry_after_header() if status in _RETRY_AFTER_STATUSES else {}
        with self._lock:
            self.statuses.append(status)
        body = {"error": message or _REASONS.get(status, f"HTTP {status}"), "status": status}
        return status, body, "application/json", headers

    def _reply(
        self, method: str, path: str, raw: bytes, authorization: str | None, draw: float
    ) -> tuple[int, Any, str, dict[str, str]]:
        """(status, body, content type, extra headers) of one request."""
        if self.delay_s > 0:
            self._stopping.wait(self.delay_s)
        target = urlsplit(path)
        if target.path.rstrip("/") != ASK_PATH:
            return self._error(404, f"no route {target.path}")
        if method == "GET":
            request: Any = {key: values[-1] for key, values in parse_qs(target.query).items()}
        else:
            try:
                request = json.loads(raw or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError):
                return self._error(400, "body is not JSON")
        with self._lock:
            self.bodies.append(request)
            self.methods.append(method)
        question = request.get("question") if isinstance(request, dict) else None
        if not isinstance(question, str):
            return self._error(400, "no `question` string in the request")
        with self._lock:
            scripted = self._script.popleft() if self._script else None
        if scripted is not None and not 200 <= scripted < 300:
            return self._error(scripted)
        if self.outage:
            return self._error(503, "outage")
        if self.token is not None and authorization != f"Bearer {self.token}":
            return self._error(401)
        if draw < self.failure_rate:
            return self._error(503)
        try:
            answer = self.responder(question)
        except Exception as error:  # a broken responder shows up as the service's 500
            return self._error(500, f"responder failed: {type(error).__name__}: {error}")
        with self._lock:
            self.answered += 1
            self.questions.append(question)
            self.statuses.append(200)
        if isinstance(answer, str | bytes):
            data = answer.encode() if isinstance(answer, str) else answer
            return 200, data, "text/plain; charset=utf-8", {}
        return 200, answer, "application/json", {}


# -- command line ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fake_rag_service",
        description="Serve a fake RAG service (POST /ask, GET /ask?question=) on 127.0.0.1 until "
        "interrupted; answers echo the question.",
    )
    parser.add_argument("--port", type=int, default=8766, help="loopback port; 0 picks a free one")
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer <token>'")
    parser.add_argument("--failure-rate", type=float, default=0.0, help="share of 503 replies")
    parser.add_argument("--retry-after", type=float, default=0.0, help="Retry-After seconds of 429/503")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds every request waits")
    parser.add_argument("--echo-headers", action="store_true", help="echo request headers in error bodies")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random failures")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; print the URL on stdout once the port is bound."""
    args = parse_args(argv)
    try:
        service = FakeRagService(
            token=args.token,
            failure_rate=args.failure_rate,
            retry_after=args.retry_after,
            seed=args.seed,
            echo_headers=args.echo_headers,
            delay_s=args.delay,
            port=args.port,
        ).start()
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return service.serve_until_signalled(service.url)


if __name__ == "__main__":
    sys.exit(main())
