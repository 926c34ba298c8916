"""A run's judged metrics corrected by a person's labels (`evaluation.label_correction`).

For every rubric criterion with labels drawn as a sample (`ragbench.review.sampling`), each cell's mean gets
a prediction-powered estimate beside the judge-only and the labels-only mean, and the comparisons between
cells are made on the corrected numbers: the paired, label-corrected difference of each cell from the best,
Holm-corrected, each verdict read off an interval made by inverting its own t-test.

What is left out is said, never mixed in: labels given in a non-random order (they grade the judge, in
agreement and alignment, but are no sample), labels of another sample plan, of answers this run does not
contain, or drawn from a run whose verdicts (hence weights) differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.inputs.eval_cases import EvalCase
from ragbench.inputs.traces import TraceReading
from ragbench.review.labels import Label, ReviewLabels, text_sha
from ragbench.review.queue import answer_items
from ragbench.review.sampling import DrawnSample, SamplePlan, case_weights, labelled_sample
from ragbench.scoring.metrics import MetricInfo, metric_key
from ragbench.scoring.registry import LabelCorrectionConfig, Scoring
from ragbench.scoring.rubrics import Criterion, Rubric
from ragbench.stats.ppi import Estimate, judge_ceiling, labels_for_width, ppi_mean
from ragbench.stats.strata import by_stratum, stratified_estimate


def corrected_key(key: str) -> str:
    """The column (and tracked key) of a metric's label-corrected estimate."""
    return f"{key}_corrected"


def is_corrected_key(key: str) -> bool:
    """Whether `key` names a label-corrected estimate (`corrected_key` of some metric)."""
    return key.endswith(corrected_key(""))


def corrected_keys(
    headline: Sequence[MetricInfo], scoring: Scoring, config: LabelCorrectionConfig | None
) -> list[str]:
    """The tracked keys label correction asks for: every judged headline metric's corrected twin (a metric
    whose labels are all gone is then missing in the gate, never silently dropped)."""
    if config is None:
        return []
    judged = {criterion.column for rubric in scoring.rubrics for criterion in rubric.criteria}
    return [corrected_key(metric_key(m.column)) for m in headline if m.column in judged]


# why the sample ends at a case that holds no label of this run's answers at all
NOT_LABELLED = "it is not labelled"


