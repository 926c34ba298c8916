"""A running Arize Phoenix server as the `traces` input's source, and the place its scores go back to.

Phoenix's REST API serves a project's spans in the OTLP JSON structure (`GET /v1/projects/{project}/spans/
otlpv1`, proto field names), so they are read by the same code as an export file (`ragbench.inputs.spans`).
The window is the root spans' start time, as for a file: the roots that started in it are listed first
(`parent_id=null`), then every span of their traces, so a trace whose last span ended after the window is
still whole. Scores go back as span annotations (`POST /v1/span_annotations`), one per (span, metric,
cell), keyed so that a run made again updates its annotations instead of adding copies.

A server that cannot be reached, or answers with an error, is a `PhoenixError` naming the URL and what
happened, after a few bounded retries: never an empty window. The API key, when the server wants one, is
read from the environment variable the config names, where the reading runs, and sent to that server only."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import Field, field_validator

from ragbench.inputs.spans import SpanFile, read_spans
from ragbench.section import Section

# Spans a page holds (the API's largest), trace ids a request names (its URL stays short), annotations a
# request sends.
PAGE = 1000
TRACES_PER_REQUEST = 50
ANNOTATIONS_PER_REQUEST = 200
# What a request that failed for the server's or the network's sake is given: tries, the first pause (s).
TRIES = 4
FIRST_PAUSE_S = 0.5


class PhoenixError(RuntimeError):
    """Phoenix could not be read or written: the message names the server, the request and why."""


class PhoenixSource(Section):
    """A Phoenix server's project whose RAG traces are read (and annotated with their scores)."""

    url: str = Field(description="the server's base URL, e.g. http://127.0.0.1:6006")
    project: str = Field(default="default", description="the Phoenix project (its name or id)")
    api_key_env: str = Field(
        default="PHOENIX_API_KEY",
        description="environment variable holding the API key, sent as a bearer token to this server only; "
        "unset: no key is sent (a server without authentication)",
    )
    annotate: bool = Field(default=True, description="write each trace's scores back as span annotations")
    timeout_s: float = Field(default=30.0, gt=0, description="seconds one request may take")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"eval_cases.traces.phoenix.url {url!r}: an http:// or https:// URL")
        return url.rstrip("/")

    def origin(self) -> str:
        return f"Phoenix {self.url} project {self.project}"


class PhoenixClient:
    """The few REST calls ragbench makes, with bounded retries on connection errors, time-outs and 5xx."""

    def __init__(self, source: PhoenixSource) -> None:
        self.source = source
        key = os.environ.get(source.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=source.url, headers=headers, timeout=source.timeout_s)

    def __enter__(self) -> PhoenixClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        pause = FIRST_PAUSE_S
        for attempt in range(1, TRIES + 1):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.HTTPError as error:
                problem = f"{type(error).__name__}: {error}"
            else:
                if response.status_code < 500:
                    break
                problem = f"HTTP {response.status_code}"
            if attempt == TRIES:
                raise PhoenixError(
                    f"{self.source.origin()}: {method} {path} failed {TRIES} times, last: {problem}. Is the "
                    "server running and the URL right?"
                )
            time.sleep(pause)
            pause *= 2
        if response.status_code in (401, 403):
            raise PhoenixError(
                f"{self.source.origin()}: {method} {path}: HTTP {response.status_code}, not authorized: put "
                f"the server's API key in the environment variable {self.source.api_key_env}"
            )
        if response.status_code == 404:
            raise PhoenixError(f"{self.source.origin()}: {method} {path}: not found (is the project right?)")
        if response.status_code >= 400:
            raise PhoenixError(
                f"{self.source.origin()}: {method} {path}: HTTP {response.status_code}: {response.text[:300]}"
            )
        return response.json()

    def _pages(self, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        path = f"/v1/projects/{quote(self.source.project, safe='')}/spans/otlpv1"
        cursor = None
        while True:
            page = params | {"limit": PAGE} | ({"cursor": cursor} if cursor else {})
            body = self._request("GET", path, params=page)
            yield from body.get("data") or []
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def spans(self, start: datetime | None, end: datetime | None) -> SpanFile:
        """Every span of the traces whose root started in [start, end)."""
        window = {"start_time": start.isoformat()} if start else {}
        window |= {"end_time": end.isoformat()} if end else {}
        roots = list(self._pages(window | {"parent_id": "null"}))
        trace_ids = sorted({str(root.get("trace_id")) for root in roots if root.get("trace_id")})
        raw: list[dict[str, Any]] = [root for root in roots if not root.get("trace_id")]
        for first in range(0, len(trace_ids), TRACES_PER_REQUEST):
            raw += self._pages({"trace_id": trace_ids[first : first + TRACES_PER_REQUEST]})
        return read_spans(raw, self.source.origin() + " spans")

    def annotate(self, annotations: Sequence[dict[str, Any]]) -> int:
        """Span annotations (`SpanAnnotationData` objects) written, synchronously; how many were."""
        for first in range(0, len(annotations), ANNOTATIONS_PER_REQUEST):
            batch = list(annotations[first : first + ANNOTATIONS_PER_REQUEST])
            self._request("POST", "/v1/span_annotations", params={"sync": "true"}, json={"data": batch})
        return len(annotations)

    def span_annotations(self, span_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The annotations Phoenix holds for these spans (every page)."""
        path = f"/v1/projects/{quote(self.source.project, safe='')}/span_annotations"
        found: list[dict[str, Any]] = []
        for first in range(0, len(span_ids), TRACES_PER_REQUEST):
            cursor = None
            while True:
                params: dict[str, Any] = {"span_ids": list(span_ids[first : first + TRACES_PER_REQUEST])}
                body = self._request("GET", path, params=params | ({"cursor": cursor} if cursor else {}))
                found += body.get("data") or []
                cursor = body.get("next_cursor")
                if not cursor:
                    break
        return found
