"""References that stay true (`reference_from`): the schema, fetching from a callable and from HTTP (a
loopback server with a secret header), failures that fail their case with a reason, writing a reference
from context, numeric tolerance decided without the judge, and the gate leaving changed references out."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragbench.config.preflight import PreflightError, check_references
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase, EvalSuite
from ragbench.inputs.references import ReferenceResolutions, ReferenceSource, resolve_cases
from ragbench.report.page import references_section
from ragbench.report.view import ReportInput
from ragbench.runs.compare import compare_runs, comparison_text
from ragbench.runs.gate import RegressionConfig, judge_run
from ragbench.runs.record import RunRecord
from ragbench.scoring.judge import build_judge_calls
from ragbench.scoring.rubric_scorer import RubricScorer
from ragbench.scoring.rubrics import CORRECTNESS, CustomRubric, JudgeInput
from ragbench.scoring.tolerance import numbers_in, numeric_verdict
from ragbench.stats.inference import StatisticsConfig
from tests.loopback import LoopbackHTTPServer, LoopbackServer

SOURCES = "tests.reference_sources"
STATS = StatisticsConfig()


def source(function: str, **args: str) -> dict:
    """A `reference_from` calling one of `tests.reference_sources`' functions."""
    return {"python": f"{SOURCES}:{function}", "args": args}


@pytest.fixture
def status(tmp_path: Path) -> Path:
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"incidents": 12, "on_call": "Priya Raman", "pages": ["status.md"]}))
    return path


def dynamic(case_id: str, **fields) -> EvalCase:
    return EvalCase.model_validate({"id": case_id, "question": f"What about {case_id}?", **fields})


def test_a_source_is_a_callable_or_a_url_never_both_nor_a_credential_in_it():
    assert ReferenceSource(python="pkg.mod:fn", args={"team": "a"}).where == "pkg.mod:fn(team='a')"
    assert ReferenceSource(url="https://status.example.com/api?x=1").where == "https://status.example.com/api"
    for wrong in (
        {},
        {"python": "pkg.mod:fn", "url": "https://a.example"},
        {"python": "not a target"},
        {"url": "ftp://a.example"},
        {"url": "https://user:pw@a.example"},
        {"url": "https://a.example", "args": {"a": 1}},
        {"python": "pkg.mod:fn", "headers_env": {"Authorization": "TOKEN"}},
        {"python": "pkg.mod:fn", "path": "a[["},
    ):
        with pytest.raises(ValidationError):
            ReferenceSource.model_validate(wrong)
    with pytest.raises(ValidationError, match="gives the sources themselves"):
        dynamic("x", expected_sources_from={"python": "a:b", "gives": "context"})
    with pytest.raises(ValidationError, match="declines"):
        dynamic("x", expected_behaviour="declines", reference_from={"python": "a:b"})


def test_old_eval_sets_keep_their_fingerprint_and_dynamic_ones_are_keyed_on_their_definition():
    plain = EvalCase(id="a", question="q?", reference_answer="r")
    assert EvalSuite.of([plain]).fingerprint == "043efcfc544502d1"  # as before reference_from existed
    one = EvalSuite.of([dynamic("a", reference_from={"python": f"{SOURCES}:on_call", "args": {"path": "x"}})])
    other = EvalSuite.of(
        [dynamic("a", reference_from={"python": f"{SOURCES}:on_call", "args": {"path": "y"}})]
    )
    assert one.fingerprint != other.fingerprint


def test_resolution_fills_the_fields_records_where_and_when_and_fails_only_the_case(status):
    cases = [
        dynamic(
            "count", reference_from={"python": f"{SOURCES}:open_incidents", "args": {"path": str(status)}}
        ),
        dynamic(
            "who",
            reference_answer="(stored, stale)",
            reference_from={
                "python": f"{SOURCES}:status_record",
                "args": {"path": str(status)},
                "path": "on_call",
            },
            expected_sources_from={"python": f"{SOURCES}:status_pages", "args": {"path": str(status)}},
        ),
        dynamic("down", reference_from=source("down"), expected_sources=["kept.md"]),
        dynamic(
            "empty",
            reference_from={
                "python": f"{SOURCES}:status_record",
                "args": {"path": str(status)},
                "path": "nothing",
            },
        ),
        dynamic("missing", reference_from={"python": "tests.no_such_module:fn"}),
        EvalCase(id="static", question="q?", reference_answer="r"),
    ]
    resolved, resolutions = resolve_cases(cases, write=None)
    by_id = {case.id: case for case in resolved}
    assert (
        by_id["count"].reference_answer == "There are 12 open incidents."
        and by_id["count"].reference_error is None
    )
    assert by_id["who"].reference_answer == "Priya Raman" and by_id["who"].expected_sources == ["status.md"]
    assert by_id["down"].reference_answer is None and by_id["down"].expected_sources == ["kept.md"]
    assert "ConnectionError: the status service is down" in by_id["down"].reference_error
    assert "not a non-empty text" in by_id["empty"].reference_error
    assert "tests.no_such_module:fn: cannot import it here" in by_id["missing"].reference_error
    assert by_id["static"] is cases[-1]
    failures = resolutions.failures()
    assert set(failures) == {"down", "empty", "missing"} and failures["down"].startswith("reference_answer: ")
    rows = {(row["case"], row["field"]): row for row in resolutions.rows()}
    assert rows[("who", "expected_sources")]["value"] == "status.md"
    assert rows[("count", "reference_answer")]["source"].endswith(f"open_incidents(path='{status}')")
    assert all(row["resolved_at"].endswith("+00:00") for row in rows.values())
    digests = resolutions.digests()
    status.write_text(json.dumps({"incidents": 30, "on_call": "Priya Raman", "pages": ["status.md"]}))
    again = resolve_cases(cases, write=None)[1].digests()
    assert again["count"] != digests["count"] and again["who"] == digests["who"]
    assert again["down"] == digests["down"]  # still failing: the same identity


