"""Sends an OTLP/JSON export (JSON Lines of ExportTraceServiceRequest, as tests/otlp_traces.py writes and
the collector's file exporter does) to a Phoenix server's OTLP/HTTP endpoint, so a benchmark can read the
same traces from the server as from the file (bench/bench_traces.py --phoenix).

Phoenix takes OTLP/HTTP in protobuf only, so each line is parsed into the request message
(opentelemetry-proto, in .venv-phoenix) and posted as bytes, in batches of requests so a large export
goes in a few calls. OTLP/JSON writes trace and span ids in hex where protobuf's JSON mapping reads bytes
as base64, so the ids are re-encoded first (parsed as they are, a 16-byte trace id becomes 24 bytes and
Phoenix stores nothing). Run with .venv-phoenix's Python:

    .venv-phoenix/bin/python tests/phoenix/load_export.py EXPORT.jsonl http://127.0.0.1:PORT/v1/traces PROJECT
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

REQUESTS_PER_POST = 200
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _base64_ids(node: object) -> object:
    """The OTLP/JSON request with every hex trace and span id (spans' and links') as base64."""
    if isinstance(node, list):
        return [_base64_ids(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: base64.b64encode(bytes.fromhex(value)).decode()
        if key in ID_FIELDS and isinstance(value, str) and value
        else _base64_ids(value)
        for key, value in node.items()
    }


def batches(path: Path, project: str) -> list[ExportTraceServiceRequest]:
    """The export's requests merged a few hundred at a time, each resource named as the project (Phoenix
    files spans by their resource's `openinference.project.name`)."""
    merged: list[ExportTraceServiceRequest] = []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    for first in range(0, len(lines), REQUESTS_PER_POST):
        request = ExportTraceServiceRequest()
        for line in lines[first : first + REQUESTS_PER_POST]:
            part = json_format.ParseDict(_base64_ids(json.loads(line)), ExportTraceServiceRequest())
            for resource_spans in part.resource_spans:
                name = KeyValue(key="openinference.project.name", value=AnyValue(string_value=project))
                resource_spans.resource.attributes.append(name)
            request.resource_spans.extend(part.resource_spans)
        merged.append(request)
    return merged


def main(argv: list[str]) -> int:
    export, endpoint, project = Path(argv[0]), argv[1], argv[2]
    for request in batches(export, project):
        post = urllib.request.Request(
            endpoint,
            data=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            method="POST",
        )
        with urllib.request.urlopen(post, timeout=120) as response:
            if response.status != 200:
                raise SystemExit(f"{endpoint}: HTTP {response.status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