class CorrectedMetric(BaseModel):
    """One judged metric corrected by labels: an estimate per cell, and what was left out."""

    column: str
    label: str
    rubric: str
    criterion: str
    higher_is_better: bool
    plan: str
    weighted: bool
    sampled_cases: int  # cases in the labelled sample
    cases: int  # cases it was drawn from
    estimates: dict[str, Estimate]  # cell id -> corrected mean
    labels_needed: dict[str, int | None] = {}  # cell id -> labels in all for an interval under target_width
    ceiling: float | None = None  # the most labels one judge verdict can be worth (1 / (1 - rho^2))
    value_range: tuple[float, float] | None = None  # where a case value lies: shapes every interval
    value_step: float | None = None  # the step between neighbouring label values
    left_out: list[str] = []  # why some labels are not in the sample, one sentence each
    # how many labels the estimates rest on, and where the sample ends and why (what the terminal and the
    # run's metadata say beside the numbers, and the gate when a corrected value is missing)
    labels_used: int = 0  # labelled answers in the sample
    labelled_cases: int = 0  # cases with a label of this criterion drawn in a sample order (any plan)
    sample_ended_at: str | None = None  # the first case of the plan's order not labelled (None: a census)
    sample_ended_because: str = ""  # why that case does not count as labelled
    labelled_after_end: int = 0  # usable labelled cases after it, left out until it is labelled
    # what the estimates are made of, so each traces back to its cases (and the gate can pair two runs)
    probabilities: dict[str, float] = {}  # sampled case id -> its inclusion probability
    label_values: dict[str, dict[str, float]] = {}  # cell id -> sampled case id -> the person's value

    def probabilities_of(self, cases: Sequence[str]) -> list[float] | None:
        """Each case's inclusion probability for a weighted sample (1 where unlabelled: never read);
        None for a uniform one, which PPI++ treats as a simple random sample."""
        return [self.probabilities.get(case, 1.0) for case in cases] if self.weighted else None

    def ended_sentence(self) -> str | None:
        """Where the sample ends and what to do there, when labelled cases are left out after it (or the
        case holds a label that does not count); None when nothing waits on it."""
        case, because = self.sample_ended_at, self.sample_ended_because
        if case is None or (not self.labelled_after_end and because == NOT_LABELLED):
            return None
        after = self.labelled_after_end
        use = f" to use the {after} labelled case(s) after it" if after else ""
        if because == NOT_LABELLED:
            return (
                f"the sample ends at case {case}: {because}; label it on the review page (it is asked "
                f"next){use}"
            )
        if because.startswith("only "):
            return (
                f"the sample ends at case {case}: {because}; label the rest on the review page (they are "
                f"asked next){use}"
            )
        return (
            f"the sample ends at case {case}: {because}; label it again on the review page (it is asked "
            f"next){use}"
        )

    def label_use(self) -> dict:
        """How many labels the estimates use and why the others are left out, for the run's metadata."""
        return {
            "plan": self.plan,
            "labels_used": self.labels_used,
            "labelled_cases": self.labelled_cases,
            "sampled_cases": self.sampled_cases,
            "cases": self.cases,
            "left_out": list(self.left_out),
            "sample_ended_at": self.sample_ended_at,
            "sample_ended_because": self.sample_ended_because,
            "labelled_after_end": self.labelled_after_end,
            "what_to_do": self.ended_sentence(),
            "no_value": {cell: e.why_no_interval for cell, e in self.estimates.items() if e.estimate is None},
        }

    def lines(self, names: Mapping[str, str] | None = None) -> list[str]:
        """The terminal's account: the labels used, where the sample ends, what was left out and why, the
        cells left without a corrected value, and those whose numbers are the labels alone (named so)."""
        names = names or {}
        lines = [
            f"{self.label} (sample plan {self.plan}): {self.labels_used} label(s) used, on "
            f"{self.sampled_cases} of {self.cases} cases; {self.labelled_cases} case(s) labelled in a sample "
            "order"
        ]
        if (ended := self.ended_sentence()) is not None:
            lines.append(f"  {ended[0].upper()}{ended[1:]}")
        lines += [f"  Left out: {why}" for why in self.left_out]
        lines += [
            f"  No corrected value for {names.get(cell, cell)} ({e.why_no_interval}): its numbers are the "
            "judge's alone"
            for cell, e in self.estimates.items()
            if e.estimate is None
        ]
        lines += [
            f"  {names.get(cell, cell)}: {e.text()}; {e.judge_note}"
            for cell, e in self.estimates.items()
            if e.judge_note
        ]
        return lines


