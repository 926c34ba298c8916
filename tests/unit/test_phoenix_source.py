"""Reading traces from a Phoenix server's REST API and writing scores back as span annotations, against a
small stand-in on 127.0.0.1 that serves the API's shapes (proto field names, cursor pages, trace-id
filters). The real server is tests/integration/test_phoenix_traces.py's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from ragbench.analysis.annotations import Annotation, TraceAnnotations
from ragbench.inputs.eval_cases import EvalCaseError, load_trace_cases
from ragbench.inputs.phoenix import PhoenixClient, PhoenixError, PhoenixSource
from ragbench.inputs.spans import read_spans
from ragbench.inputs.traces import TracesConfig
from tests.loopback import LoopbackServer
from tests.otlp_traces import NOON_NS, rag_trace

NOW = datetime.fromtimestamp(NOON_NS / 1e9, tz=UTC)  # the first trace an hour later
HOUR = 3600 * 10**9


def snake(raw: dict) -> dict:
    """A span as Phoenix's otlpv1 endpoint writes it: proto field names, values included."""
    renamed = {
        "traceId": "trace_id",
        "spanId": "span_id",
        "parentSpanId": "parent_span_id",
        "startTimeUnixNano": "start_time_unix_nano",
        "endTimeUnixNano": "end_time_unix_nano",
        "stringValue": "string_value",
        "intValue": "int_value",
        "doubleValue": "double_value",
        "arrayValue": "array_value",
    }
    if isinstance(raw, dict):
        renamed_raw = {renamed.get(key, key): snake(value) for key, value in raw.items()}
        if any(key.endswith("_value") for key in renamed_raw):  # an AnyValue: every field, unset ones null
            return dict.fromkeys(VALUE_FIELDS) | renamed_raw
        return renamed_raw
    if isinstance(raw, list):
        return [snake(item) for item in raw]
    return raw


VALUE_FIELDS = ("array_value", "bool_value", "bytes_value", "double_value", "int_value", "string_value")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        fake: FakePhoenix = self.server.owner
        url = urlparse(self.path)
        query = parse_qs(url.query)
        fake.requests.append((url.path, query, self.headers.get("Authorization")))
        if fake.failures:
            fake.failures -= 1
            return self._reply(503, {"detail": "busy"})
        if url.path != "/v1/projects/prod/spans/otlpv1":
            return self._reply(404, {"detail": "project not found"})
        spans = fake.spans
        if "parent_id" in query:
            spans = [s for s in spans if not s.get("parent_span_id")]
            if "start_time" in query:
                start = datetime.fromisoformat(query["start_time"][0]).timestamp() * 1e9
                spans = [s for s in spans if int(s["start_time_unix_nano"]) >= start]
        if "trace_id" in query:
            spans = [s for s in spans if s["trace_id"] in query["trace_id"]]
        offset = int(query.get("cursor", ["0"])[0])
        page = spans[offset : offset + 2]  # tiny pages: every read walks the cursor
        more = offset + 2 < len(spans)
        self._reply(200, {"data": page, "next_cursor": str(offset + 2) if more else None})

    def do_POST(self) -> None:
        fake: FakePhoenix = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake.posted.append((self.path, body))
        self._reply(200, {"data": [{"id": str(n)} for n, _ in enumerate(body["data"])]})


class FakePhoenix(LoopbackServer):
    handler_class = Handler

    def __init__(self, spans: list[dict]) -> None:
        super().__init__()
        self.spans = spans
        self.requests: list[tuple[str, dict, str | None]] = []
        self.posted: list[tuple[str, dict]] = []
        self.failures = 0


def traces() -> list[dict]:
    """Three RAG traces of the last hours and one of yesterday, as Phoenix serves them."""
    starts = [NOON_NS + HOUR, NOON_NS + 25 * HOUR, NOON_NS + 25 * HOUR + 10**9, NOON_NS + 24 * HOUR + 5]
    spans = []
    for n, start in enumerate(starts, start=1):
        spans += rag_trace(
            n, f"Question {n}?", f"Answer {n}.", [("loops.md", "Use break.", 0.9)], start_ns=start
        )
    return [snake(span) for span in spans]


def test_spans_in_either_field_casing_read_the_same():
    camel = rag_trace(1, "Q?", "A.", [("a.md", "text", 0.5)])
    assert read_spans([snake(s) for s in camel], "phoenix").spans == read_spans(camel, "file").spans


