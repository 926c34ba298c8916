"""OpenTelemetry spans as an OTLP/JSON export holds them, read into plain records: the `traces` input's first
half (`ragbench.inputs.traces` makes eval cases of them).

A file is one `ExportTraceServiceRequest` in the OTLP JSON encoding (``{"resourceSpans": [{"scopeSpans":
[{"spans": [...]}]}]}``) or JSON Lines of them, as the OpenTelemetry collector's file exporter writes. Ids
are hex, times nanoseconds since the epoch (numbers or, as int64 is encoded, strings), attributes
``[{key, value: {stringValue | intValue | doubleValue | boolValue | arrayValue | kvlistValue}}]``.

A file that is no such export (not JSON, no ``resourceSpans``) is refused as a whole; one span that breaks
the format (no id, a bad time) makes only its trace malformed, so the other traces are still read and the
broken one is listed with its reason.

The attribute names are OpenInference's (openinference-semantic-conventions 0.1.42:
``openinference.span.kind``, ``input.value``, ``retrieval.documents.N.document.content``...), written out
here rather than imported: the names are a wire format, and the package would be one more dependency for
a dozen strings."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ragbench.inputs.tables import TableError, not_utf8

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
TAGS = "tag.tags"
PROMPT_TOKENS = "llm.token_count.prompt"
COMPLETION_TOKENS = "llm.token_count.completion"
# a document's metadata is one JSON string as the instrumentation writes it, or flattened into
# `document.metadata.<key>` attributes as Phoenix stores and serves it
RETRIEVED = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(content|id|score|metadata(?:\..+)?)$")
INPUT_MESSAGE = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|content)$")
OUTPUT_MESSAGE = re.compile(r"^llm\.output_messages\.(\d+)\.message\.(role|content)$")

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_SPAN_ID = re.compile(r"^[0-9a-fA-F]{16}$")
# The proto field names, which protobuf's JSON parsers accept beside the lowerCamelCase ones, and which
# Phoenix's REST API writes (`/v1/projects/{project}/spans/otlpv1`).
_CAMEL = {
    name: re.sub(r"_([a-z])", lambda letter: letter.group(1).upper(), name)
    for name in (
        "trace_id",
        "span_id",
        "parent_span_id",
        "start_time_unix_nano",
        "end_time_unix_nano",
        "string_value",
        "int_value",
        "double_value",
        "bool_value",
        "array_value",
        "kvlist_value",
        "bytes_value",
    )
}
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")


class SpanFileError(TableError):
    """The file is not an OTLP/JSON trace export at all; the message names it and says why."""


@dataclass
class Span:
    """One span: ids (lower-case hex), times (ns), its attributes as plain values, its status."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # the span's status message when its status is ERROR

    @property
    def kind(self) -> str:
        return str(self.attributes.get(SPAN_KIND, "")).upper()


@dataclass
class BrokenSpan:
    """A span that breaks the format: where it is in the file, its trace when that could be read, why."""

    where: str
    trace_id: str | None
    reason: str


@dataclass
class SpanFile:
    """Every span of an export, and the ones that could not be read."""

    spans: list[Span]
    broken: list[BrokenSpan]


