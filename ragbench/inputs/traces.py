"""The deployed system's own traffic as eval cases: each RAG trace of an OpenInference export (the spans
`ragbench.inputs.spans` reads) becomes a case with the user's question, the conversation before it, and
what the system logged (its answer, the documents it retrieved with their ids and scores, latency, tokens,
trace and span ids), so a `traces` system (`ragbench.generation.systems`) is scored without re-running.

A trace is a RAG trace when it has a retriever span, a question (its root span's input) and an answer (the
root's output, else its last LLM span's). Every other trace is counted and listed with its reason
(`TraceReading.skipped`), never dropped silently. A time window (`since: 24h`, or `start`/`end`) and tags
choose the traces; `sample_size` draws a seeded sample of them with a known inclusion probability, so the
run's numbers estimate the whole window's and label correction works on it as on any run's cases. With
`strata` (tags) the sample is stratified: each stratum (the first of those tags a trace carries, else
`other`) is sampled on its own, so a rare kind of traffic is not left to chance, and the run weights each
stratum by its share of the window (`ragbench.stats.strata`).

Trace content is user data. `redact` names what to mask (built-in kinds such as `email`, or regular
expressions), and it is masked where the traces are read, in the question, the conversation, the answer
and every document. So no judge, hosted or local, no artifact, report, annotation or cache entry ever
holds it, and the reading counts what was masked."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ragbench.inputs.phoenix import PhoenixSource
from ragbench.inputs.spans import (
    COMPLETION_TOKENS,
    INPUT_MESSAGE,
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    OUTPUT_MESSAGE,
    OUTPUT_MIME_TYPE,
    OUTPUT_VALUE,
    PROMPT_TOKENS,
    RETRIEVED,
    TAGS,
    Span,
    SpanFile,
    indexed,
)
from ragbench.inputs.trace_sampling import Stratum, sample_traces, stratified_sample
from ragbench.section import Section
from ragbench.stats.strata import OTHER_STRATUM

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
# Keys a JSON input or output names the question or the answer by (LangChain's and LlamaIndex's chains).
QUESTION_KEYS = ("question", "query", "input", "user_input", "query_str")
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content")
# What `redact` may name by kind; anything else it lists is a regular expression.
REDACTION_KINDS: dict[str, str] = {
    "email": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    "card": r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)",  # 13-19 digits, as payment cards have
    # international (+...), an area code in brackets, or 3-3-4 digits: not a date or a version
    "phone": r"\+\d[\d ().-]{7,}\d|\(\d{2,5}\)[ .-]?\d[\d .-]{4,}\d|(?<!\d)\d{3}[-. ]\d{3}[-. ]\d{4}(?!\d)",
    "ipv4": r"(?<!\d)(?<!\d\.)(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)",
}
REDACTED = "[redacted]"


class TracesConfig(Section):
    """Where the deployed system's traces are read: an OTLP/JSON export file (one request, or JSON Lines of
    requests as the collector's file exporter writes), which traces count (a time window, tags) and how many
    are scored (a seeded sample)."""

    path: str | None = Field(
        default=None, description="OTLP/JSON export file (.json or .jsonl), a path or a URI"
    )
    phoenix: PhoenixSource | None = Field(
        default=None, description="a running Phoenix server's project instead of a file (its REST API)"
    )
    since: str | None = Field(
        default=None, description="relative window ending when the run reads the file: '24h', '90m', '7d'"
    )
    start: datetime | None = Field(default=None, description="absolute window start (ISO 8601; UTC if naive)")
    end: datetime | None = Field(default=None, description="absolute window end (exclusive)")
    tags: list[str] = Field(
        default_factory=list, description="keep only traces carrying every one of these tags (tag.tags)"
    )
    sample_size: int | None = Field(
        default=None, ge=1, description="score a seeded uniform sample of this many RAG traces; null: all"
    )
    seed: int = Field(default=0, description="seed of the sample")
    strata: list[str] = Field(
        default_factory=list,
        description="stratify the sample by these tags: a trace's stratum is the first of them it carries, "
        f"else '{OTHER_STRATUM}'; each stratum is sampled on its own and weighted by its share of the window",
    )
    allocation: Literal["proportional", "equal"] = Field(
        default="proportional",
        description="how sample_size is shared between strata: in proportion to their traces, or equally "
        "(a rare stratum gets as many as a common one; its traces then weigh less)",
    )
    annotations_path: str | None = Field(
        default=None, description="also write the annotations JSONL (scores keyed by span id) to this file"
    )
    redact: list[str] = Field(
        default_factory=list,
        description="mask these in every question, turn, answer and document as read, before anything "
        f"sees them: a kind ({', '.join(REDACTION_KINDS)}) or a regular expression",
    )

    @field_validator("redact")
    @classmethod
    def _patterns_compile(cls, redact: list[str]) -> list[str]:
        for entry in redact:
            try:
                pattern = re.compile(REDACTION_KINDS.get(entry, entry))
            except re.error as error:
                raise ValueError(
                    f"eval_cases.traces.redact: {entry!r} is neither a kind ({', '.join(REDACTION_KINDS)}) "
                    f"nor a regular expression: {error}"
                ) from None
            if pattern.search(""):
                raise ValueError(f"eval_cases.traces.redact: {entry!r} matches the empty text")
        return redact

    @model_validator(mode="after")
    def _check_window(self) -> TracesConfig:
        if (self.path is None) == (self.phoenix is None):
            raise ValueError("eval_cases.traces needs one source: `path` (an export file) or `phoenix`")
        if self.since is not None:
            if self.start is not None or self.end is not None:
                raise ValueError("eval_cases.traces: give `since` or `start`/`end`, not both")
            if not _RELATIVE.match(self.since):
                raise ValueError(
                    f"eval_cases.traces.since {self.since!r}: a number and s, m, h or d, e.g. '24h'"
                )
        if self.start is not None and self.end is not None and _utc(self.end) <= _utc(self.start):
            raise ValueError("eval_cases.traces: `end` must be after `start`")
        if self.strata:
            if self.sample_size is None:
                raise ValueError("eval_cases.traces.strata: stratifying needs a sample_size to share out")
            if len(set(self.strata)) != len(self.strata) or OTHER_STRATUM in self.strata:
                raise ValueError(
                    f"eval_cases.traces.strata: distinct tags, and not {OTHER_STRATUM!r} (the stratum of the "
                    "traces that carry none of them)"
                )
        return self

    @property
    def origin(self) -> str:
        """Where the traces are read, as messages and the report name it."""
        return self.phoenix.origin() if self.phoenix is not None else str(self.path)

    def window(self, now: datetime) -> tuple[datetime | None, datetime | None]:
        """The window's start and end (None: open), `since` counted back from `now`."""
        if self.since is not None:
            match = _RELATIVE.match(self.since)
            assert match is not None
            return _utc(now) - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}), _utc(now)
        return (_utc(self.start) if self.start else None), (_utc(self.end) if self.end else None)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class LoggedDocument(BaseModel):
    """One document the system's retriever returned, in its order."""

    id: str | None = Field(default=None, description="document.id (else its metadata's source)")
    text: str = Field(description="document.content")
    score: float | None = Field(default=None, description="document.score, as the retriever gave it")


