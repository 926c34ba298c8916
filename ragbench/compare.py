"""Runs over time: line up the same cell across two runs and flag the metrics that moved the wrong way.

A cell is the same cell when its id is (the id hashes the settings that can change its results), and
the comparison is only meaningful on the same eval set (the eval fingerprint); both runs' numbers come
from their run-level metadata (`<metric>__<cell id>`, see `ragbench.results.run_metadata`). It fails
closed: a number the baseline has and the current run could not produce is a regression (`missing`).
"""

from __future__ import annotations

import csv
import io
import json
import math

from pydantic import BaseModel

from ragbench.config import StatisticsConfig
from ragbench.metrics import metric_key
from ragbench.pages import format_value
from ragbench.stats import Test, paired_difference_test, smallest_attainable_p
from ragbench.uncertainty import TEST_NAMES

CELL_SEPARATOR = "__"
WORSE, MISSING = "worse", "missing"  # the two kinds of regression


def config_tag(config_name: str) -> str:
    """The tag every run of a config carries (no ':' so ZenML's tag filter can match it)."""
    return "config-" + _tag_safe(config_name)


def champion_tag(config_name: str) -> str:
    """The champion marker of one config: exclusive per tag, so every config keeps its own champion."""
    return "champion-" + _tag_safe(config_name)


def _tag_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class RunRecord(BaseModel):
    """What compare needs of one run."""

    name: str
    created: str
    eval_fingerprint: str | None
    directions: dict[str, str]  # metric key -> "higher" or "lower" (which way is better)
    tests: dict[str, Test] = {}  # metric key -> the paired test that suits it
    values: dict[str, dict[str, float]]  # metric key -> cell id -> value
    intervals: dict[str, dict[str, tuple[float, float]]] = {}  # metric key -> cell id -> (low, high)
    case_values: dict[str, dict[str, dict[str, float]]] = {}  # metric key -> cell id -> case id -> value
    grid_cells: list[str] = []  # every cell of the run's grid, scored or not (empty for older runs)
    incomplete: dict[str, str] = {}  # cell id -> why the run could not score it
    # the metric keys the run's config asked for, computed or not (None for older runs): a metric the
    # baseline has and the config no longer asks for is dropped from the comparison, not missing
    configured: list[str] | None = None

    @classmethod
    def from_metadata(
        cls, name: str, created: str, metadata: dict, case_values: dict[str, dict[str, dict[str, float]]]
    ) -> RunRecord:
        """`case_values` as the run's results table holds them (cell id -> column -> case id -> value)."""
        directions = metadata.get("metric_directions") or {}
        values: dict[str, dict[str, float]] = {}
        bounds: dict[str, dict[str, dict[str, float]]] = {}
        for key, value in metadata.items():
            metric, separator, cell = key.partition(CELL_SEPARATOR)
            if not separator or not isinstance(value, int | float):
                continue
            if metric in directions:
                values.setdefault(metric, {})[cell] = float(value)
            elif (bound := metric.rpartition("_"))[0] in directions and bound[2] in ("low", "high"):
                bounds.setdefault(bound[0], {}).setdefault(cell, {})[bound[2]] = float(value)
        per_case: dict[str, dict[str, dict[str, float]]] = {}
        for cell, columns in case_values.items():
            for column, by_case in columns.items():
                if (metric := metric_key(column)) in directions:
                    per_case.setdefault(metric, {})[cell] = by_case
        return cls(
            name=name,
            created=created,
            eval_fingerprint=metadata.get("eval_fingerprint"),
            directions=directions,
            tests=metadata.get("metric_tests") or {},
            values=values,
            intervals={
                metric: {cell: (b["low"], b["high"]) for cell, b in by_cell.items() if len(b) == 2}
                for metric, by_cell in bounds.items()
            },
            case_values=per_case,
            grid_cells=metadata.get("cell_ids") or [],
            incomplete=metadata.get("incomplete_cells") or {},
            configured=metadata.get("configured_metrics"),
        )

    @property
    def cells(self) -> set[str]:
        return set(self.grid_cells) | {cell for by_cell in self.values.values() for cell in by_cell}


