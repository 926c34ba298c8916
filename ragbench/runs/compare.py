"""Runs over time: line up the same cell across two runs and flag the metrics that moved the wrong way.

A cell is the same cell when its id is (the id hashes the settings that can change its results), and
the comparison is only meaningful on the same eval set (the eval fingerprint); both runs' numbers come
from their run-level metadata (`<metric>__<cell id>`, see `ragbench.runs.record`). It fails closed: a number
the baseline has and the current run could not produce is a regression (`missing`); every metric the current
config asks for is walked, and one the baseline has no value for is listed as not comparable.
"""

from __future__ import annotations

import json
import math

from pydantic import BaseModel

from ragbench.analysis.labelled import corrected_key
from ragbench.analysis.uncertainty import TEST_NAMES
from ragbench.inputs.tables import rows_to_csv
from ragbench.report.pages import format_value
from ragbench.runs.record import RunRecord
from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import (
    StatisticsConfig,
    paired_differences,
    paired_p_value,
    smallest_attainable_p,
    two_sample_p_value,
)
from ragbench.stats.strata import by_stratum, stratified_p_value

WORSE, MISSING = "worse", "missing"  # the two kinds of regression
NOT_COMPARABLE = "not comparable"  # a value the current run has and the baseline lacks: listed, never a pass
# a judged metric whose label-corrected estimate (`<metric>_corrected`) is gated in its place: listed only
CORRECTED_INSTEAD = "label-corrected instead"


def config_tag(config_name: str) -> str:
    """The tag every run of a config carries; config names are validated
    (`ragbench.config.model.CONFIG_NAME`),
    so two names never share one tag and none holds the ':' that ZenML's tag filter splits on."""
    return "config-" + config_name


def champion_tag(config_name: str) -> str:
    """The champion marker of one config: exclusive per tag, so every config keeps its own champion."""
    return "champion-" + config_name


class Comparison(BaseModel):
    current: str
    baseline: str
    same_eval_set: bool
    rows: list[dict]  # cell, metric, regression, kind, baseline, current, change, worse_by, threshold, rule
    added_cells: list[str]
    removed_cells: list[str]
    dropped_metrics: list[str] = []  # the baseline's metrics the current config no longer asks for
    # cases whose fetched reference (`reference_from`) differs from the baseline's: scored against a changed
    # truth, so left out of every paired test (reported, never a regression by themselves)
    changed_references: list[str] = []
    # how the code the baseline ran differs from this run's (commit, modified tree, ragbench and key package
    # versions; `CodeVersion.changes_from`): reported beside the verdict, never a regression by itself
    code_changes: list[str] = []
    # both runs scored samples of the deployed system's traffic (two nights): other cases by design,
    # compared as independent samples
    independent_samples: bool = False

    @property
    def regressions(self) -> list[dict]:
        """Worse beyond threshold and noise, or missing: every row that fails the gate."""
        return [row for row in self.rows if row["regression"]]

    @property
    def missing(self) -> list[dict]:
        return [row for row in self.rows if row["kind"] == MISSING]

    @property
    def not_comparable(self) -> list[dict]:
        return [row for row in self.rows if row["kind"] == NOT_COMPARABLE]

    @property
    def compared(self) -> list[dict]:
        """The rows where both runs have a value (or the current one lost it): what the verdict rests on."""
        return [row for row in self.rows if row["kind"] not in (NOT_COMPARABLE, CORRECTED_INSTEAD)]

    def csv(self) -> str:
        return rows_to_csv(self.rows)

    def json(self) -> str:
        return json.dumps(self.model_dump() | {"regressions": self.regressions}, indent=2)