class LoggedAnswer(BaseModel):
    """What the deployed system did for one case, as its trace recorded it."""

    trace_id: str = Field(description="the trace's id (32 hex digits)")
    span_id: str = Field(description="the root span's id: annotations are written against it")
    retriever_span_id: str = Field(description="the retriever span the documents come from (the last)")
    answer: str = Field(description="the root span's output, else the last LLM span's")
    documents: list[LoggedDocument] = Field(default_factory=list, description="what it retrieved")
    latency_s: float = Field(default=0.0, description="the root span's duration")
    prompt_tokens: int = Field(default=0, description="llm.token_count.prompt over the LLM spans")
    completion_tokens: int = Field(default=0, description="llm.token_count.completion over the LLM spans")
    started_at: str = Field(default="", description="the root span's start, ISO 8601 UTC")
    inclusion_probability: float = Field(
        default=1.0, gt=0, le=1, description="the trace's probability of being in the run's sample"
    )
    stratum: str | None = Field(default=None, description="its stratum when the sample is stratified")


class SkippedTrace(BaseModel):
    """A trace that is no case, and why (its id is None when even that could not be read)."""

    trace_id: str | None
    reason: str


class TraceReading(BaseModel):
    """How the traces became cases: what was read, what the window and tags left, what was skipped and
    why, and the sample drawn; the report states it, so every number traces back to the traces."""

    origin: str
    spans: int
    traces: int
    window: str
    outside: int = 0  # traces outside the window or without the tags (not skipped: not asked for)
    skipped: list[SkippedTrace] = Field(default_factory=list)
    usable: int = 0  # RAG traces in the window with the tags
    sampled: int = 0
    redacted: dict[str, int] = Field(default_factory=dict)  # what `redact` masked: entry -> matches
    strata: list[Stratum] = Field(default_factory=list)  # a stratified sample's strata (empty: none)
    stratum_of: dict[str, str] = Field(default_factory=dict)  # sampled case id -> its stratum

    @property
    def weighted(self) -> bool:
        """Whether the strata were sampled at different rates, so the run's means must weight them."""
        return len({round(stratum.probability, 12) for stratum in self.strata if stratum.sampled}) > 1

    def shares(self) -> dict[str, float]:
        """stratum -> its share of the window's RAG traces (the weight of its mean)."""
        return {stratum.name: stratum.usable / self.usable for stratum in self.strata if self.usable}

    def summary(self) -> str:
        """One sentence for the report's notes."""
        reasons = Counter(skipped.reason.split(":", 1)[0] for skipped in self.skipped)
        listed = "; ".join(f"{count} {reason}" for reason, count in sorted(reasons.items())) or "none"
        share = self.sampled / self.usable if self.usable else 1.0
        if self.strata:
            parts = ", ".join(
                f"{s.name} {s.sampled} of {s.usable} (inclusion probability {s.probability:.3g})"
                for s in self.strata
            )
            weighting = (
                "; each stratum's mean weighted by its share of the window, comparisons between cells "
                "paired on the sampled traces unweighted"
                if self.weighted
                else "; equal rates, so no weighting"
            )
            sample = f"a seeded sample of {self.sampled} stratified by tag ({parts}{weighting})"
        elif self.sampled < self.usable:
            sample = f"a seeded uniform sample of {self.sampled} (inclusion probability {share:.3g})"
        else:
            sample = "all of them" if self.usable else "none"
        masked = (
            " Redacted as read: "
            + ", ".join(f"{count} {entry}" for entry, count in self.redacted.items())
            + f" (shown as {REDACTED})."
            if self.redacted
            else ""
        )
        return (
            f"Traces: {self.spans} spans in {self.traces} traces read from {self.origin} ({self.window}); "
            f"{self.outside} outside the window or tags; skipped {len(self.skipped)} ({listed}); "
            f"{self.usable} RAG traces, {sample} scored from what the system logged.{masked}"
        )