def attribute_value(value: Any) -> Any:
    """An OTLP AnyValue as a Python value (an int64 encoded as a string becomes an int)."""
    if not isinstance(value, dict):
        raise ValueError(f"attribute value {value!r:.60} is not an AnyValue object")
    # Phoenix writes every field of the AnyValue, the unset ones as null
    value = {_CAMEL.get(key, key): item for key, item in value.items() if item is not None}
    if "stringValue" in value:
        return str(value["stringValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [attribute_value(item) for item in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes_of((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return str(value["bytesValue"])
    if not value:
        return None
    raise ValueError(f"attribute value of unknown type {sorted(value)}")


def attributes_of(items: Any) -> dict[str, Any]:
    """OTLP `[{key, value}]` attributes as a mapping."""
    if not isinstance(items, list):
        raise ValueError("attributes is not a list")
    found = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError(f"attribute {item!r:.60} has no key")
        found[item["key"]] = attribute_value(item.get("value", {}))
    return found


def _nanos(span: dict[str, Any], key: str) -> int:
    value = span.get(key)
    try:
        nanos = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{key} {value!r:.40} is not a time in nanoseconds") from None
    if nanos <= 0:
        raise ValueError(f"{key} {value!r:.40} is not a time in nanoseconds")
    return nanos


def _span(raw: Any) -> Span:
    if not isinstance(raw, dict):
        raise ValueError("not a span object")
    raw = {_CAMEL.get(key, key): item for key, item in raw.items()}
    trace_id, span_id = raw.get("traceId"), raw.get("spanId")
    if not isinstance(trace_id, str) or not _TRACE_ID.match(trace_id):
        raise ValueError(f"traceId {trace_id!r:.40} is not 32 hex digits")
    if not isinstance(span_id, str) or not _SPAN_ID.match(span_id):
        raise ValueError(f"spanId {span_id!r:.40} is not 16 hex digits")
    parent = raw.get("parentSpanId") or None
    if parent is not None and (not isinstance(parent, str) or not _SPAN_ID.match(parent)):
        raise ValueError(f"parentSpanId {parent!r:.40} is not 16 hex digits")
    start, end = _nanos(raw, "startTimeUnixNano"), _nanos(raw, "endTimeUnixNano")
    if end < start:
        raise ValueError("endTimeUnixNano is before startTimeUnixNano")
    status = raw.get("status") or {}
    failed = isinstance(status, dict) and status.get("code") in _STATUS_ERROR
    return Span(
        trace_id=trace_id.lower(),
        span_id=span_id.lower(),
        parent_id=parent.lower() if parent else None,
        name=str(raw.get("name", "")),
        start_ns=start,
        end_ns=end,
        attributes=attributes_of(raw.get("attributes", [])),
        error=(str(status.get("message") or "status ERROR")) if failed else None,
    )


def _requests(text: str, origin: str) -> list[tuple[str, Any]]:
    """(where, request) for the one request of a JSON file or each line of a JSON Lines file."""
    try:
        return [("", json.loads(text))]
    except json.JSONDecodeError as whole:
        lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise SpanFileError(f"{origin}: not JSON: {whole}") from None
    requests = []
    for number, line in lines:
        try:
            requests.append((f"line {number}, ", json.loads(line)))
        except json.JSONDecodeError as error:
            raise SpanFileError(f"{origin}:{number}: not JSON: {error}") from None
    return requests


def read_span_file(data: bytes, origin: str) -> SpanFile:
    """Every span of an OTLP/JSON export (one request, or JSON Lines of requests). SpanFileError when the
    file as a whole is not one: not UTF-8, not JSON, a request without `resourceSpans`, or no span at all."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpanFileError(f"{origin}: {not_utf8(error)}") from None
    if not text.strip():
        raise SpanFileError(f"{origin}: the file is empty")
    spans: list[Span] = []
    broken: list[BrokenSpan] = []
    for where, request in _requests(text, origin):
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            raise SpanFileError(
                f"{origin}: {where}not an OTLP/JSON trace export (an object with `resourceSpans`, as "
                "ExportTraceServiceRequest is encoded)"
            )
        for r, resource in enumerate(request["resourceSpans"]):
            scopes = resource.get("scopeSpans", []) if isinstance(resource, dict) else None
            if not isinstance(scopes, list):
                raise SpanFileError(f"{origin}: {where}resourceSpans[{r}] has no list of scopeSpans")
            for s, scope in enumerate(scopes):
                raw_spans = scope.get("spans", []) if isinstance(scope, dict) else None
                if not isinstance(raw_spans, list):
                    raise SpanFileError(f"{origin}: {where}scopeSpans[{s}] has no list of spans")
                read = read_spans(raw_spans, f"{where}resourceSpans[{r}].scopeSpans[{s}].spans")
                spans += read.spans
                broken += read.broken
    if not spans and not broken:
        raise SpanFileError(f"{origin}: the export holds no span")
    return SpanFile(spans=spans, broken=broken)


def indexed(attributes: dict[str, Any], pattern: re.Pattern[str]) -> list[dict[str, Any]]:
    """A flattened OpenInference list (``prefix.N.field``) as its items in index order."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := pattern.match(key):
            items.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [items[index] for index in sorted(items)]


def read_spans(raw_spans: list[Any], where: str) -> SpanFile:
    """Spans as OTLP/JSON objects (either field-name casing), each read or, when it breaks the format, kept
    as broken with its place (`where[n]`) and, when its trace id could be read, its trace."""
    spans: list[Span] = []
    broken: list[BrokenSpan] = []
    for n, raw in enumerate(raw_spans):
        try:
            spans.append(_span(raw))
        except (ValueError, TypeError) as error:
            trace_id = (raw.get("traceId") or raw.get("trace_id")) if isinstance(raw, dict) else None
            good_id = isinstance(trace_id, str) and bool(_TRACE_ID.match(trace_id))
            broken.append(
                BrokenSpan(
                    where=f"{where}[{n}]", trace_id=trace_id.lower() if good_id else None, reason=str(error)
                )
            )
    return SpanFile(spans=spans, broken=broken)