def compare_runs(
    current: RunRecord,
    baseline: RunRecord,
    thresholds: dict[str, float],
    default_threshold: float,
    statistics: StatisticsConfig | None = None,
) -> Comparison:
    """A metric regresses when it moved in its bad direction by more than its threshold AND by more
    than the noise (`rule` says what decided the noise, see `_beyond_noise`), or when the baseline has a
    value that the current run, whose grid still holds the cell, could not produce (`missing`)."""
    statistics = statistics or StatisticsConfig()
    same_eval_set = current.eval_fingerprint == baseline.eval_fingerprint
    independent = not same_eval_set and current.traffic is not None and baseline.traffic is not None
    changed = changed_references(current, baseline)
    rows = []
    dropped = sorted(
        m for m in baseline.values if current.configured is not None and m not in current.configured
    )
    metrics = (set(baseline.values) - set(dropped)) | set(current.values)
    directions = baseline.directions | current.directions
    for metric in sorted(metrics):
        higher_is_better = directions.get(metric, "higher") == "higher"
        threshold = thresholds.get(metric, default_threshold)
        if corrected_key(metric) in current.values:  # the label-corrected estimate is gated instead
            rows += [
                _corrected_instead_row(
                    cell, metric, baseline.values.get(metric, {}).get(cell), now, threshold
                )
                for cell, now in sorted(current.values.get(metric, {}).items())
            ]
            continue
        before_by_cell, now_by_cell = baseline.values.get(metric, {}), current.values.get(metric, {})
        for cell in sorted(set(before_by_cell) | set(now_by_cell)):
            before, now = before_by_cell.get(cell), now_by_cell.get(cell)
            if before is None:
                if now is not None and cell in baseline.cells:  # a new cell is listed as added instead
                    rows.append(_not_comparable_row(cell, metric, now, threshold))
                continue
            if now is None:
                if cell in current.cells:
                    rows.append(
                        _missing_row(cell, metric, before, threshold, current.missing_reason(metric, cell))
                    )
                continue  # a cell taken out of the grid: listed as removed
            worse_by = (before - now) if higher_is_better else (now - before)
            past_threshold = worse_by > threshold
            beyond, rule, p_value = _beyond_noise(
                current,
                baseline,
                metric,
                cell,
                same_eval_set,
                higher_is_better,
                statistics,
                frozenset(changed),
                independent,
            )
            rows.append(
                {
                    "cell": cell,
                    "metric": metric,
                    "regression": past_threshold and beyond,
                    "kind": WORSE if past_threshold and beyond else "",
                    "baseline": before,
                    "current": now,
                    "baseline_interval": _span(baseline, metric, cell),
                    "current_interval": _span(current, metric, cell),
                    "change": round(now - before, 6),
                    "worse_by": round(worse_by, 6),
                    "threshold": threshold,
                    "rule": rule,
                    "p_value": p_value,
                }
            )
    return Comparison(
        current=current.name,
        baseline=baseline.name,
        same_eval_set=same_eval_set,
        rows=rows,
        added_cells=sorted(current.cells - baseline.cells),
        removed_cells=sorted(baseline.cells - current.cells),
        dropped_metrics=dropped,
        changed_references=changed,
        code_changes=code_changes(current, baseline),
        independent_samples=independent,
    )


def code_changes(current: RunRecord, baseline: RunRecord) -> list[str]:
    """How the baseline's code differs from the current run's; nothing when neither run recorded its code
    (two runs from before runs recorded it)."""
    if current.code is None:
        return ["this run recorded no code (a run from before runs recorded it)"] if baseline.code else []
    return current.code.changes_from(baseline.code)


def changed_references(current: RunRecord, baseline: RunRecord) -> list[str]:
    """The cases both runs fetched a reference for, whose fetched values differ."""
    before, now = baseline.reference_digests, current.reference_digests
    return sorted(case for case in set(before) & set(now) if before[case] != now[case])


def _missing_row(cell: str, metric: str, before: float, threshold: float, why: str | None) -> dict:
    return {
        "cell": cell,
        "metric": metric,
        "regression": True,
        "kind": MISSING,
        "baseline": before,
        "current": None,
        "baseline_interval": "",
        "current_interval": "",
        "change": None,
        "worse_by": None,
        "threshold": threshold,
        "rule": f"missing: the current run has no value ({why or 'every call failed, or nothing to score'})",
        "p_value": None,
    }


