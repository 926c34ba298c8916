"""The `traces` input: OTLP/JSON exports of OpenInference spans read into eval cases, every trace that is no
case listed with its reason, a window, tags, a seeded sample; and a `traces` system scored from the logged
answers without asking anything."""

import json
from datetime import UTC, datetime

import pytest

from ragbench.config.model import BenchmarkConfig
from ragbench.generation.answers import external_cell
from ragbench.generation.systems import ExternalSystem
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCaseError, EvalCasesConfig, load_eval_suite_from, load_trace_cases
from ragbench.inputs.spans import SpanFileError, read_span_file
from ragbench.inputs.traces import TracesConfig, trace_cases
from tests.otlp_traces import HOUR_NS, NOON_NS, export, rag_trace, write_jsonl

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
DOCS = [("kb/a.md", "Alpha text.", 0.9), ("kb/b.md", "Beta text.", 0.4)]


def read(spans: list[dict], **config) -> tuple[list[dict], object]:
    data = json.dumps(export(spans)).encode()
    return trace_cases(read_span_file(data, "t.json"), TracesConfig(path="t.json", **config), "t.json", NOW)


def test_a_rag_trace_becomes_a_case_with_what_the_system_logged():
    spans = rag_trace(
        1,
        "What is alpha?",
        "Alpha is A.",
        DOCS,
        tags=["prod"],
        history=[("user", "Hi"), ("assistant", "Hello")],
    )
    (case,), reading = read(spans)
    assert case["id"] == f"{1:032x}" and case["question"] == "What is alpha?"
    assert case["history"] == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert case["tags"] == ["prod"]
    logged = case["logged"]
    assert logged["answer"] == "Alpha is A." and logged["span_id"] == f"{1:08x}{1:08x}"
    assert logged["retriever_span_id"] == f"{1:08x}{2:08x}"
    assert [d["id"] for d in logged["documents"]] == ["kb/a.md", "kb/b.md"]
    assert logged["documents"][0] == {"id": "kb/a.md", "text": "Alpha text.", "score": 0.9}
    assert logged["latency_s"] == 2.0 and logged["prompt_tokens"] == 120 and logged["completion_tokens"] == 30
    assert logged["started_at"] == "2026-12-01T12:00:00+00:00" and logged["inclusion_probability"] == 1.0
    assert reading.usable == reading.sampled == 1 and reading.traces == 1 and reading.spans == 3


def test_traces_that_are_no_case_are_listed_with_their_reason():
    no_retriever = rag_trace(2, "q2", "a2", DOCS, retriever=False)
    no_question = rag_trace(3, "q3", "a3", DOCS)
    no_question[0]["attributes"] = [a for a in no_question[0]["attributes"] if a["key"] != "input.value"]
    bad_time = rag_trace(4, "q4", "a4", DOCS)
    bad_time[1]["startTimeUnixNano"] = "yesterday"
    bad_id = rag_trace(5, "q5", "a5", DOCS)
    bad_id[2]["traceId"] = "xyz"
    failed = rag_trace(6, "q6", "a6", DOCS)
    failed[2]["status"] = {"code": 2, "message": "rate limited"}
    orphan = rag_trace(7, "q7", "a7", DOCS)[1:]  # the root span was not exported
    cases, reading = read(
        rag_trace(1, "q1", "a1", DOCS) + no_retriever + no_question + bad_time + bad_id + failed + orphan
    )
    assert [case["question"] for case in cases] == ["q1", "q5"]  # trace 5 without its broken LLM span
    reasons = {s.trace_id: s.reason for s in reading.skipped}
    assert reasons[f"{2:032x}"].startswith("no retriever span")
    assert reasons[f"{3:032x}"].startswith("no question") and "(it has an answer)" in reasons[f"{3:032x}"]
    assert reasons[f"{4:032x}"].startswith("malformed: ") and "startTimeUnixNano" in reasons[f"{4:032x}"]
    assert reasons[None].startswith("malformed: ") and "traceId 'xyz'" in reasons[None]
    assert reasons[f"{6:032x}"] == "error: span llm failed: rate limited"
    assert reasons[f"{7:032x}"].startswith("incomplete: 2 spans")
    assert reading.usable == 2 and len(reading.skipped) == 6 and reading.traces == 8
    summary = reading.summary()
    assert "skipped 6 (1 error; 1 incomplete; 2 malformed; 1 no question; 1 no retriever span)" in summary


def test_window_tags_and_a_seeded_sample_with_its_inclusion_probability():
    spans = [
        s
        for n in range(1, 21)
        for s in rag_trace(
            n, f"q{n}", f"a{n}", DOCS, start_ns=NOON_NS - n * HOUR_NS, tags=["prod"] if n % 2 else ["dev"]
        )
    ]
    cases, reading = read(spans, since="10h")  # traces 1..9 started within 10 hours of noon, 24 h before NOW
    assert len(cases) == 0 and reading.outside == 20
    cases, reading = read(spans, since="34h")  # noon minus 1..9 hours (and 10 exactly 34 h ago)
    assert sorted(int(c["id"], 16) for c in cases) == list(range(1, 11))
    cases, reading = read(spans, start=datetime(2026, 12, 1, 0), end=datetime(2026, 12, 1, 12), tags=["prod"])
    assert sorted(int(c["id"], 16) for c in cases) == [1, 3, 5, 7, 9, 11]
    assert [c["logged"]["started_at"] for c in cases] == sorted(c["logged"]["started_at"] for c in cases)
    first, reading = read(spans, sample_size=5, seed=3)
    again, _ = read(spans, sample_size=5, seed=3)
    other, _ = read(spans, sample_size=5, seed=4)
    assert [c["id"] for c in first] == [c["id"] for c in again] != [c["id"] for c in other]
    assert reading.usable == 20 and reading.sampled == 5
    assert {c["logged"]["inclusion_probability"] for c in first} == {0.25}
    assert "a seeded uniform sample of 5 (inclusion probability 0.25)" in reading.summary()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"{not json", "not JSON"),
        (b'{"spans": []}', "not an OTLP/JSON trace export"),
        (b'{"resourceSpans": []}', "holds no span"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"resourceSpans": []}\n{oops\n', "t.json:2: not JSON"),
    ],
)
def test_a_file_that_is_no_export_is_refused_as_a_whole(content, message):
    with pytest.raises(SpanFileError, match=message):
        read_span_file(content, "t.json")