class _StatusHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        owner = self.server.owner  # type: ignore[attr-defined]
        owner.headers_seen.append(dict(self.headers))
        if self.headers.get("Authorization") != "Bearer tok-123456":
            body, status = b"refused: Bearer tok-123456 expected", 401
        elif self.path.startswith("/text"):
            body, status = b"Release 4.2 shipped on Monday.", 200
        else:
            body, status = json.dumps({"release": {"version": "4.2"}}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class StatusServer(LoopbackServer):
    handler_class = _StatusHandler
    server_class = LoopbackHTTPServer

    def __init__(self) -> None:
        super().__init__()
        self.headers_seen: list[dict] = []

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"


def test_an_http_source_sends_its_header_from_the_environment_and_never_leaks_it():
    with StatusServer().start() as server:
        env = {"STATUS_TOKEN": "Bearer tok-123456"}
        text = ReferenceSource(url=f"{server.url}/text", headers_env={"Authorization": "STATUS_TOKEN"})
        field = ReferenceSource(
            url=f"{server.url}/json", headers_env={"Authorization": "STATUS_TOKEN"}, path="release.version"
        )
        assert text.fetch(env) == "Release 4.2 shipped on Monday." and field.fetch(env) == "4.2"
        assert server.headers_seen[0]["Authorization"] == "Bearer tok-123456"
        cases = [dynamic("release", reference_from=text.model_dump())]
        _, refused = resolve_cases(cases, None, {"STATUS_TOKEN": "Bearer wrong-99999"})
        (why,) = refused.failures().values()
        assert "HTTP 401" in why and "wrong-99999" not in why
        _, unset = resolve_cases(cases, None, {})
        assert "STATUS_TOKEN not set" in next(iter(unset.failures().values()))


def test_a_context_source_has_its_reference_written_and_a_failed_writer_fails_the_case(status):
    case = dynamic(
        "who",
        reference_from=source("on_call", path=str(status)) | {"gives": "context"},
    )
    asked = []

    def write(question: str, context: str) -> str:
        asked.append((question, context))
        return "Priya Raman."

    (written,), resolutions = resolve_cases([case], write)
    assert written.reference_answer == "Priya Raman." and asked == [
        ("What about who?", "Priya Raman is on call this week.")
    ]
    assert resolutions.resolutions[0].context == "Priya Raman is on call this week."

    def broken(question: str, context: str) -> str:
        raise RuntimeError("retries_exhausted: rate_limited")

    (failed,), _ = resolve_cases([case], broken)
    assert "writing the reference from the context failed: retries_exhausted" in failed.reference_error
    (nobody,), _ = resolve_cases([case], None)
    assert "no reader model" in nobody.reference_error


def test_numbers_within_the_tolerance_are_decided_without_the_judge():
    assert numbers_in("There are 1,200 incidents [2], up from 9.5 [1, 3].") == [1200.0, 9.5]
    assert numbers_in("Python 3.12.1 is out") == []
    assert numeric_verdict("There are 30 open incidents.", "About 38 are open [1].", 0.3).within
    outside = numeric_verdict("There are 30 open incidents.", "12 are open.", 0.3)
    assert not outside.within and "12 is outside 30% of the reference's 30" in outside.reason
    assert numeric_verdict("Between 3 and 5.", "4", 0.3) is None  # two numbers: the judge decides
    assert numeric_verdict("30 incidents.", "Many.", 0.3) is None
    scorer = RubricScorer(CORRECTNESS)
    near = JudgeInput(
        case_id="a", question="How many?", answer="31 open.", reference_answer="30.", tolerance=0.1
    )
    far = near.model_copy(update={"case_id": "b", "answer": "50 open."})
    words = near.model_copy(update={"case_id": "c", "answer": "Quite a few."})
    assert scorer.score(near, None).verdicts == {"correctness": 5}  # type: ignore[arg-type]
    assert scorer.score(far, None).values == {"correctness_0to1": 0.0}  # type: ignore[arg-type]
    calls = build_judge_calls([near, far, words], [CORRECTNESS])
    assert [call.index for call in calls] == [2]  # only the answer without a number is asked
    assert (
        "A number within 10% of the reference's counts as equal to it."
        in calls[0].request.messages[1]["content"]
    )
    plain = words.model_copy(update={"tolerance": None})
    assert "counts as equal" not in CORRECTNESS.messages(plain)[1]["content"]
    graded = CustomRubric(
        name="numbers", criteria="Same number.", inputs=["reference_answer", "answer"]
    ).rubric()
    assert RubricScorer(graded).numeric(near) is None  # a custom rubric is told, never decided for


def record(name: str, digests: dict, values: dict, failures: dict | None = None) -> RunRecord:
    metadata = {
        "metric_directions": {"correctness_0to1": "higher"},
        "metric_tests": {"correctness_0to1": "paired_permutation"},
        "eval_fingerprint": "e1",
        "correctness_0to1__c1": sum(values.values()) / len(values),
        "reference_digests": digests,
        "reference_failures": failures or {},
    }
    return RunRecord.from_metadata(name, "now", metadata, {"c1": {"correctness_0to1": values}})


def test_the_gate_leaves_a_changed_reference_out_of_the_paired_test_and_says_so():
    cases = [f"q{i}" for i in range(12)]
    before = record("monday", {"q0": "aaa", "q1": "bbb"}, dict.fromkeys(cases, 1.0))
    # q0's truth changed and the system did not follow; every other case is as before
    after = record(
        "tuesday", {"q0": "ccc", "q1": "bbb"}, {**dict.fromkeys(cases, 1.0), "q0": 0.0}, {"q9": "down"}
    )
    comparison = compare_runs(after, before, {}, 0.0)
    assert comparison.changed_references == ["q0"]
    (row,) = comparison.rows
    assert "on 11 cases (1 with a changed reference left out)" in row["rule"]
    assert "REFERENCE CHANGED for case q0" in comparison_text(comparison)
    verdict = judge_run(
        after,
        before,
        config="c",
        baseline_mode="previous",
        regression=RegressionConfig(),
        statistics=StatisticsConfig(),
    )
    assert verdict.status == "passed"
    assert any("reference changed since monday for 1 case(s): q0" in reason for reason in verdict.reasons)
    assert any("case q9 FAILED: its reference could not be fetched (down)" in r for r in verdict.reasons)
    assert "q0" in verdict.html()


def test_preflight_refuses_a_source_that_cannot_work_before_any_work():
    reader = CellSpec.model_validate(
        {"chunk_size": 64, "embedding_model": "m", "reader": {"model": "openai/x"}}
    )
    bare = reader.model_copy(update={"reader": None, "external": "sys"})
    context = dynamic("c", reference_from=source("on_call") | {"gives": "context"})
    check_references([context], [reader], {}, plan_only=False)
    with pytest.raises(PreflightError, match="no reader model"):
        check_references([context], [bare], {}, plan_only=False)
    with pytest.raises(PreflightError, match="not importable"):
        check_references(
            [dynamic("m", reference_from={"python": "no_such_package.x:f"})], [reader], {}, False
        )
    secret = dynamic(
        "s", reference_from={"url": "https://s.example/x", "headers_env": {"Authorization": "S_TOKEN"}}
    )
    with pytest.raises(PreflightError, match="S_TOKEN not set"):
        check_references([secret], [reader], {}, plan_only=False)
    check_references([secret], [reader], {}, plan_only=True)  # a dry run reads no secret
    with pytest.raises(PreflightError, match="carries a credential"):
        check_references(
            [dynamic("k", reference_from={"url": "https://s.example/x?api_key=abc"})], [reader], {}, False
        )


def test_the_report_lists_what_was_fetched_escaped():
    resolutions = ReferenceResolutions.model_validate(
        {
            "resolutions": [
                {
                    "case_id": "who",
                    "field": "reference_answer",
                    "source": "m:f()",
                    "gives": "answer",
                    "resolved_at": "2026-11-27T10:00:00+00:00",
                    "value": "<script>alert(1)</script>",
                }
            ]
        }
    )
    html = references_section(
        ReportInput(title="t", axes=[], varying_axes=[], rows=[], headline=[], references=resolutions.rows())
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "2026-11-27T10:00:00+00:00" in html