class LabelCorrection(BaseModel):
    """Every corrected metric of a run, and the labels that could not be used, said in words."""

    metrics: list[CorrectedMetric] = []
    notes: list[str] = []
    target_width: float = 0.2

    def of(self, column: str) -> CorrectedMetric | None:
        return next((m for m in self.metrics if m.column == column), None)

    def columns(self, cell: str) -> dict[str, float | int | None]:
        """A results row's corrected columns: `<metric>_corrected` with its interval and `<metric>_labels`."""
        row: dict[str, float | int | None] = {}
        for metric in self.metrics:
            if (estimate := metric.estimates.get(cell)) is None:
                continue
            row[f"{metric.column}_labels"] = estimate.labels
            column = corrected_key(metric.column)
            row[column] = _rounded(estimate.estimate)
            row[f"{column}_low"], row[f"{column}_high"] = _rounded(estimate.low), _rounded(estimate.high)
        return row


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def correct_with_labels(
    labels: ReviewLabels,
    *,
    records: Sequence,
    cases: Sequence[EvalCase],
    judge_of_cell: Mapping[str, str],
    rubrics: Sequence[Rubric],
    judge_values: Mapping[str, Mapping[str, Mapping[str, float]]],
    config: LabelCorrectionConfig,
    confidence: float,
    traffic: TraceReading | None = None,
) -> LabelCorrection:
    """Every labelled criterion of `rubrics`, corrected. `records`: the run's `CaseRecord`s;
    `judge_values`: cell id -> column -> case id -> the judge's value (the run's per-case values);
    `traffic`: how traces were sampled, when the cases are traces (a stratified sample drawn at unequal
    rates is corrected stratum by stratum and weighted, `ragbench.stats.strata.stratified_estimate`)."""
    metrics, notes = [], []
    for rubric in rubrics:
        items = answer_items(records, cases, judge_of_cell, rubric)
        for criterion in rubric.criteria:
            given = labels.of(rubric.name, criterion.name)
            if not given:
                continue
            unsampled = [label for label in given if label.sample is None]
            if unsampled:
                notes.append(
                    f"{len(unsampled)} label(s) of {criterion.label} were given in a non-random order: they "
                    "grade the judge (agreement, alignment) but are no sample, so the corrected numbers "
                    "leave them out"
                )
            sampled = [label for label in given if label.sample is not None]
            if not sampled:
                continue
            mine = [item for item in items if item.criterion == criterion.name]
            metric = _corrected_metric(
                rubric,
                criterion,
                sampled,
                mine,
                records,
                judge_values,
                config,
                confidence,
                unsampled,
                traffic,
            )
            if metric is not None:
                metrics.append(metric)
    return LabelCorrection(metrics=metrics, notes=notes, target_width=config.target_width)