def test_no_rag_trace_in_the_window_stops_with_the_reading(tmp_path):
    path = write_jsonl(
        tmp_path / "spans.jsonl",
        [rag_trace(1, "q", "a", DOCS), rag_trace(2, "q", "a", DOCS, retriever=False)],
    )
    with pytest.raises(
        EvalCaseError, match=r"no RAG trace to score\. Traces: 5 spans in 2 traces .* 2 outside"
    ):
        load_trace_cases(TracesConfig(path=str(path), since="1h"), now=NOW)
    with pytest.raises(EvalCaseError, match="span file not found"):
        load_trace_cases(TracesConfig(path=str(tmp_path / "missing.jsonl")), now=NOW)
    cases, reading = load_trace_cases(TracesConfig(path=str(path)), now=NOW)
    assert (
        len(cases) == 1
        and cases[0].logged is not None
        and reading.skipped[0].reason.startswith("no retriever")
    )


def test_redact_masks_user_data_everywhere_as_read_and_counts_it():
    spans = rag_trace(
        1,
        "I am jane@example.com, call me on +49 30 1234 5678: what is alpha?",
        "Alpha is A; we wrote to jane@example.com.",
        [("kb/a.md", "Alpha text, owner ops@example.org, host 10.0.0.12.", 0.9)],
        history=[("user", "My card is 4111 1111 1111 1111"), ("assistant", "Noted, token sk-live1234abcd.")],
    )
    (case,), reading = read(spans, redact=["email", "phone", "card", "ipv4", r"sk-\w{8,}"])
    text = json.dumps(case)
    for secret in ("jane@", "ops@", "1234 5678", "4111", "10.0.0.12", "sk-live"):
        assert secret not in text
    assert case["question"] == "I am [redacted], call me on [redacted]: what is alpha?"
    assert case["logged"]["answer"] == "Alpha is A; we wrote to [redacted]."
    assert case["logged"]["documents"][0]["id"] == "kb/a.md"  # the system's ids are no user data
    assert case["history"][0]["content"] == "My card is [redacted]"
    assert reading.redacted == {"email": 3, "phone": 1, "card": 1, "ipv4": 1, r"sk-\w{8,}": 1}
    assert "Redacted as read: 3 email, 1 phone, 1 card, 1 ipv4" in reading.summary()
    # without `redact` nothing is touched: a date and a version are no phone number either way
    (plain,), _ = read(rag_trace(2, "Since 2026-12-03 14:50 on 3.11.2?", "Yes.", DOCS), redact=["phone"])
    assert plain["question"] == "Since 2026-12-03 14:50 on 3.11.2?"


@pytest.mark.parametrize(
    ("entry", "message"),
    [("(unclosed", "neither a kind"), ("x*", "matches the empty text")],
)
def test_a_redact_entry_that_cannot_mask_is_refused_at_config(entry, message):
    with pytest.raises(ValueError, match=message):
        TracesConfig(path="t.json", redact=[entry])


def test_config_refuses_a_bad_window_and_a_traces_system_without_traces():
    with pytest.raises(ValueError, match="a number and s, m, h or d"):
        TracesConfig(path="t.json", since="yesterday")
    with pytest.raises(ValueError, match="not both"):
        TracesConfig(path="t.json", since="1h", start=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="exactly one of path, dataset, artifact or traces"):
        EvalCasesConfig(path="c.yaml", traces={"path": "t.json"})
    with pytest.raises(ValueError, match=r"with eval_cases\.traces"):
        BenchmarkConfig.model_validate(
            {"benchmark_grid": False, "systems": [{"name": "prod", "traces": True}]}
        )
    with pytest.raises(ValueError, match="exactly one of http, python and traces"):
        ExternalSystem(name="x", traces=True, python="a.b:c")


def test_a_traces_system_is_scored_from_the_logged_answers(tmp_path):
    path = write_jsonl(tmp_path / "spans.jsonl", [rag_trace(1, "What is alpha?", "Alpha is A.", DOCS)])
    suite = load_eval_suite_from(EvalCasesConfig(traces={"path": str(path)}))
    assert suite.traces is not None and suite.label == f"traces {path}"
    system = ExternalSystem(name="prod", traces=True, source_match={"rule": "basename"})
    spec = CellSpec(external="prod")
    answers = external_cell(spec, system, suite.cases, sample_size=None, seed=0, metrics_k=1)
    (answer,) = answers.answers
    assert answer.answer == "Alpha is A." and answer.latency_s == 2.0 and answer.prompt_tokens == 120
    assert [(c.source, c.score, c.text) for c in answer.contexts] == [
        ("kb/a.md", 0.9, "Alpha text."),
        ("kb/b.md", 0.4, "Beta text."),
    ]
    assert answers.external.calls_made == 0 and answers.external.kind == "traces"
    assert answers.external.retrieval is None  # no case from a trace has expected sources