def _parsed(value: Any, mime: Any, keys: tuple[str, ...]) -> str | None:
    """A span's input or output as text: a JSON object's first known key, else the text as it is."""
    if value is None:
        return None
    text = str(value)
    if mime == "application/json" or text.lstrip().startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            loaded = None
        if isinstance(loaded, dict):
            found = next((loaded[key] for key in keys if isinstance(loaded.get(key), str)), None)
            return found.strip() if found and found.strip() else None
    return text.strip() or None


def _metadata(document: Mapping[str, Any]) -> dict[str, Any]:
    """A document's metadata: one JSON string as OpenInference writes it, or flattened into
    `metadata.<key>` attributes as Phoenix serves it; {} when it is neither."""
    flattened = {
        key.removeprefix("metadata."): v for key, v in document.items() if key.startswith("metadata.")
    }
    try:
        metadata = json.loads(document.get("metadata") or "{}")
    except (TypeError, json.JSONDecodeError):
        metadata = {}
    return (metadata if isinstance(metadata, dict) else {}) | flattened


def _source(document: Mapping[str, Any]) -> str | None:
    """A document's id, else the `source` of its metadata (LangChain's documents carry it there:
    openinference-instrumentation-langchain records no `document.id`)."""
    if document.get("id") not in (None, ""):
        return str(document["id"])
    source = _metadata(document).get("source")
    return str(source) if source not in (None, "") else None


