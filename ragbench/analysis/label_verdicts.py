"""Verdicts on label-corrected numbers: the best cell by corrected mean against every other, on the
label-corrected paired differences, with the labels alone's own comparisons beside them
(`ragbench.analysis.labelled` makes the corrected means these read)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.labelled import CorrectedMetric, LabelCorrection
from ragbench.analysis.planning import labels_needed
from ragbench.analysis.uncertainty import MetricVerdict, closest, metric_verdict
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import PairedComparison, StatisticsConfig, holm, holm_levels, verdict_of
from ragbench.stats.ppi import Estimate, Inference, labels_for_width, ppi_mean


def paired_labels(
    metric: CorrectedMetric, judge_values: Mapping[str, Mapping[str, float]], best: str, cell: str
) -> tuple[list[str], list[float], list[float]]:
    """The cases both cells were judged on, and on each the judge's difference cell - best and the person's
    (NaN where either answer is unlabelled): what a label-corrected comparison, or its plan, is made of."""
    shared = [case for case in judge_values[best] if case in judge_values[cell]]
    judge = [judge_values[cell][case] - judge_values[best][case] for case in shared]
    mine, theirs = metric.label_values.get(cell, {}), metric.label_values.get(best, {})
    person = [mine[case] - theirs[case] if case in mine and case in theirs else math.nan for case in shared]
    return shared, judge, person


class CorrectedComparisons(BaseModel):
    """The best cell by corrected mean against every other: the comparisons the verdict is read from (each
    difference the narrower of label-corrected and labels alone, `Estimate`), and the labels alone's own
    comparisons beside them, Holm-corrected the same way, so a user sees what the labels say by themselves."""

    best: str
    comparisons: list[PairedComparison]
    labels_alone: list[PairedComparison]
    differences: dict[str, Estimate]  # cell id -> its difference from the best


def corrected_comparisons(
    metric: CorrectedMetric,
    judge_values: Mapping[str, Mapping[str, float]],
    *,
    min_labels: int,
    settings: StatisticsConfig,
) -> CorrectedComparisons | None:
    """The best cell by corrected mean against every other, on the label-corrected paired differences
    (judge differences corrected by label differences on the sampled cases both answered), Holm-corrected;
    each adjusted interval is read at the level `holm_levels` gives, so it excludes zero exactly when the
    verdict is not tied. None with fewer than two cells with a corrected mean, or when a difference has
    too few paired labels for an interval (the judge-only verdict stands, and the report says why)."""
    means = {cell: e.estimate for cell, e in metric.estimates.items() if e.estimate is not None}
    if len(means) < 2:
        return None
    sign = -1.0 if metric.higher_is_better else 1.0
    best = min(sorted(means), key=lambda cell: sign * means[cell])
    bounds = None
    if metric.value_range is not None:
        low, high = metric.value_range
        bounds = (low - high, high - low)
    differences: dict[str, Estimate] = {}
    for cell in sorted(means):
        if cell == best:
            continue
        shared, judge, person = paired_labels(metric, judge_values, best, cell)
        estimate = ppi_mean(
            judge,
            person,
            metric.probabilities_of(shared),
            confidence=settings.confidence,
            min_labels=min_labels,
            bounds=bounds,
            step=metric.value_step,
        )
        if estimate.estimate is None:
            return None
        differences[cell] = estimate
    used = {cell: d.used for cell, d in differences.items()}
    alone = {cell: d.labels_only for cell, d in differences.items()}
    return CorrectedComparisons(
        best=best,
        comparisons=_holm_family(used, differences, best, metric.higher_is_better, settings),
        labels_alone=_holm_family(alone, differences, best, metric.higher_is_better, settings),
        differences=differences,
    )


def _holm_family(
    inferences: Mapping[str, Inference | None],
    differences: Mapping[str, Estimate],
    best: str,
    higher_is_better: bool,
    settings: StatisticsConfig,
) -> list[PairedComparison]:
    """Each cell's difference from the best as one estimator gives it, tested and Holm-corrected over the
    cells, each adjusted interval read at the level Holm tests it at."""
    cells = [cell for cell, inference in inferences.items() if inference is not None]
    p_values = [inferences[cell].p_value(0.0) for cell in cells]  # type: ignore[union-attr]
    comparisons = []
    for cell, p_value, p_holm, level in zip(
        cells, p_values, holm(p_values), holm_levels(p_values, settings.alpha), strict=True
    ):
        inference = inferences[cell]
        assert inference is not None
        low, high = inference.interval_at(1 - settings.confidence)
        adjusted_low, adjusted_high = inference.interval_at(level)
        corrected = inference is differences[cell].corrected_fit and differences[cell].judge_used
        comparisons.append(
            PairedComparison(
                candidate=cell,
                reference=best,
                n=differences[cell].answers,
                difference=inference.estimate,
                low=low,
                high=high,
                p_value=p_value,
                p_holm=p_holm,
                test="prediction_powered" if corrected else "labels_alone",
                verdict=verdict_of(
                    inference.estimate, p_holm, alpha=settings.alpha, higher_is_better=higher_is_better
                ),
                family=len(cells),
                adjustment="holm",
                adjusted_confidence=1 - level,
                adjusted_low=adjusted_low,
                adjusted_high=adjusted_high,
            )
        )
    return comparisons


def corrected_verdicts(
    correction: LabelCorrection,
    headline: Sequence[MetricInfo],
    case_values: Mapping[str, Mapping[str, Mapping[str, float]]],
    names: Mapping[str, str],
    *,
    min_labels: int,
    settings: StatisticsConfig,
) -> tuple[dict[str, MetricVerdict], list[str]]:
    """column -> the verdict on the corrected numbers, for each headline metric with enough paired labels;
    and, for the others, why their judge-only verdict stands."""
    verdicts, why = {}, []
    for metric in headline:
        corrected = correction.of(metric.column)
        if corrected is None:
            continue
        values = {cell: v[metric.column] for cell, v in case_values.items() if v.get(metric.column)}
        found = corrected_comparisons(corrected, values, min_labels=min_labels, settings=settings)
        if found is None:
            why.append(
                f"{metric.label}: too few paired labels (under {min_labels} per comparison) to correct the "
                "verdicts: they are the judge's alone"
            )
            continue
        best, comparisons, differences = found.best, found.comparisons, found.differences
        runner_up = closest(comparisons, metric.higher_is_better)
        needed = to_detect = None
        if runner_up is not None and runner_up.verdict == "tied":
            needed = labels_for_width(differences[runner_up.candidate], correction.target_width)
        if runner_up is not None and settings.detect is not None and not corrected.weighted:
            _, judge, person = paired_labels(corrected, values, best, runner_up.candidate)
            to_detect = labels_needed(
                judge,
                person,
                answers=len(judge),
                difference=settings.detect,
                alpha=settings.alpha,
                power=settings.power,
                comparisons=len(comparisons),
                min_labels=min_labels,
            )
        verdicts[metric.column] = metric_verdict(
            metric,
            best,
            comparisons,
            names,
            cases_needed=None,
            corrected=True,
            labels_needed=needed,
            labels_to_detect=to_detect,
            weighted_labels=corrected.weighted,
            detect=settings.detect,
            labels_alone=found.labels_alone,
            label_cases=corrected.cases,
        )
    return verdicts, why