def _not_comparable_row(cell: str, metric: str, now: float, threshold: float) -> dict:
    return {
        "cell": cell,
        "metric": metric,
        "regression": False,
        "kind": NOT_COMPARABLE,
        "baseline": None,
        "current": now,
        "baseline_interval": "",
        "current_interval": "",
        "change": None,
        "worse_by": None,
        "threshold": threshold,
        "rule": "not comparable: the baseline has no value (a metric added since, or not scored then)",
        "p_value": None,
    }


def _span(record: RunRecord, metric: str, cell: str) -> str:
    bounds = record.intervals.get(metric, {}).get(cell)
    return "" if bounds is None else interval_text(*bounds, digits=4, significant=True)


def _corrected_instead_row(
    cell: str, metric: str, before: float | None, now: float, threshold: float
) -> dict:
    """A judged metric that labels correct: listed with its raw values, decided by `<metric>_corrected`."""
    return {
        "cell": cell,
        "metric": metric,
        "regression": False,
        "kind": CORRECTED_INSTEAD,
        "baseline": before,
        "current": now,
        "baseline_interval": "",
        "current_interval": "",
        "change": None if before is None else round(now - before, 6),
        "worse_by": None,
        "threshold": threshold,
        "rule": f"judge alone: the label-corrected {corrected_key(metric)} is gated instead",
        "p_value": None,
    }


def _strata(current: RunRecord, baseline: RunRecord) -> tuple[dict[str, str], dict[str, str]] | None:
    """(baseline's, current's) case id -> stratum when both nights' traffic samples were stratified, else
    None (a night that was not has no strata to pair: the two are compared as plain samples)."""
    before_of = (baseline.traffic or {}).get("stratum_of") or {}
    now_of = (current.traffic or {}).get("stratum_of") or {}
    return (before_of, now_of) if before_of and now_of else None


def _beyond_noise(
    current: RunRecord,
    baseline: RunRecord,
    metric: str,
    cell: str,
    same_eval_set: bool,
    higher_is_better: bool,
    statistics: StatisticsConfig,
    changed: frozenset[str] = frozenset(),
    independent: bool = False,
) -> tuple[bool, str, float | None]:
    """Is the change larger than the noise? (beyond, rule, p-value)

    Same eval set and per-case values in both runs: a paired test on the cases both scored (the same
    test the run uses between cells: the sign-flip permutation test of the mean, whichever test the
    run's record names, as runs before it named Wilcoxon's for 1-5 scores), at `alpha`, uncorrected: each
    (cell, metric) is its own alarm. No interval of the change is shown beside the verdict, so none can
    contradict it: the intervals in a row are each run's own mean's.
    A test that cannot reach alpha at that number of cases (5 or fewer at 0.05) is no evidence of
    noise, so there the threshold decides and the rule says so. Otherwise, the two runs' intervals
    must not overlap. Runs from before per-case values existed have neither: the threshold decides.
    `changed`: cases whose reference changed between the runs, left out of the paired test (unlike).
    `independent`: two samples of traffic (two nights' traces), no case in both: the permutation test of
    two independent samples on every case of each (`two_sample_p_value`), at `alpha`."""
    now_cases = current.case_values.get(metric, {}).get(cell)
    before_cases = baseline.case_values.get(metric, {}).get(cell)
    if independent and now_cases and before_cases and (strata := _strata(current, baseline)):
        before_of, now_of = strata
        p_value = stratified_p_value(
            by_stratum(before_cases, before_of),
            by_stratum(now_cases, now_of),
            seed=statistics.seed,
            resamples=statistics.resamples,
        )
        rule = (
            f"permutation test within strata of two independent samples ({len(before_cases)} and "
            f"{len(now_cases)} traces), strata at the nights' pooled shares"
        )
        return p_value < statistics.alpha, rule, p_value
    if independent and now_cases and before_cases:
        p_value = two_sample_p_value(
            list(before_cases.values()),
            list(now_cases.values()),
            seed=statistics.seed,
            resamples=statistics.resamples,
        )
        rule = (
            f"permutation test of two independent samples ({len(before_cases)} and {len(now_cases)} traces)"
        )
        return p_value < statistics.alpha, rule, p_value
    if same_eval_set and now_cases and before_cases:
        shared = [
            case
            for case in sorted(set(now_cases) & set(before_cases) - changed)
            if not (math.isnan(now_cases[case]) or math.isnan(before_cases[case]))
        ]
        p_value = paired_p_value(
            paired_differences([before_cases[c] for c in shared], [now_cases[c] for c in shared]),
            seed=statistics.seed,
            resamples=statistics.resamples,
        )
        rule = f"{TEST_NAMES['paired_permutation']} on {len(shared)} cases" + (
            f" ({len(changed)} with a changed reference left out)" if changed else ""
        )
        if (floor := smallest_attainable_p(len(shared))) > statistics.alpha:
            return (
                True,
                f"{rule} cannot decide at n = {len(shared)} (p >= {floor:.3g}): threshold rule",
                p_value,
            )
        return p_value < statistics.alpha, rule, p_value
    now_span = current.intervals.get(metric, {}).get(cell)
    before_span = baseline.intervals.get(metric, {}).get(cell)
    if now_span and before_span:
        apart = now_span[1] < before_span[0] if higher_is_better else now_span[0] > before_span[1]
        return apart, "intervals do not overlap" if apart else "intervals overlap", None
    return True, "threshold only (no per-case values or intervals)", None


