"""Runs over time: line up the same cell across two runs and flag the metrics that moved the wrong way.

A cell is the same cell when its id is (the id hashes every setting), and the comparison is only
meaningful on the same eval set (the eval fingerprint); both runs' numbers come from their run-level
metadata (`<metric>__<cell id>`, see `ragbench.results.run_metadata`).
"""

from __future__ import annotations

import csv
import io
import json
from html import escape

from pydantic import BaseModel

from ragbench.pages import document, format_value, page_header, rows_to_html_table

CELL_SEPARATOR = "__"
CHAMPION_TAG = "champion"


def config_tag(config_name: str) -> str:
    """The tag every run of a config carries (no ':' so ZenML's tag filter can match it)."""
    return "config-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in config_name)


class RunRecord(BaseModel):
    """What compare needs of one run."""

    name: str
    created: str
    eval_fingerprint: str | None
    directions: dict[str, str]  # metric key -> "higher" or "lower" (which way is better)
    values: dict[str, dict[str, float]]  # metric key -> cell id -> value

    @classmethod
    def from_metadata(cls, name: str, created: str, metadata: dict) -> RunRecord:
        directions = metadata.get("metric_directions") or {}
        values: dict[str, dict[str, float]] = {}
        for key, value in metadata.items():
            metric, separator, cell = key.partition(CELL_SEPARATOR)
            if separator and metric in directions and isinstance(value, int | float):
                values.setdefault(metric, {})[cell] = float(value)
        return cls(
            name=name,
            created=created,
            eval_fingerprint=metadata.get("eval_fingerprint"),
            directions=directions,
            values=values,
        )

    @property
    def cells(self) -> set[str]:
        return {cell for by_cell in self.values.values() for cell in by_cell}


class Comparison(BaseModel):
    current: str
    baseline: str
    same_eval_set: bool
    rows: list[dict]  # cell, metric, baseline, current, change, worse_by, threshold, regression
    added_cells: list[str]
    removed_cells: list[str]

    @property
    def regressions(self) -> list[dict]:
        return [row for row in self.rows if row["regression"]]

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(self.rows[0]) if self.rows else ["cell"])
        writer.writeheader()
        writer.writerows(self.rows)
        return buffer.getvalue()

    def json(self) -> str:
        return json.dumps(self.model_dump() | {"regressions": self.regressions}, indent=2)

    def html(self) -> str:
        title = f"{self.current} against {self.baseline}"
        notes = [
            f"{len(self.regressions)} regression(s) over {len(self.rows)} cell metrics.",
            f"Cells only in {self.current} (added): {', '.join(self.added_cells) or 'none'}.",
            f"Cells only in {self.baseline} (removed): {', '.join(self.removed_cells) or 'none'}.",
        ]
        warnings = (
            []
            if self.same_eval_set
            else ["The two runs used different eval sets: numbers may differ for that."]
        )
        body = page_header(title, notes, warnings)
        body += f"<h2>{escape('Regressions')}</h2>" + rows_to_html_table(self.regressions)
        body += f"<h2>{escape('Every tracked metric')}</h2>" + rows_to_html_table(self.rows)
        return document(title, body)


def compare_runs(
    current: RunRecord, baseline: RunRecord, thresholds: dict[str, float], default_threshold: float
) -> Comparison:
    """A metric regresses when it moved in its bad direction by more than its threshold."""
    rows = []
    for metric, by_cell in sorted(current.values.items()):
        higher_is_better = current.directions.get(metric, "higher") == "higher"
        threshold = thresholds.get(metric, default_threshold)
        for cell, now in sorted(by_cell.items()):
            before = baseline.values.get(metric, {}).get(cell)
            if before is None:
                continue
            worse_by = (before - now) if higher_is_better else (now - before)
            rows.append(
                {
                    "cell": cell,
                    "metric": metric,
                    "baseline": before,
                    "current": now,
                    "change": round(now - before, 6),
                    "worse_by": round(worse_by, 6),
                    "threshold": threshold,
                    "regression": worse_by > threshold,
                }
            )
    return Comparison(
        current=current.name,
        baseline=baseline.name,
        same_eval_set=current.eval_fingerprint == baseline.eval_fingerprint,
        rows=rows,
        added_cells=sorted(current.cells - baseline.cells),
        removed_cells=sorted(baseline.cells - current.cells),
    )


def comparison_text(comparison: Comparison) -> str:
    """The terminal's view: the regressions (or none), then added and removed cells."""
    lines = [f"{comparison.current} against {comparison.baseline}:"]
    if not comparison.same_eval_set:
        lines.append("WARNING: the two runs used different eval sets")
    for row in comparison.regressions:
        lines.append(
            f"REGRESSION {row['metric']} in {row['cell']}: {format_value(row['baseline'])} -> "
            f"{format_value(row['current'])} (worse by {format_value(row['worse_by'])}, "
            f"threshold {row['threshold']})"
        )
    if not comparison.regressions:
        lines.append(f"no regression over {len(comparison.rows)} cell metrics")
    lines += [f"added cell: {cell}" for cell in comparison.added_cells]
    lines += [f"removed cell: {cell}" for cell in comparison.removed_cells]
    return "\n".join(lines)