def test_a_documents_metadata_flattened_as_phoenix_serves_it_names_its_source_and_score():
    from ragbench.inputs.traces import rag_case

    spans = rag_trace(1, "Q?", "A.", [("a.md", "text", 0.5)])
    retriever = [a for a in spans[1]["attributes"] if not a["key"].endswith((".id", ".score"))]
    metadata = "retrieval.documents.0.document.metadata"
    one_string = [{"key": metadata, "value": {"stringValue": '{"source": "a.md", "score": 0.25}'}}]
    flattened = [  # as Phoenix serves it
        {"key": f"{metadata}.source", "value": {"stringValue": "a.md"}},
        {"key": f"{metadata}.score", "value": {"doubleValue": 0.25}},
    ]
    for attributes in (one_string, flattened):
        with_metadata = [*spans[:1], {**spans[1], "attributes": [*retriever, *attributes]}, *spans[2:]]
        (document,) = rag_case(read_spans(with_metadata, "x").spans)["logged"]["documents"]
        assert (document["id"], document["text"], document["score"]) == ("a.md", "text", 0.25)


def test_a_window_of_a_phoenix_project_becomes_cases_with_every_page_read(monkeypatch):
    monkeypatch.setenv("PHOENIX_API_KEY", "secret-key")
    with FakePhoenix(traces()) as fake:
        source = PhoenixSource(url=f"http://127.0.0.1:{fake.port}/", project="prod")
        config = TracesConfig(phoenix=source, since="24h")
        cases, reading = load_trace_cases(config, now=NOW + timedelta(hours=26))
        assert [case.question for case in cases] == ["Question 4?", "Question 2?", "Question 3?"]
        assert reading.origin == f"Phoenix http://127.0.0.1:{fake.port} project prod"
        assert reading.spans == 9 and reading.usable == 3 and reading.outside == 0
        roots = [query for path, query, _ in fake.requests if "parent_id" in query]
        assert roots[0]["parent_id"] == ["null"] and "start_time" in roots[0] and "end_time" in roots[0]
        assert len(roots) == 2  # 3 roots in pages of 2
        assert {key for _, _, key in fake.requests} == {"Bearer secret-key"}  # to its own server only


def test_annotations_go_back_keyed_by_cell_so_a_rerun_updates_them():
    annotations = TraceAnnotations(
        annotations=[
            Annotation(trace_id="t" * 32, span_id=f"{n:016x}", name="faithfulness", score=0.75, cell="prod")
            for n in range(450)
        ]
    )
    with FakePhoenix([]) as fake, PhoenixClient(PhoenixSource(url=f"http://127.0.0.1:{fake.port}")) as client:
        assert client.annotate(annotations.phoenix_data()) == 450
    assert [len(body["data"]) for _, body in fake.posted] == [200, 200, 50]
    assert all(path == "/v1/span_annotations?sync=true" for path, _ in fake.posted)
    first = fake.posted[0][1]["data"][0]
    assert first["identifier"] == "ragbench:prod" and first["result"]["score"] == 0.75
    assert first["span_id"] == f"{0:016x}" and first["annotator_kind"] == "LLM"


def test_a_busy_server_is_retried_and_a_wrong_project_named(monkeypatch):
    monkeypatch.setattr("ragbench.inputs.phoenix.FIRST_PAUSE_S", 0.01)
    with FakePhoenix(traces()) as fake:
        fake.failures = 2
        config = TracesConfig(phoenix=PhoenixSource(url=f"http://127.0.0.1:{fake.port}", project="prod"))
        cases, _ = load_trace_cases(config, now=NOW)
        assert len(cases) == 4
        with pytest.raises(EvalCaseError, match=r"not found \(is the project right"):
            load_trace_cases(
                TracesConfig(phoenix=PhoenixSource(url=f"http://127.0.0.1:{fake.port}", project="staging")),
                now=NOW,
            )


def test_a_phoenix_that_is_down_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("ragbench.inputs.phoenix.FIRST_PAUSE_S", 0.01)
    with FakePhoenix([]) as fake:
        port = fake.port  # a port that was just free, and is again
    config = TracesConfig(phoenix=PhoenixSource(url=f"http://127.0.0.1:{port}"))
    refused = rf"Phoenix http://127.0.0.1:{port} project default: GET .* failed 4 times, last: ConnectError"
    with pytest.raises(EvalCaseError, match=refused + ".*Is the server running"):
        load_trace_cases(config, now=NOW)
    with pytest.raises(PhoenixError, match="failed 4 times"), PhoenixClient(config.phoenix) as client:
        client.annotate([{"span_id": "0" * 16}])


def test_a_traces_source_is_a_file_or_a_server_not_both():
    with pytest.raises(ValueError, match="one source"):
        TracesConfig(path="spans.jsonl", phoenix=PhoenixSource(url="http://127.0.0.1:6006"))
    with pytest.raises(ValueError, match="one source"):
        TracesConfig()
    with pytest.raises(ValueError, match="http:// or https://"):
        PhoenixSource(url="127.0.0.1:6006")
