"""The regression gate's verdict on one run: the same code for the pipeline's last step and for
`run.py compare`, so a ZenML schedule on any orchestrator is gated exactly as a run by hand.

It fails closed: a failed or incomplete run (a configured metric without a value in some cell), a number
the baseline has and the run could not produce, a comparison that lined up nothing, and (unless accepted by
`regression.on_eval_change: warn`) a changed eval set are all failures, never a silent pass.
"""

from __future__ import annotations

from html import escape
from typing import Literal, get_args

from pydantic import BaseModel, Field, field_validator

from ragbench.analysis.labelled import is_corrected_key
from ragbench.provenance import CodeVersion
from ragbench.report.pages import document, page_header, rows_to_html_table
from ragbench.runs.compare import Comparison, compare_runs, comparison_text
from ragbench.runs.gate_formats import junit_xml, markdown_summary
from ragbench.runs.record import GATE_STATUS, RunRecord
from ragbench.section import Section
from ragbench.stats.inference import StatisticsConfig

GateStatus = Literal["passed", "regressed", "inconclusive", "incomplete", "failed"]
# Which earlier run a run is compared with (`RegressionConfig.baseline`); compare also takes a run's name.
BaselineMode = Literal["previous", "champion", "none"]
BASELINE_MODES: tuple[BaselineMode, ...] = get_args(BaselineMode)


class GateResult(BaseModel):
    """passed; regressed (worse beyond threshold and noise, or missing, or nothing in common with the
    baseline); inconclusive (a sample of traffic too small to tell a drop: never a pass); incomplete (the
    run could not score a whole cell); failed (the run itself failed)."""

    config: str
    run: str
    baseline_mode: str
    baseline_run: str | None
    status: GateStatus
    reasons: list[str]
    comparison: Comparison | None = None
    cells: list[str] = []  # the run's cells, each gated for completeness
    incomplete: dict[str, str] = {}  # cell id -> why the run could not score it (an error, not a regression)
    code: CodeVersion | None = None  # the code the run ran
    too_small: str | None = None  # why the run's sample of traffic cannot tell a drop (`min_traces`)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def metadata(self) -> dict[str, str | int | bool | list[str] | None]:
        """Flat run metadata, so runs can be filtered by their gate in the dashboard and `Client()`."""
        comparison = self.comparison
        return {
            GATE_STATUS: self.status,
            "gate_passed": self.passed,
            "gate_reasons": self.reasons,
            "baseline_run": self.baseline_run or "",
            "regressions": len(comparison.regressions) if comparison else 0,
            "missing_metrics": len(comparison.missing) if comparison else 0,
            "compared_metrics": len(comparison.compared) if comparison else 0,
            "not_comparable_metrics": len(comparison.not_comparable) if comparison else 0,
            "baseline_code_changes": comparison.code_changes if comparison else [],
        }

    def text(self) -> str:
        lines = [f"Gate ({self.baseline_mode} baseline) for {self.run}: {self.status.upper()}"]
        lines += [f"  {reason}" for reason in self.reasons]
        if self.comparison is not None:
            lines.append(comparison_text(self.comparison))
        return "\n".join(lines)

    def files(self) -> dict[str, str]:
        """The verdict as the files a run's folder holds (the gate artifact holds the same): the page, the
        Markdown summary (linking the report and the page beside it) and the JUnit XML."""
        links = {"report": "results.html", "gate page": "gate.html"}
        return {
            "gate.html": self.html(),
            "gate.md": markdown_summary(self, links),
            "gate.xml": junit_xml(self),
        }

    def html(self) -> str:
        title = f"Regression gate: {self.status}"
        notes = [
            f"Run {self.run} of config {self.config} against its {self.baseline_mode} baseline "
            f"({self.baseline_run or 'none'})."
        ]
        notes += [self.code.line()] if self.code is not None else []
        warnings = [] if self.passed else self.reasons
        body = page_header(title, notes, warnings)
        if self.passed and self.reasons:
            body += "".join(f"<p class='note'>{escape(reason)}</p>" for reason in self.reasons)
        if self.comparison is not None:
            body += "<h2>Failing rows (regressions and missing values)</h2>"
            body += rows_to_html_table(self.comparison.regressions)
            body += "<h2>Every compared metric</h2>" + rows_to_html_table(self.comparison.rows)
            body += (
                "<h2>Cases whose reference changed (left out of the paired tests)</h2>"
                + rows_to_html_table([{"case": case} for case in self.comparison.changed_references])
            )
            body += "<h2>Code: how the baseline's differs from this run's</h2>" + rows_to_html_table(
                [{"difference": change} for change in self.comparison.code_changes]
            )
            body += "<h2>Cells</h2>" + rows_to_html_table(
                [{"cell": cell, "change": "added"} for cell in self.comparison.added_cells]
                + [{"cell": cell, "change": "removed"} for cell in self.comparison.removed_cells]
            )
            body += "<h2>Not comparable (the baseline has no value; not gated)</h2>" + rows_to_html_table(
                self.comparison.not_comparable
            )
            body += "<h2>Metrics no longer configured</h2>" + rows_to_html_table(
                [{"metric": metric} for metric in self.comparison.dropped_metrics]
            )
        return document(title, body)


