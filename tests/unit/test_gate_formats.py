"""The gate in CI's formats: its JUnit XML, read by a maintained JUnit library, holds one test per check with
the verdict's failures and errors; its Markdown summary, rendered by a Markdown library, shows every
document-, LLM- or config-derived string as text, never as a link, code, HTML or a broken table."""

import re
from html import escape

from junitparser import Error, Failure, JUnitXml, Skipped
from markdown_it import MarkdownIt

from ragbench.provenance import Checkout, CodeVersion
from ragbench.runs.gate import GateResult, RegressionConfig, judge_run
from ragbench.runs.gate_formats import gate_checks, junit_xml, markdown_summary
from ragbench.runs.record import RunRecord
from ragbench.stats.inference import StatisticsConfig

HOSTILE = (
    "<script>alert(1)</script> | a\\|b `rm` [x](javascript:alert(1)) ![i](http://e/x.png) **b** "
    "\x1b[31m\nnext"
)
LINKS = {"report": "results.html", "gate page": "gate.html"}


def record(
    name: str, values: dict, incomplete: dict | None = None, code: CodeVersion | None = None
) -> RunRecord:
    metadata = {
        "metric_directions": {"mrr": "higher", HOSTILE: "higher"},
        "eval_fingerprint": "e1",
        "cell_ids": sorted({cell for _, cell in values} | set(incomplete or {})),
        "incomplete_cells": incomplete or {},
        **(code.metadata() if code is not None else {}),
    }
    metadata |= {f"{metric}__{cell}": value for (metric, cell), value in values.items()}
    return RunRecord.from_metadata(name, "now", metadata, {})


def gate(current: RunRecord, baseline: RunRecord | None) -> GateResult:
    return judge_run(
        current,
        baseline,
        config="ci-test",
        baseline_mode="previous",
        regression=RegressionConfig(),
        statistics=StatisticsConfig(),
    )


def code(commit: str) -> CodeVersion:
    return CodeVersion(ragbench_version="0.2.0", checkout=Checkout(commit=commit, dirty=False), packages={})


BASELINE = record(
    "night-1",
    {("mrr", "good"): 0.5, ("mrr", "bad"): 0.9, ("mrr", "broken"): 0.8, (HOSTILE, HOSTILE): 0.9},
    code=code("a" * 40),
)
CURRENT = record(
    "night-2",
    {("mrr", "good"): 0.6, ("mrr", "bad"): 0.2, (HOSTILE, HOSTILE): 0.1, ("mrr", "new-metric-cell"): 0.4},
    incomplete={"broken": f"every reader call failed: {HOSTILE}"},
    code=code("b" * 40),
)


def test_the_junit_xml_parses_and_keeps_one_test_per_check_with_its_failures_and_errors():
    verdict = gate(CURRENT, BASELINE)
    assert verdict.status == "incomplete"
    checks = gate_checks(verdict)
    xml = JUnitXml.fromstring(junit_xml(verdict))
    (suite,) = list(xml)
    cases = list(suite)
    assert suite.tests == len(cases) == len(checks)
    outcomes = {(case.classname, case.name): type(case.result[0]) if case.result else None for case in cases}
    assert outcomes[("bad", "mrr")] is Failure  # worse beyond threshold: a regression
    assert outcomes[(HOSTILE.replace("\x1b", "\ufffd"), HOSTILE.replace("\x1b", "\ufffd"))] is Failure
    assert outcomes[("good", "mrr")] is None
    assert outcomes[("broken", "complete")] is Error  # the incomplete cell is an error, not a regression
    assert outcomes[("broken", "mrr")] is Error  # and so is the value it lost
    assert outcomes[("good", "complete")] is None
    regressions = [row for row in verdict.comparison.regressions if row["cell"] not in verdict.incomplete]
    assert suite.failures == len(regressions) == 2
    assert suite.errors == 2 and xml.errors == 2 and xml.failures == 2
    assert suite.skipped == 0  # every value the current run has, the baseline has or its cell is new
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["run"] == "night-2" and properties["baseline_run"] == "night-1"
    assert "commit bbbbbbbbbbbb" in properties["code"]


