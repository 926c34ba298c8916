"""The gate's verdict in the formats CI reads: JUnit XML (GitLab, Jenkins, Buildkite and GitHub's test
reporters show one test per check) and a Markdown summary (GitHub's job summary, a pull-request comment).

Both are made from one list of checks (`gate_checks`), so their counts agree with each other and with the
verdict: one check per cell (did the run score it whole: an incomplete cell is an error), one per gated
(metric, cell) row of the comparison (worse beyond threshold and noise, or missing: a failure; a value
the run lost because its cell is incomplete: an error; a value the baseline lacks: skipped, listed, never
passed), one for the comparison as a whole when it fails without a failing row (nothing in common, a
changed eval set), and one for a run that did not finish (an error). Every string in them may come from
documents, answers, judges or config: the XML is written by xml.etree (with the characters XML 1.0
cannot hold replaced), the Markdown escaped by `ragbench.report.pages.markdown_text`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args
from urllib.parse import quote

from ragbench.report.pages import format_value, markdown_text, rows_to_markdown_table
from ragbench.runs.compare import CORRECTED_INSTEAD, MISSING, NOT_COMPARABLE

if TYPE_CHECKING:
    from ragbench.runs.gate import GateResult

Outcome = Literal["passed", "failure", "error", "skipped"]
# What XML 1.0 cannot hold at all, escaped or not (control characters an LLM error may quote).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class GateCheck:
    """One check of the gate: a JUnit test case, a line of the summary's counts."""

    group: str  # the cell (JUnit's classname), or "run" for the run as a whole
    name: str  # the metric, "complete", or what was checked of the run
    outcome: Outcome
    message: str = ""


def gate_checks(gate: GateResult) -> list[GateCheck]:
    """Every check the verdict rests on, in a stable order: the run's, each cell's completeness, then each
    compared (metric, cell) row."""
    if gate.status == "failed":
        return [GateCheck("run", "finished", "error", "; ".join(gate.reasons))]
    checks = [
        GateCheck(cell, "complete", "error", why)
        if (why := gate.incomplete.get(cell))
        else GateCheck(cell, "complete", "passed")
        for cell in gate.cells
    ]
    if gate.too_small is not None:
        checks.insert(0, GateCheck("run", "sample size", "error", gate.too_small))
    comparison = gate.comparison
    if comparison is None:
        return checks
    for row in comparison.rows:
        if row["kind"] == CORRECTED_INSTEAD:  # decided by its label-corrected row, which is a check
            continue
        cell, metric = row["cell"], row["metric"]
        if row["kind"] == NOT_COMPARABLE:
            checks.append(GateCheck(cell, metric, "skipped", row["rule"]))
        elif row["kind"] == MISSING and cell in gate.incomplete:
            checks.append(GateCheck(cell, metric, "error", f"{row['rule']}: {gate.incomplete[cell]}"))
        elif row["regression"]:
            checks.append(GateCheck(cell, metric, "failure", row_text(row)))
        else:
            checks.append(GateCheck(cell, metric, "passed", row_text(row)))
    if gate.status == "regressed" and not comparison.regressions:  # the comparison itself failed the gate
        checks.append(
            GateCheck("run", f"compared with {comparison.baseline}", "failure", "; ".join(gate.reasons))
        )
    return checks


def row_text(row: Mapping) -> str:
    """One compared row in words: the values, the change against its threshold, the rule that decided."""
    p_value = f", p={row['p_value']:.3g}" if row.get("p_value") is not None else ""
    return (
        f"{format_value(row['baseline'])} -> {format_value(row['current'])} (worse by "
        f"{format_value(row['worse_by'])}, threshold {row['threshold']}; {row['rule']}{p_value})"
    )


def _xml_text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)


