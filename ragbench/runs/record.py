"""The gate's contract with the store: what a benchmark run writes as run-level metadata, how a run is
read back for comparison (`RunRecord`), and which runs may serve as the next run's baseline.

One module, so the writer (the results and gate steps) and the readers (`compare`, the gate, `run.py
compare`) cannot drift apart. Keys are flat and ':'-free (ZenML's metadata filters split on ':'); per-cell
numbers are `<metric>__<cell id>`, their interval bounds `<metric>_low__<cell id>` / `_high__`; the
retrieval metrics of both rankings (`first_stage_<metric>` before reranking) are written the same way but
not tracked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ragbench import __version__
from ragbench.analysis.labelled import corrected_key, is_corrected_key
from ragbench.provenance import VERSION_KEY, CodeVersion
from ragbench.scoring.metrics import LATENCY, metric_key
from ragbench.stats.inference import Test

if TYPE_CHECKING:
    from ragbench.analysis.results import ResultsTable

CELL_SEPARATOR = "__"
# Written by the gate step (and the failure hook): a run is a baseline only once its gate said "passed".
GATE_STATUS = "gate_status"
PASSED = "passed"

# What run metadata keeps of each pairwise comparison (the cases stay in the results artifact).
PAIRWISE_METADATA = {
    "candidate",
    "baseline",
    "judge",
    "wins",
    "ties",
    "losses",
    "failures",
    "win_rate",
    "win_rate_low",
    "win_rate_high",
    "sign_test_p",
    "flip_share",
}


def run_metadata(table: ResultsTable) -> dict[str, Any]:
    """Flat run-level metadata for ZenML's filters and for the gate: `<metric>__<cell id>` and
    `best_<metric>`, numbers as numbers; `metric_directions` tells `compare` which way each tracked metric
    gets worse, `configured_metrics` which metrics the config asked for (scored or not), `incomplete_cells`
    which cells could not score one of them, `judge_cards` each judge's detection of planted errors, and
    the eval and knowledge-base fingerprints what it was measured on, and the code that measured it: the
    release (`ragbench_version`), the client's commit and modified flag, the key packages' versions
    (`ragbench.provenance`; the release alone for a table made without them)."""
    flat: dict[str, Any] = table.code.metadata() if table.code is not None else {VERSION_KEY: __version__}
    # a latency that rounds to 0.0 (a fast system) is a value: tracked like any other, never "missing"
    timed = any(row.get(LATENCY.column) is not None for row in table.rows)
    tracked = [*table.headline, *([LATENCY] if timed else [])]
    flat["metric_directions"] = {
        metric_key(m.column): "higher" if m.higher_is_better else "lower" for m in tracked
    }
    flat["metric_tests"] = {metric_key(m.column): m.paired_test for m in tracked}
    flat["cell_ids"] = [row["cell"] for row in table.rows]
    flat["cells"] = len(table.rows)
    flat["incomplete_cells"] = table.incomplete
    flat["configured_metrics"] = table.configured_metrics
    flat["eval_fingerprint"] = table.eval_fingerprint
    flat["eval_set"] = table.eval_set
    flat["knowledge_base_fingerprint"] = table.knowledge_base_fingerprint
    flat["warnings"] = table.warnings
    if table.references is not None:  # each dynamic case's identity for this run, and the cases that failed
        flat["reference_digests"] = table.references.digests()
        flat["reference_failures"] = table.references.failures()
    if table.traffic is not None:  # a sample of the deployed system's traffic: the gate needs its size
        # and, for a stratified one, each case's stratum (two nights are compared stratum by stratum)
        flat["traffic_sample"] = table.traffic.model_dump(
            include={"origin", "window", "usable", "sampled", "stratum_of"}
        )
    if table.spend is not None:  # what the run sent (calls, tokens, cost, seconds) per role and its plan
        flat["spend"] = table.spend.as_metadata()
    flat["pairwise"] = [p.model_dump(include=PAIRWISE_METADATA) for p in table.pairwise]
    flat["judge_cards"] = [card.model_dump(mode="json", exclude={"verdicts"}) for card in table.judge_cards]
    if table.judge_alignments:
        flat["judge_alignment"] = [
            c.model_dump(mode="json") | {"judge": a.judge, "examples": a.examples}
            for a in table.judge_alignments
            for c in a.criteria
        ]
    for metric in tracked:
        key = metric_key(metric.column)
        scored = [
            (row[metric.column], row["cell"]) for row in table.rows if row.get(metric.column) is not None
        ]
        for value, cell in scored:
            flat[f"{key}{CELL_SEPARATOR}{cell}"] = value
        for row in table.rows:  # the interval beside each value, so compare can judge the noise
            for bound in ("low", "high"):
                if (limit := row.get(f"{metric.column}_{bound}")) is not None:
                    flat[f"{key}_{bound}{CELL_SEPARATOR}{row['cell']}"] = limit
        if scored:
            best = (max if metric.higher_is_better else min)(scored)
            flat[f"best_{key}"], flat[f"best_{key}_cell"] = best
    add_ranking_metadata(table, flat, {metric.column for metric in tracked})
    add_corrected_metadata(table, flat)
    return flat


def add_ranking_metadata(table: ResultsTable, flat: dict[str, Any], tracked: set[str]) -> None:
    """Every retrieval metric at both rankings (`first_stage_<metric>` before reranking) with its interval,
    per cell, beside the tracked ones but not tracked (the headline ones measure the ranking the reader
    reads), and what reranking changed in each reranking cell (`rerank_gains`)."""
    for metric in table.ranking:
        if metric.column in tracked:
            continue
        key = metric_key(metric.column)
        for row in table.rows:
            for suffix in ("", "_low", "_high"):
                if (value := row.get(f"{metric.column}{suffix}")) is not None:
                    flat[f"{key}{suffix}{CELL_SEPARATOR}{row['cell']}"] = value
    if table.rerank_gains:
        flat["rerank_gains"] = [gain.model_dump() for gain in table.rerank_gains]
    if table.rewrite_gains:
        flat["rewrite_gains"] = [gain.model_dump() for gain in table.rewrite_gains]


def add_corrected_metadata(table: ResultsTable, flat: dict[str, Any]) -> None:
    """Each label-corrected headline metric as a tracked metric of its own, `<metric>_corrected`, with its
    interval: the number the gate compares instead of the judge's raw mean whenever a run has it; and
    `label_correction`: per corrected key, the labels used and why the others were left out (where the
    sample ends, and why), which the gate names when a corrected value is missing."""
    correction = table.label_correction
    headline = {m.column for m in table.headline}
    if correction is not None:
        flat["label_correction"] = {
            corrected_key(metric_key(metric.column)): metric.label_use()
            for metric in correction.metrics
            if metric.column in headline
        }
        flat["label_correction_notes"] = list(correction.notes)
    for metric in correction.metrics if correction is not None else []:
        if metric.column not in headline:
            continue
        key = corrected_key(metric_key(metric.column))
        flat["metric_directions"][key] = "higher" if metric.higher_is_better else "lower"
        flat["metric_tests"][key] = "prediction_powered"
        for cell, estimate in metric.estimates.items():
            if estimate.estimate is None:
                continue
            flat[f"{key}{CELL_SEPARATOR}{cell}"] = estimate.estimate
            flat[f"{key}_low{CELL_SEPARATOR}{cell}"] = estimate.low
            flat[f"{key}_high{CELL_SEPARATOR}{cell}"] = estimate.high


def is_baseline(status: str, metadata: Mapping[str, Any], champion: bool) -> bool:
    """A run the next run may be compared with: one that completed and passed its gate, or the run a
    person promoted (how a deliberate change is accepted). A regressed, incomplete or failed run never is:
    a night whose judge was down would otherwise hand the next night a yardstick without its scores."""
    if status != "completed":
        return False
    return champion or metadata.get(GATE_STATUS) == PASSED


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
    # case id -> digest of the references this run fetched for it (`reference_from`): a case whose digest
    # differs from the baseline's is scored against a changed truth, so it is left out of the paired test
    reference_digests: dict[str, str] = {}
    reference_failures: dict[str, str] = {}  # case id -> why its reference could not be fetched
    # corrected key -> the labels it used and why others were left out (`CorrectedMetric.label_use`)
    label_correction: dict[str, dict[str, Any]] = {}
    code: CodeVersion | None = None  # the code the run ran; None for a run from before runs recorded it
    # the cases were a sample of the deployed system's traces: origin, window, usable and sampled traces
    traffic: dict[str, Any] | None = None

    @classmethod
    def from_metadata(
        cls,
        name: str,
        created: str,
        metadata: Mapping[str, Any],
        case_values: dict[str, dict[str, dict[str, float]]],
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
            eval_fingerprint=metadata.get("eval_fingerprint") or None,
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
            reference_digests=metadata.get("reference_digests") or {},
            reference_failures=metadata.get("reference_failures") or {},
            label_correction=metadata.get("label_correction") or {},
            code=CodeVersion.from_metadata(metadata),
            traffic=metadata.get("traffic_sample") or None,
        )

    def missing_reason(self, metric: str, cell: str, full: bool = False) -> str | None:
        """Why this run has no value of `metric` in `cell`, when it knows: the cell could not be scored, or
        a label-corrected metric's labels were too few or left out (said with their counts and reasons;
        `full`: with what to do, and every reason, as `label_reason` says)."""
        if (why := self.incomplete.get(cell)) is not None:
            return why
        if (use := self.label_correction.get(metric)) is not None:
            return label_reason(use, cell, full)
        if is_corrected_key(metric):
            return (
                "no labels of its criterion drawn in a sample order reached this run (none in the labels "
                "file, or none of this run's answers), so nothing corrects the judge's numbers"
            )
        return None

    @property
    def cells(self) -> set[str]:
        return set(self.grid_cells) | {cell for by_cell in self.values.values() for cell in by_cell}


def label_reason(use: Mapping[str, Any], cell: str, full: bool = False) -> str:
    """Why a label-corrected value is missing, from the run's `label_correction` metadata of its metric:
    the labels used, where the sample ends and why; `full` adds what to do there and every other reason
    labels were left out (the gate's reason; a compared row keeps the short one)."""
    ended, what_to_do = use.get("sample_ended_at"), use.get("what_to_do")
    # the sentence naming the case where the sample ends says again what `what_to_do` says
    others = [
        why for why in use.get("left_out") or [] if not (ended and what_to_do and f", {ended} (" in why)
    ]
    left_out = bool(what_to_do or others)
    parts = [
        f"{'labels were left out' if left_out else 'too few labels'}: {use.get('labels_used', 0)} label(s) "
        f"used, on {use.get('sampled_cases', 0)} of {use.get('cases', 0)} cases "
        f"({use.get('labelled_cases', 0)} case(s) labelled in a sample order)"
    ]
    if full and what_to_do:
        parts.append(what_to_do)
    elif what_to_do:
        parts.append(f"the sample ends at case {ended}: {use.get('sample_ended_because')}")
    if full and others:
        parts.append("left out: " + "; ".join(others))
    if why := (use.get("no_value") or {}).get(cell):
        parts.append(f"no corrected value: {why}")
    return "; ".join(parts)