def test_a_passing_run_has_no_failure_and_a_first_run_still_has_its_cells():
    verdict = gate(record("n", {("mrr", "c1"): 0.5}), record("b", {("mrr", "c1"): 0.5}))
    suite = next(iter(JUnitXml.fromstring(junit_xml(verdict))))
    assert verdict.passed and suite.tests == 2 and suite.failures == suite.errors == 0
    first = gate(record("n", {("mrr", "c1"): 0.5, ("mrr", "c2"): 0.4}), None)
    suite = next(iter(JUnitXml.fromstring(junit_xml(first))))
    assert [case.name for case in suite] == ["complete", "complete"] and suite.failures == 0


def test_a_failed_run_is_one_error_and_a_comparison_that_lined_up_nothing_one_failure():
    failed = judge_run(
        record("n", {}),
        None,
        config="c",
        baseline_mode="previous",
        regression=RegressionConfig(),
        statistics=StatisticsConfig(),
        failure=f"step answer failed: {HOSTILE}",
    )
    suite = next(iter(JUnitXml.fromstring(junit_xml(failed))))
    assert suite.tests == 1 and suite.errors == 1
    nothing = gate(record("n", {("mrr", "c1"): 0.5}), record("b", {("mrr", "c2"): 0.5}))
    assert nothing.status == "regressed"
    suite = next(iter(JUnitXml.fromstring(junit_xml(nothing))))
    (failed_case,) = [case for case in suite if case.result and isinstance(case.result[0], Failure)]
    assert failed_case.classname == "run" and "nothing was compared" in failed_case.result[0].message
    not_comparable = gate(
        record("n", {("mrr", "c1"): 0.5, (HOSTILE, "c1"): 1.0}), record("b", {("mrr", "c1"): 0.5})
    )
    suite = next(iter(JUnitXml.fromstring(junit_xml(not_comparable))))
    assert suite.skipped == 1 and any(case.result and isinstance(case.result[0], Skipped) for case in suite)


def rendered(markdown: str) -> tuple[str, list]:
    parser = MarkdownIt("commonmark").enable("table")
    return parser.render(markdown), parser.parse(markdown)


def walk(tokens: list):
    for token in tokens:
        yield token
        yield from walk(token.children or [])


def test_the_markdown_summary_renders_the_verdict_table_and_holds_nothing_unescaped():
    verdict = gate(CURRENT, BASELINE)
    markdown = markdown_summary(verdict, LINKS)
    html, tokens = rendered(markdown)
    kinds = {token.type for token in walk(tokens)}
    assert not kinds & {
        "html_inline",
        "html_block",
        "code_inline",
        "code_block",
        "fence",
        "image",
        "strong_open",
    }
    links = [token.attrs["href"] for token in walk(tokens) if token.type == "link_open"]
    assert links == ["results.html", "gate.html"]  # the summary's own links, and only those
    assert "<script" not in html and "javascript:" not in "".join(links) and "\x1b" not in markdown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "[x](javascript:alert(1))" in html
    # the table: a header and one row per compared (metric, cell), each with every column
    (table,) = re.findall(r"<table>.*?</table>", html, re.DOTALL)
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
    assert len(rows) == 1 + len(verdict.comparison.rows)
    assert all(len(re.findall(r"<t[hd]", row)) == 8 for row in rows)  # no pipe in a label broke a row
    hostile_row = next(row for row in rows if "alert(1)" in row)
    shown = escape(" ".join(HOSTILE.replace("\x1b", "\ufffd").splitlines()), quote=False)
    assert "REGRESSION" in hostile_row and f"<td>{shown}</td>" in hostile_row  # the text, exactly
    assert "REGRESSED" not in markdown.splitlines()[0] and "INCOMPLETE" in markdown.splitlines()[0]
    assert "commit aaaaaaaaaaaa -&gt; commit bbbbbbbbbbbb" in html  # the baseline ran other code
    assert verdict.files()["gate.md"] == markdown_summary(verdict, LINKS)
