"""Hand-written OTLP/JSON trace exports in the OpenInference conventions, for the `traces` input's tests: a
RAG trace as a LangChain chain records it (a CHAIN root whose input is JSON with the question, a RETRIEVER
child with its documents, an LLM child with the prompt's messages and token counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HOUR_NS = 3600 * 10**9
# 2026-12-01T12:00:00Z, the tests' "now" minus a day
NOON_NS = 1_796_126_400 * 10**9


def value(item: Any) -> dict[str, Any]:
    """A Python value as an OTLP AnyValue (ints as strings, as the JSON encoding writes int64)."""
    if isinstance(item, bool):
        return {"boolValue": item}
    if isinstance(item, int):
        return {"intValue": str(item)}
    if isinstance(item, float):
        return {"doubleValue": item}
    if isinstance(item, list):
        return {"arrayValue": {"values": [value(x) for x in item]}}
    return {"stringValue": str(item)}


def span(
    trace: int, number: int, parent: int | None, kind: str, start_ns: int, **attributes: Any
) -> dict[str, Any]:
    """One span of trace `trace` (ids made from the numbers), `attributes` with '__' for '.'."""
    raw = {
        "traceId": f"{trace:032x}",
        "spanId": f"{trace:08x}{number:08x}",
        "name": kind.lower(),
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 1_500_000_000),
        "attributes": [{"key": "openinference.span.kind", "value": value(kind)}]
        + [{"key": key.replace("__", "."), "value": value(v)} for key, v in attributes.items()],
        "status": {},
    }
    if parent is not None:
        raw["parentSpanId"] = f"{trace:08x}{parent:08x}"
    return raw


def rag_trace(
    trace: int,
    question: str,
    answer: str,
    documents: list[tuple[str, str, float]],
    *,
    start_ns: int = NOON_NS,
    tags: list[str] | None = None,
    history: list[tuple[str, str]] = (),  # type: ignore[assignment]
    retriever: bool = True,
) -> list[dict[str, Any]]:
    """The spans of one RAG turn: documents as (id, text, score), `history` the earlier (role, content)."""
    root = span(
        trace,
        1,
        None,
        "CHAIN",
        start_ns,
        input__value=json.dumps({"question": question}),
        input__mime_type="application/json",
        output__value=answer,
        **({"tag__tags": tags} if tags else {}),
    )
    root["endTimeUnixNano"] = str(start_ns + 2_000_000_000)
    docs: dict[str, Any] = {}
    for n, (doc_id, text, score) in enumerate(documents):
        docs[f"retrieval__documents__{n}__document__id"] = doc_id
        docs[f"retrieval__documents__{n}__document__content"] = text
        docs[f"retrieval__documents__{n}__document__score"] = score
    messages: dict[str, Any] = {
        "llm__input_messages__0__message__role": "system",
        "llm__input_messages__0__message__content": "Answer from the passages.",
    }
    for n, (role, content) in enumerate(history, start=1):
        messages[f"llm__input_messages__{n}__message__role"] = role
        messages[f"llm__input_messages__{n}__message__content"] = content
    last = len(history) + 1
    messages[f"llm__input_messages__{last}__message__role"] = "user"
    messages[f"llm__input_messages__{last}__message__content"] = f"Passages: ...\nQuestion: {question}"
    spans = [root]
    if retriever:
        spans.append(span(trace, 2, 1, "RETRIEVER", start_ns + 10**8, input__value=question, **docs))
    spans.append(
        span(
            trace,
            3,
            1,
            "LLM",
            start_ns + 5 * 10**8,
            llm__token_count__prompt=120,
            llm__token_count__completion=30,
            llm__output_messages__0__message__role="assistant",
            llm__output_messages__0__message__content=answer,
            **messages,
        )
    )
    return spans


def export(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """One ExportTraceServiceRequest holding `spans`."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": value("prod-rag")}]},
                "scopeSpans": [
                    {"scope": {"name": "openinference.instrumentation.langchain"}, "spans": spans}
                ],
            }
        ]
    }


def write_jsonl(path: Path, batches: list[list[dict[str, Any]]]) -> Path:
    """The batches as JSON Lines of requests, as the collector's file exporter writes them."""
    path.write_text("".join(json.dumps(export(batch)) + "\n" for batch in batches))
    return path