def _corrected_metric(
    rubric: Rubric,
    criterion: Criterion,
    sampled: Sequence[Label],
    items: Sequence,
    records: Sequence,
    judge_values: Mapping[str, Mapping[str, Mapping[str, float]]],
    config: LabelCorrectionConfig,
    confidence: float,
    unsampled: Sequence[Label] = (),
    traffic: TraceReading | None = None,
) -> CorrectedMetric | None:
    by_plan: dict[str, list[Label]] = {}
    for label in sampled:
        by_plan.setdefault(label.sample.plan, []).append(label)  # type: ignore[union-attr]
    plan_name = max(sorted(by_plan), key=lambda name: len(by_plan[name]))
    plan = SamplePlan.parse(plan_name)
    left_out = [
        f"{len(others)} label(s) drawn in another sample plan ({name}) than the one used ({plan_name})"
        for name, others in sorted(by_plan.items())
        if name != plan_name
    ]
    weights = case_weights(items, plan.weighting)
    answers_of_case: dict[str, set[str]] = {}
    for item in items:
        answers_of_case.setdefault(item.input.case_id, set()).add(item.answer_sha)
    value: dict[tuple[str, str], float] = {}
    foreign = redrawn = 0
    not_counted: dict[str, str] = {}  # case id -> why a label of it does not count (the first reason)
    for label in by_plan[plan_name]:
        if label.answer_sha not in answers_of_case.get(label.case_id, set()):
            foreign += 1
            not_counted.setdefault(label.case_id, "its label is of an answer this run does not contain")
        elif not math.isclose(label.sample.weight, weights[label.case_id], rel_tol=1e-9):  # type: ignore[union-attr]
            redrawn += 1
            not_counted.setdefault(
                label.case_id, "its label was drawn with weights this run's verdicts do not give"
            )
        else:
            value[(label.case_id, label.answer_sha)] = criterion.case_value(label.value)
    for name, others in sorted(by_plan.items()):
        for label in others if name != plan_name else []:
            not_counted.setdefault(label.case_id, f"its label was drawn in another sample plan ({name})")
    for label in unsampled:
        not_counted.setdefault(label.case_id, "its label was given in a non-random order (no sample)")
    if foreign:
        left_out.append(
            f"{foreign} label(s) of answers this run does not contain (changed answers, or another run)"
        )
    if redrawn:
        left_out.append(
            f"{redrawn} label(s) drawn with weights this run's verdicts do not give (drawn from another run)"
        )
    sample = labelled_sample(items, lambda item: (item.input.case_id, item.answer_sha) in value, plan)
    partial = [
        case
        for case, shas in answers_of_case.items()
        if 0 < sum((case, s) in value for s in shas) < len(shas)
    ]
    ended_because = ""
    if (ended := sample.ended_at) is not None:
        shas = answers_of_case.get(ended, set())
        done = sum((ended, sha) in value for sha in shas)
        ended_because = not_counted.get(ended, NOT_LABELLED)
        if done:  # some of its answers count: the rest are asked next
            why = f" ({ended_because})" if ended in not_counted else ""
            ended_because = f"only {done} of its {len(shas)} answers are labelled{why}"
    if sample.left_out:
        left_out.append(
            f"{len(sample.left_out)} labelled case(s) after the first unlabelled case of the plan's order, "
            f"{ended} ({ended_because}), where the sample ends (label it on the review page to use them)"
        )
    if partial:
        left_out.append(f"{len(partial)} case(s) with some but not all of their answers labelled")
    label_values = _label_values(records, criterion, value, sample)
    estimates, needed, pairs = {}, {}, ([], [])
    for cell, by_column in judge_values.items():
        judged = by_column.get(criterion.column)
        if not judged or cell not in label_values:
            continue
        cases = list(judged)

        def corrected(cases: list[str], level: float, cell: str = cell, judged: dict = judged) -> Estimate:
            return ppi_mean(
                [judged[case] for case in cases],
                [label_values[cell].get(case, math.nan) for case in cases],
                sample.probabilities_of(cases),
                confidence=level,
                min_labels=config.min_labels,
                bounds=criterion.value_range,
                step=criterion.value_step,
            )

        if traffic is not None and traffic.weighted:  # strata drawn at unequal rates: each corrected alone
            strata = by_stratum({case: case for case in cases}, traffic.stratum_of)
            level = 1 - (1 - confidence) / len(strata)
            parts = {name: corrected(found, level) for name, found in strata.items()}
            estimates[cell] = stratified_estimate(parts, traffic.shares(), criterion.value_range, confidence)
        else:
            estimates[cell] = corrected(cases, confidence)
        needed[cell] = labels_for_width(estimates[cell], config.target_width)
        for case, y in label_values[cell].items():
            if case in judged:
                pairs[0].append(judged[case])
                pairs[1].append(y)
    if not estimates:
        return None
    return CorrectedMetric(
        column=criterion.column,
        label=criterion.label,
        rubric=rubric.name,
        criterion=criterion.name,
        higher_is_better=criterion.higher_is_better,
        plan=plan_name,
        weighted=not sample.uniform,
        sampled_cases=len(sample.probabilities),
        cases=sample.cases,
        estimates=estimates,
        labels_needed=needed,
        ceiling=judge_ceiling(*pairs),
        value_range=criterion.value_range,
        value_step=criterion.value_step,
        left_out=left_out,
        probabilities=sample.probabilities,
        label_values=label_values,
        labels_used=sum(case in sample.probabilities for case, _ in value),
        labelled_cases=len({label.case_id for label in sampled}),
        sample_ended_at=sample.ended_at,
        sample_ended_because=ended_because,
        labelled_after_end=len(sample.left_out),
    )


def _label_values(
    records: Sequence, criterion: Criterion, value: Mapping[tuple[str, str], float], sample: DrawnSample
) -> dict[str, dict[str, float]]:
    """cell id -> sampled case id -> the person's value of that cell's answer (on the metric's scale)."""
    found: dict[str, dict[str, float]] = {}
    for record in records:
        found.setdefault(record.cell, {})
        answer = record.answer.answer
        if answer is None or record.case_id not in sample.probabilities:
            continue
        if (key := (record.case_id, text_sha(answer))) in value:
            found[record.cell][record.case_id] = value[key]
    return found