def _score(document: Mapping[str, Any]) -> float | None:
    """A document's `score`, else its metadata's `score` (where a LangChain retriever puts it), else None."""
    score = document.get("score")
    if score is None:
        score = _metadata(document).get("score")
    try:
        return float(score) if score is not None else None
    except (TypeError, ValueError):
        return None


def _documents(retriever: Span) -> list[LoggedDocument]:
    documents = []
    for number, item in enumerate(indexed(retriever.attributes, RETRIEVED)):
        if not isinstance(item.get("content"), str):
            raise ValueError(
                f"malformed: retrieval document {number} of span {retriever.span_id} has no content"
            )
        documents.append(LoggedDocument(id=_source(item), text=item["content"], score=_score(item)))
    return documents


def _history(llm: Span | None) -> list[dict[str, str]]:
    """The conversation before the question: the LLM's user and assistant messages before its last user
    message (that one is the question as the prompt wrapped it; system messages are the prompt's)."""
    if llm is None:
        return []
    messages = [m for m in indexed(llm.attributes, INPUT_MESSAGE) if m.get("role") in ("user", "assistant")]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    return [
        {"role": m["role"], "content": str(m.get("content") or "")}
        for m in messages[:last_user]
        if str(m.get("content") or "").strip()
    ]


def _llm_answer(llm: Span | None) -> str | None:
    if llm is None:
        return None
    replies = [
        m for m in indexed(llm.attributes, OUTPUT_MESSAGE) if m.get("role", "assistant") == "assistant"
    ]
    if replies and str(replies[-1].get("content") or "").strip():
        return str(replies[-1]["content"]).strip()
    return _parsed(llm.attributes.get(OUTPUT_VALUE), llm.attributes.get(OUTPUT_MIME_TYPE), ANSWER_KEYS)


def rag_case(spans: list[Span]) -> dict[str, Any]:
    """One trace's spans as an eval case's fields (`logged` holding what the system did); ValueError with
    the reason when the trace is no RAG trace."""
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if span.parent_id is None or span.parent_id not in ids]
    if len(roots) != 1:
        raise ValueError(f"incomplete: {len(roots)} spans without their parent in the export")
    root = roots[0]
    failed = next((span for span in spans if span.error), None)
    if failed is not None:
        raise ValueError(f"error: span {failed.name or failed.span_id} failed: {failed.error}")
    ordered = sorted(spans, key=lambda span: span.start_ns)
    retrievers = [span for span in ordered if span.kind == "RETRIEVER"]
    if not retrievers:
        raise ValueError("no retriever span: nothing was retrieved, so there are no contexts to score")
    llms = [span for span in ordered if span.kind == "LLM"]
    last_llm = llms[-1] if llms else None
    question = _parsed(root.attributes.get(INPUT_VALUE), root.attributes.get(INPUT_MIME_TYPE), QUESTION_KEYS)
    answer = _parsed(root.attributes.get(OUTPUT_VALUE), root.attributes.get(OUTPUT_MIME_TYPE), ANSWER_KEYS)
    answer = answer or _llm_answer(last_llm)
    if question is None:
        raise ValueError(
            "no question: the root span has no input.value"
            + (" (it has an answer)" if answer else "")
            + f", or its JSON has none of {', '.join(QUESTION_KEYS)}"
        )
    if answer is None:
        raise ValueError("no answer: neither the root span's output.value nor an LLM span's output")
    tags = list(dict.fromkeys(str(tag) for span in ordered for tag in (span.attributes.get(TAGS) or [])))
    logged = LoggedAnswer(
        trace_id=root.trace_id,
        span_id=root.span_id,
        retriever_span_id=retrievers[-1].span_id,
        answer=answer,
        documents=_documents(retrievers[-1]),
        latency_s=round((root.end_ns - root.start_ns) / 1e9, 6),
        prompt_tokens=sum(int(span.attributes.get(PROMPT_TOKENS) or 0) for span in llms),
        completion_tokens=sum(int(span.attributes.get(COMPLETION_TOKENS) or 0) for span in llms),
        started_at=_started(root).isoformat(),
    )
    return {
        "id": root.trace_id,
        "question": question,
        "history": _history(last_llm),
        "tags": tags,
        "logged": logged.model_dump(mode="json"),
    }