def junit_xml(gate: GateResult) -> str:
    """The verdict as a JUnit XML document: one <testsuite> of `gate_checks`, a failure a <failure>, an
    error an <error>, a value the baseline lacks <skipped>; the run, its baseline and its code as
    properties."""
    checks = gate_checks(gate)
    counts = {
        "tests": str(len(checks)),
        "failures": str(sum(check.outcome == "failure" for check in checks)),
        "errors": str(sum(check.outcome == "error" for check in checks)),
        "skipped": str(sum(check.outcome == "skipped" for check in checks)),
    }
    root = ET.Element("testsuites", {"name": "ragbench regression gate", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": _xml_text(f"ragbench gate: {gate.config}"), **counts})
    properties = ET.SubElement(suite, "properties")
    values = {
        "run": gate.run,
        "config": gate.config,
        "status": gate.status,
        "baseline_mode": gate.baseline_mode,
        "baseline_run": gate.baseline_run or "",
        "code": gate.code.line() if gate.code is not None else "not recorded",
    }
    for name, value in values.items():
        ET.SubElement(properties, "property", {"name": name, "value": _xml_text(value)})
    for check in checks:
        case = ET.SubElement(
            suite, "testcase", {"classname": _xml_text(check.group), "name": _xml_text(check.name)}
        )
        if check.outcome != "passed":
            element = ET.SubElement(case, check.outcome, {"message": _xml_text(check.message)})
            if check.outcome != "skipped":
                element.set("type", "regression" if check.outcome == "failure" else "incomplete")
                element.text = _xml_text(check.message)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


SUMMARY_COLUMNS = ("cell", "metric", "verdict", "baseline", "current", "change", "threshold", "test")


def markdown_summary(gate: GateResult, links: Mapping[str, str]) -> str:
    """The verdict as Markdown: the status, the reasons, the counts of `gate_checks`, the verdict table
    (each run's value with its interval, the change, the threshold and the paired test that decided, the
    failing rows first), the code, and `links` (label -> URL or relative path: the report, the gate page)."""
    checks = gate_checks(gate)
    counted = {outcome: sum(check.outcome == outcome for check in checks) for outcome in get_args(Outcome)}
    lines = [
        f"## RAG benchmark gate: {gate.status.upper()}",
        "",
        f"Run {markdown_text(gate.run)} of config {markdown_text(gate.config)} against its "
        f"{markdown_text(gate.baseline_mode)} baseline ({markdown_text(gate.baseline_run or 'none')}): "
        f"{len(checks)} checks, {counted['passed']} passed, {counted['failure']} failed, "
        f"{counted['error']} errors, {counted['skipped']} not comparable.",
        "",
        *[f"- {markdown_text(reason)}" for reason in gate.reasons],
    ]
    comparison = gate.comparison
    if comparison is not None and comparison.rows:
        rows = sorted(
            (row for row in comparison.rows if row["kind"] != CORRECTED_INSTEAD),
            key=lambda row: not row["regression"],
        )
        lines += ["", rows_to_markdown_table([_summary_row(row) for row in rows], SUMMARY_COLUMNS)]
    if comparison is not None and comparison.code_changes:
        changes = "; ".join(markdown_text(change) for change in comparison.code_changes)
        lines += ["", f"Other code than the baseline: {changes}."]
    if gate.code is not None:
        lines += ["", markdown_text(gate.code.line())]
    if links:
        lines += [
            "",
            " · ".join(f"[{markdown_text(label)}](<{_href(href)}>)" for label, href in links.items()),
        ]
    return "\n".join(lines) + "\n"


def _summary_row(row: Mapping) -> dict[str, str]:
    """A compared row as the summary's table shows it: each value with its own run's interval."""
    verdict = {
        MISSING: "MISSING",
        NOT_COMPARABLE: "not comparable",
    }.get(row["kind"], "REGRESSION" if row["regression"] else "ok")

    def with_interval(value: object, interval: str) -> str:
        return f"{format_value(value)} {interval}".strip() if value is not None else "none"

    p_value = f", p={row['p_value']:.3g}" if row.get("p_value") is not None else ""
    return {
        "cell": row["cell"],
        "metric": row["metric"],
        "verdict": verdict,
        "baseline": with_interval(row["baseline"], row["baseline_interval"]),
        "current": with_interval(row["current"], row["current_interval"]),
        "change": format_value(row["change"]),
        "threshold": format_value(row["threshold"]),
        "test": f"{row['rule']}{p_value}",
    }


def _href(href: str) -> str:
    """A link's destination inside `<...>`: percent-encoded, so no character can end it or the link."""
    return quote(href, safe="/:#?=&%~@+,;")