def judge_run(
    current: RunRecord,
    baseline: RunRecord | None,
    *,
    config: str,
    baseline_mode: str,
    regression: RegressionConfig,
    statistics: StatisticsConfig,
    failure: str | None = None,
) -> GateResult:
    """The verdict on `current` (`failure`: why the run itself failed, if it did). With no baseline
    only the run's own completeness is judged; the reason says there was nothing to compare with."""
    verdict = {
        "config": config,
        "run": current.name,
        "baseline_mode": baseline_mode,
        "baseline_run": baseline.name if baseline else None,
        "cells": sorted(current.cells),
        "incomplete": current.incomplete,
        "code": current.code,
    }
    if failure is not None:
        return GateResult(
            **verdict, status="failed", reasons=[f"run {current.name} did not finish: {failure}"]
        )
    reasons = list(current.incomplete.values())
    too_small = too_small_sample(current, regression.min_traces)
    if too_small is not None:
        reasons.append(too_small)
    reasons += [
        f"case {case} FAILED: its reference could not be fetched ({why}); the run completed without it"
        for case, why in current.reference_failures.items()
    ]
    comparison, fails = None, False  # fails: the comparison itself fails the gate
    if baseline is not None:
        comparison = compare_runs(
            current, baseline, regression.thresholds, regression.default_threshold, statistics
        )
        if comparison.regressions:
            fails = True
            reasons.append(
                f"{len(comparison.regressions) - len(comparison.missing)} regression(s) and "
                f"{len(comparison.missing)} missing value(s) against {comparison.baseline}"
            )
            reasons += label_correction_reasons(current, comparison)
        elif not comparison.compared:
            fails = True
            reasons.append(
                f"no (cell, metric) in common with {comparison.baseline}: nothing was compared, which is "
                "never a pass (a changed grid: promote a run of it as champion, or compare --against RUN)"
            )
        if comparison.not_comparable:
            reasons.append(
                f"{len(comparison.not_comparable)} (cell, metric) value(s) not comparable: "
                f"{comparison.baseline} has no value for them (listed below; they were not gated)"
            )
        if comparison.changed_references:
            reasons.append(
                f"reference changed since {comparison.baseline} for {len(comparison.changed_references)} "
                f"case(s): {', '.join(comparison.changed_references)}; they are scored against the fresh "
                "reference and left out of the paired tests (reported, not a regression)"
            )
        if comparison.code_changes:
            reasons.append(
                f"{comparison.baseline} ran other code than this run ({len(comparison.code_changes)} "
                "difference(s), listed below): a change in the numbers may come from the code as well "
                "as from the inputs (reported, not a regression by itself)"
            )
        if comparison.independent_samples:
            reasons.append(
                f"this run and {baseline.name} scored two samples of the deployed system's traces "
                f"({_sample_text(baseline)} and {_sample_text(current)}): no trace is in both, so each "
                "metric is compared as two independent samples, not case by case"
            )
        elif not comparison.same_eval_set:
            change = (
                f"the eval set changed since {baseline.name} (fingerprint "
                f"{baseline.eval_fingerprint or 'none'} -> {current.eval_fingerprint or 'none'})"
            )
            if regression.on_eval_change == "fail":
                fails = True
                reasons.append(
                    f"{change}: scores on other cases are not a like-for-like comparison, so the gate fails "
                    "(regression.on_eval_change: fail). Accept the new eval set with "
                    "--set regression.on_eval_change=warn on one run; once it passes it is the baseline."
                )
            else:
                reasons.append(f"{change}; accepted by regression.on_eval_change: warn")
    elif baseline_mode != "none":
        reasons.append(f"no {baseline_mode} baseline for config {config}: only the run's completeness judged")
    # an incomplete run is that first of all (exit 2), whatever its comparison says
    status: GateStatus = (
        "incomplete"
        if current.incomplete
        else "regressed"
        if fails
        else "inconclusive"
        if too_small
        else "passed"
    )
    return GateResult(**verdict, status=status, reasons=reasons, comparison=comparison, too_small=too_small)