class Comparison(BaseModel):
    current: str
    baseline: str
    same_eval_set: bool
    rows: list[dict]  # cell, metric, regression, kind, baseline, current, change, worse_by, threshold, rule
    added_cells: list[str]
    removed_cells: list[str]
    dropped_metrics: list[str] = []  # the baseline's metrics the current config no longer asks for

    @property
    def regressions(self) -> list[dict]:
        """Worse beyond threshold and noise, or missing: every row that fails the gate."""
        return [row for row in self.rows if row["regression"]]

    @property
    def missing(self) -> list[dict]:
        return [row for row in self.rows if row["kind"] == MISSING]

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(self.rows[0]) if self.rows else ["cell"])
        writer.writeheader()
        writer.writerows(self.rows)
        return buffer.getvalue()

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
    rows = []
    dropped = sorted(
        m for m in baseline.values if current.configured is not None and m not in current.configured
    )
    for metric, by_cell in sorted(baseline.values.items()):
        if metric in dropped:
            continue
        higher_is_better = baseline.directions.get(metric, "higher") == "higher"
        threshold = thresholds.get(metric, default_threshold)
        for cell, before in sorted(by_cell.items()):
            now = current.values.get(metric, {}).get(cell)
            if now is None:
                if cell in current.cells:
                    rows.append(_missing_row(cell, metric, before, threshold, current.incomplete.get(cell)))
                continue  # a cell taken out of the grid: listed as removed
            worse_by = (before - now) if higher_is_better else (now - before)
            past_threshold = worse_by > threshold
            beyond, rule, p_value = _beyond_noise(
                current, baseline, metric, cell, same_eval_set, higher_is_better, statistics
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
    )


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


def _span(record: RunRecord, metric: str, cell: str) -> str:
    bounds = record.intervals.get(metric, {}).get(cell)
    return "" if bounds is None else f"[{format_value(bounds[0])}, {format_value(bounds[1])}]"


def _beyond_noise(
    current: RunRecord,
    baseline: RunRecord,
    metric: str,
    cell: str,
    same_eval_set: bool,
    higher_is_better: bool,
    statistics: StatisticsConfig,
) -> tuple[bool, str, float | None]:
    """Is the change larger than the noise? (beyond, rule, p-value)

    Same eval set and per-case values in both runs: a paired test on the cases both scored (the same
    test the run uses between cells), at `alpha`, uncorrected: each (cell, metric) is its own alarm.
    A test that cannot reach alpha at that number of cases (5 or fewer at 0.05) is no evidence of
    noise, so there the threshold decides and the rule says so. Otherwise, the two runs' intervals
    must not overlap. Runs from before per-case values existed have neither: the threshold decides."""
    now_cases = current.case_values.get(metric, {}).get(cell)
    before_cases = baseline.case_values.get(metric, {}).get(cell)
    if same_eval_set and now_cases and before_cases:
        shared = [
            case
            for case in sorted(set(now_cases) & set(before_cases))
            if not (math.isnan(now_cases[case]) or math.isnan(before_cases[case]))
        ]
        test = current.tests.get(metric, "paired_permutation")
        _, _, _, p_value = paired_difference_test(
            [before_cases[c] for c in shared],
            [now_cases[c] for c in shared],
            test=test,
            seed=statistics.seed,
            resamples=statistics.resamples,
        )
        rule = f"{TEST_NAMES[test]} on {len(shared)} cases"
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
    if not comparison.same_eval_set:
        lines.append("WARNING: the two runs used different eval sets")
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
    within = [
        r
        for r in comparison.rows
        if r["kind"] != MISSING and r["worse_by"] > r["threshold"] and not r["regression"]
    ]
    if within:
        lines.append(
            f"{len(within)} cell metric(s) moved past their threshold but within the noise "
            "(not regressions): " + ", ".join(f"{r['metric']} in {r['cell']} ({r['rule']})" for r in within)
        )
    if not comparison.regressions:
        lines.append(f"no regression over {len(comparison.rows)} cell metrics")
    lines += [f"added cell: {cell}" for cell in comparison.added_cells]
    lines += [f"removed cell: {cell}" for cell in comparison.removed_cells]
    lines += [f"metric no longer configured: {metric}" for metric in comparison.dropped_metrics]
    return "\n".join(lines)