class Redactor:
    """The `redact` entries compiled: `text` masks every match of each and counts them by entry."""

    def __init__(self, entries: list[str]) -> None:
        self.patterns = {entry: re.compile(REDACTION_KINDS.get(entry, entry)) for entry in entries}
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        for entry, pattern in self.patterns.items():
            value, count = pattern.subn(REDACTED, value)
            self.counts[entry] += count
        return value

    def case(self, fields: dict[str, Any]) -> dict[str, Any]:
        """One case's fields (`rag_case`) with the question, every turn, the answer and every document
        masked; ids, scores and times are the system's, not the user's, and stay."""
        if not self.patterns:
            return fields
        logged = dict(fields["logged"])
        logged["answer"] = self.text(logged["answer"])
        logged["documents"] = [doc | {"text": self.text(doc["text"])} for doc in logged["documents"]]
        return fields | {
            "question": self.text(fields["question"]),
            "history": [turn | {"content": self.text(turn["content"])} for turn in fields["history"]],
            "logged": logged,
        }


def _started(span: Span) -> datetime:
    return datetime.fromtimestamp(span.start_ns / 1e9, tz=UTC)


def _described(start: datetime | None, end: datetime | None) -> str:
    if start is None and end is None:
        return "no time window"
    return f"window {start.isoformat() if start else '...'} to {end.isoformat() if end else '...'}"


def trace_cases(
    read: SpanFile, config: TracesConfig, origin: str, now: datetime
) -> tuple[list[dict[str, Any]], TraceReading]:
    """The RAG traces of an export in the window and with the tags, sampled, as eval-case fields (in start
    order), and the reading that accounts for every trace. A trace with a span that breaks the format is
    skipped as malformed wherever its time lies (its time cannot be trusted)."""
    start, end = config.window(now)
    by_trace: dict[str, list[Span]] = {}
    for span in read.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    broken = {b.trace_id: b for b in read.broken if b.trace_id is not None}
    skipped = [
        SkippedTrace(trace_id=None, reason=f"malformed: {b.where}: {b.reason}")
        for b in read.broken
        if b.trace_id is None
    ]
    skipped += [
        SkippedTrace(trace_id=trace_id, reason=f"malformed: {b.where}: {b.reason}")
        for trace_id, b in broken.items()
    ]
    cases: list[dict[str, Any]] = []
    outside = 0
    redactor = Redactor(config.redact)
    for trace_id, spans in by_trace.items():
        if trace_id in broken:
            continue
        first = min(spans, key=lambda span: span.start_ns)
        tags = {str(tag) for span in spans for tag in (span.attributes.get(TAGS) or [])}
        begun = _started(first)
        if (start and begun < start) or (end and begun >= end) or not set(config.tags) <= tags:
            outside += 1
            continue
        try:
            case = redactor.case(rag_case(spans))
        except ValueError as error:
            skipped.append(SkippedTrace(trace_id=trace_id, reason=redactor.text(str(error))))
            continue
        if config.strata:
            stratum = next((tag for tag in config.strata if tag in tags), OTHER_STRATUM)
            case["logged"] = case["logged"] | {"stratum": stratum}
        cases.append(case)
    usable = len(cases)
    if config.strata:
        assert config.sample_size is not None  # the config's validator makes strata need one
        strata_order = [*config.strata, OTHER_STRATUM]
        sampled, strata = stratified_sample(
            cases, strata_order, config.sample_size, config.allocation, config.seed
        )
    else:
        sampled, strata = sample_traces(cases, config.sample_size, config.seed), []
    reading = TraceReading(
        origin=origin,
        spans=len(read.spans) + len(read.broken),
        traces=len(set(by_trace) | set(broken)) + sum(b.trace_id is None for b in read.broken),
        window=_described(start, end) + (f", tags {', '.join(config.tags)}" if config.tags else ""),
        outside=outside,
        skipped=skipped,
        usable=usable,
        sampled=len(sampled),
        redacted={entry: redactor.counts[entry] for entry in config.redact},
        strata=strata,
        stratum_of={case["id"]: case["logged"]["stratum"] for case in sampled} if strata else {},
    )
    return sorted(sampled, key=lambda case: case["logged"]["started_at"]), reading