def comparison_text(comparison: Comparison) -> str:
    """The terminal's view: the regressions and missing values (or none), then added and removed cells."""
    lines = [f"{comparison.current} against {comparison.baseline}:"]
    if comparison.independent_samples:
        lines.append("two samples of the deployed system's traffic: compared as independent samples")
    elif not comparison.same_eval_set:
        lines.append("the two runs used different eval sets (see the gate's verdict)")
    if comparison.code_changes:
        lines.append(f"OTHER CODE than the baseline: {'; '.join(comparison.code_changes)}")
    for row in comparison.regressions:
        if row["kind"] == MISSING:
            before = format_value(row["baseline"])
            lines.append(f"MISSING {row['metric']} in {row['cell']}: {before} -> none ({row['rule']})")
            continue
        lines.append(
            f"REGRESSION {row['metric']} in {row['cell']}: {format_value(row['baseline'])} -> "
            f"{format_value(row['current'])} (worse by {format_value(row['worse_by'])}, "
            f"threshold {row['threshold']}; {row['rule']}"
            + (f", p={row['p_value']:.3g})" if row["p_value"] is not None else ")")
        )
    lines += [
        f"NOT COMPARABLE {row['metric']} in {row['cell']}: the baseline has no value (now "
        f"{format_value(row['current'])})"
        for row in comparison.not_comparable
    ]
    within = [
        r
        for r in comparison.compared
        if r["kind"] != MISSING and r["worse_by"] > r["threshold"] and not r["regression"]
    ]
    if within:
        lines.append(
            f"{len(within)} cell metric(s) moved past their threshold but within the noise "
            "(not regressions): " + ", ".join(f"{r['metric']} in {r['cell']} ({r['rule']})" for r in within)
        )
    if not comparison.regressions:
        lines.append(f"no regression over {len(comparison.compared)} compared cell metrics")
    if instead := sorted({row["metric"] for row in comparison.rows if row["kind"] == CORRECTED_INSTEAD}):
        lines.append(
            f"gated by their label-corrected estimates instead of the judge's means: {', '.join(instead)}"
        )
    lines += [
        f"REFERENCE CHANGED for case {case}: scored against the fresh reference, left out of the paired "
        "tests (not a regression)"
        for case in comparison.changed_references
    ]
    lines += [f"added cell: {cell}" for cell in comparison.added_cells]
    lines += [f"removed cell: {cell}" for cell in comparison.removed_cells]
    lines += [f"metric no longer configured: {metric}" for metric in comparison.dropped_metrics]
    return "\n".join(lines)