def _sample_text(record: RunRecord) -> str:
    traffic = record.traffic or {}
    return f"{traffic.get('sampled', 0)} traces, {traffic.get('window', 'no window')}"


def too_small_sample(record: RunRecord, min_traces: int) -> str | None:
    """Why a run that scored a sample of traffic cannot tell a drop: it scored fewer than `min_traces`
    traces (the night had too little traffic, or the sample was set too small). None otherwise."""
    if record.traffic is None or (sampled := int(record.traffic.get("sampled", 0))) >= min_traces:
        return None
    return (
        f"too few traces to tell: {sampled} scored ({record.traffic.get('usable', sampled)} RAG traces in "
        f"{record.traffic.get('window', 'the window')}), fewer than regression.min_traces = {min_traces}; "
        "an interval this wide cannot tell a drop from noise, so the gate does not pass"
    )


def label_correction_reasons(current: RunRecord, comparison: Comparison) -> list[str]:
    """For each label-corrected metric the run has no value of, why: how many labels it used and why the
    others were left out (where the sample ends), from the run's metadata; one line per reason."""
    cells: dict[tuple[str, str], list[str]] = {}
    for row in comparison.missing:
        metric = row["metric"]
        if metric not in current.label_correction and not is_corrected_key(metric):
            continue
        if row["cell"] in current.incomplete:  # the cell's own failure is its reason
            continue
        why = current.missing_reason(metric, row["cell"], full=True) or ""
        cells.setdefault((metric, why), []).append(row["cell"])
    return [
        f"{metric} has no label-corrected value ({len(found)} cell(s): {', '.join(found)}): {why}"
        for (metric, why), found in cells.items()
    ]


# Gate thresholds every config has unless it names the metric itself: latency has no per-case values, so
# its threshold alone decides whether a slower p95 is a regression.
DEFAULT_THRESHOLDS = {"latency_p95_s": 1.0}


class RegressionConfig(Section):
    """The regression gate (the pipeline's last step, and `run.py compare`): which run is the baseline,
    and how far a tracked metric may move in its bad direction before it is a regression."""

    baseline: BaselineMode = Field(
        default="previous",
        description="previous: the newest earlier run of this config that passed its gate or was promoted "
        "(never a regressed, incomplete or failed one); champion: the run promoted for this config "
        "(`run.py promote RUN`); none: only check the run is complete",
    )
    on_eval_change: Literal["fail", "warn"] = Field(
        default="fail",
        description="when the eval cases differ from the baseline's: fail the gate (default), or warn and "
        "compare anyway (accept the new eval set once with --set regression.on_eval_change=warn)",
    )
    default_threshold: float = Field(default=0.0, ge=0.0, description="for metrics not named below")
    min_traces: int = Field(
        default=20,
        ge=1,
        description="a run on the deployed system's traces (eval_cases.traces) that scored fewer traces is "
        "inconclusive: the gate says the sample is too small to tell, and does not pass",
    )
    thresholds: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_THRESHOLDS),
        description="metric key (as in run metadata, e.g. hit_rate_at_5) -> allowed change; merged over the "
        "defaults (latency_p95_s: 1.0 s), so naming one metric keeps the others",
    )

    @field_validator("thresholds")
    @classmethod
    def _merge_over_defaults(cls, thresholds: dict[str, float]) -> dict[str, float]:
        """A map that names one metric must not drop the latency default: latency has no per-case values,
        so its threshold alone decides, and 0.0 would fail every night whose p95 rose at all."""
        if negative := sorted(key for key, value in thresholds.items() if value < 0):
            raise ValueError(f"{', '.join(negative)}: a threshold is an allowed change, 0 or more")
        return {**DEFAULT_THRESHOLDS, **thresholds}
