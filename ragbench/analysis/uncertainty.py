"""How far a run's numbers can be trusted, computed from per-case values, never from other means.

Each metric of each cell gets an interval; on each headline metric the best cell is tested, paired
case by case, against every other cell (cells with the same values once, Holm-corrected over the
distinct comparisons), which names the cells tied with the best; and
from the paired differences of the top two cells come an estimate of how many cases would tell them
apart and the plan of what the comparison could detect (`ragbench.analysis.planning`), both for the test
and the Holm family the verdict was read in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ragbench.analysis.planning import DetectionPlan, PlannedTest, cases_needed, is_binary, plan
from ragbench.inputs.traces import TraceReading
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.formatting import interval_text
from ragbench.stats.inference import (
    PairedComparison,
    StatisticsConfig,
    compare_to_best,
    tie_set,
)
from ragbench.stats.intervals import Interval
from ragbench.stats.ppi import labels_plan_text
from ragbench.stats.strata import by_stratum, stratified_mean

TEST_NAMES: dict[str, str] = {
    "paired_permutation": "paired permutation test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "prediction_powered": "label-corrected (prediction-powered) t-test",
    "labels_alone": "labels-alone t-test (the judge would have widened this interval)",
    "betting": "betting test on the metric's scale",
}

# column -> case id -> value, for one cell
CaseValues = dict[str, dict[str, float]]


def with_intervals(
    row: dict,
    values: CaseValues,
    settings: StatisticsConfig,
    metrics: Mapping[str, MetricInfo],
    traffic: TraceReading | None = None,
) -> dict:
    """`<column>_low` and `<column>_high` beside every column that has per-case values, each by its
    metric's scale (`metrics`: column -> its metric; a column without one is taken as unbounded). Under
    `MIN_CASES` cases there is no interval, and `<column>_cases` says how few there were. Cases that are
    traces sampled by stratum at unequal rates (`traffic`) are weighted instead (`weighted_by_strata`)."""
    if traffic is not None and traffic.weighted:
        return weighted_by_strata(row, values, traffic, settings, metrics)
    out = dict(row)
    for column, by_case in values.items():
        interval = column_interval(column, list(by_case.values()), settings, metrics)
        if interval is None:
            continue
        if interval.low is None or interval.high is None:
            out.setdefault(f"{column}_cases", interval.n)
        else:
            out[f"{column}_low"], out[f"{column}_high"] = round(interval.low, 4), round(interval.high, 4)
    return out


def weighted_by_strata(
    row: dict,
    values: CaseValues,
    reading: TraceReading,
    settings: StatisticsConfig,
    metrics: Mapping[str, MetricInfo],
) -> dict:
    """A row of a stratified sample drawn at unequal rates (`TraceReading.weighted`): every column with
    per-case values becomes its strata's means weighted by their shares of the window, with the interval
    `ragbench.stats.strata.stratified_mean` makes. The plain mean of the sample would over-count the
    strata sampled more often."""
    out = dict(row)
    shares = reading.shares()
    census = {stratum.name for stratum in reading.strata if stratum.sampled == stratum.usable}
    for column, by_case in values.items():
        metric = metrics.get(column) or MetricInfo(column=column, label=column, higher_is_better=True)
        grouped = by_stratum(by_case, reading.stratum_of)

        def interval_at(found: Sequence[float], level: float, metric: MetricInfo = metric) -> Interval | None:
            return metric.interval(found, settings.model_copy(update={"confidence": level}))

        weighted = stratified_mean(grouped, shares, census, interval_at, settings.confidence, metric.bounds)
        if weighted is None:
            continue
        out[column] = round(weighted.mean, 4)
        if weighted.too_few:
            out.setdefault(f"{column}_cases", weighted.n)
        else:
            out[f"{column}_low"], out[f"{column}_high"] = round(weighted.low, 4), round(weighted.high, 4)  # type: ignore[arg-type]
    return out


def column_interval(
    column: str, values: Sequence[float], settings: StatisticsConfig, metrics: Mapping[str, MetricInfo]
) -> Interval | None:
    """The interval of a column's mean by its metric's scale, unbounded when no metric declares it."""
    metric = metrics.get(column) or MetricInfo(column=column, label=column, higher_is_better=True)
    return metric.interval(values, settings)


class MetricVerdict(BaseModel):
    """The best cell on one headline metric against every other cell, paired on the cases both scored."""

    column: str
    label: str
    higher_is_better: bool
    best: str  # cell id
    comparisons: list[PairedComparison]  # candidate and reference are cell ids
    tied: list[str]  # the best and every cell not told apart from it (cell ids)
    runner_up: str | None
    # to separate best and runner-up at their observed difference (statistics.power, Holm's strictest level)
    cases_needed: int | None
    names: dict[str, str] = {}  # cell id -> its label, for people
    # the comparisons are of label-corrected estimates (`ragbench.analysis.labelled`), not the judge's means
    corrected: bool = False
    labels_needed: int | None = None  # labelled cases in all for the top two's difference within target_width
    # what the top two's comparison could detect on its cases, planned from their own differences
    plan: DetectionPlan | None = None
    # label-corrected: labelled cases in all the top two's comparison needs to detect `detect` (a simple
    # random sample; None: no number of labels would, or the sample is weighted, which is not planned)
    labels_to_detect: int | None = None
    weighted_labels: bool = False
    detect: float | None = None  # statistics.detect, the difference the labels are planned for
    # label-corrected: the labels alone's own comparisons with the same best, shown beside the verdict's
    labels_alone: list[PairedComparison] = []
    label_cases: int | None = None  # cases the labels are drawn from: no plan can label more

    @property
    def title(self) -> str:
        return f"{self.label} (label-corrected)" if self.corrected else self.label

    def name(self, cell: str) -> str:
        return self.names.get(cell, cell)

    def comparison_of(self, cell: str) -> PairedComparison | None:
        """The comparison that speaks for `cell` (cells with the same values share one); None for the best."""
        return next((c for c in self.comparisons if cell in c.cells), None)

    @property
    def runner_up_comparison(self) -> PairedComparison | None:
        return self.comparison_of(self.runner_up) if self.runner_up else None

    @property
    def pilot_cell(self) -> str | None:
        """The cell whose per-case differences from the best a plan is made from: the runner-up, else
        (every other cell has the best's mean) the first that differs on some case; None when every
        other cell has exactly the best's values."""
        if self.runner_up is not None:
            return self.runner_up
        return next((c.candidate for c in self.comparisons if not c.identical), None)

    @property
    def twins(self) -> list[str]:
        """Cells with exactly the best's values on every case: as good as the best, not tested against it."""
        return [cell for c in self.comparisons if c.identical for cell in c.cells]

    def together(self, cells: Sequence[str]) -> str:
        """Cells with the same values on every case, named as one: "a = b (same values on every case)"."""
        text = " = ".join(self.name(cell) for cell in cells)
        return text + " (same values on every case)" if len(cells) > 1 else text

    def sentence(self) -> str:
        """The decision in plain words, e.g. for the terminal summary; for a label-corrected one, what the
        labels alone say beside it."""
        return self._decision() + self.labels_alone_sentence()

    def _decision(self) -> str:
        """Cells with the same values on every case (e.g. two rerank settings sharing one retrieval) are
        named together: they are one comparison, and the best's twins are no runner-up, there is nothing
        to tell apart."""
        best_name = self.name(self.best)
        if not self.comparisons:
            return f"{self.title}: only {best_name} has a value."
        twins = self.twins
        best = self.together([self.best, *twins])
        if len(twins) > 3:
            best = f"{best_name} (and {len(twins)} cell(s) with the same values on every case)"
        versus = self.runner_up_comparison
        if versus is None:
            others = sum(len(c.cells) for c in self.comparisons)
            what = "score the same on all" if len(twins) == others else "have the same mean on"
            n = self.comparisons[0].n
            return f"{self.title}: {best_name} and {others} other cell(s) {what} {n} case(s)."
        runner_up = self.together(versus.cells)
        if versus.verdict != "tied":
            return (
                f"{self.title}: {best} is better than every other cell (runner-up {runner_up}: "
                f"{difference_text(versus)}; p={versus.p_holm:.3g} after Holm, {versus.n} case(s))."
            ) + self.plan_sentence()
        tied = [c for c in self.comparisons if c.verdict == "tied" and not c.identical and c.difference != 0]
        count = sum(len(c.cells) for c in tied)
        names = ", ".join(self.together(c.cells) for c in tied) if count <= 3 else "listed in the report"
        text = (
            f"{self.title}: {best} tied with {count} other cell(s) ({names}) on {versus.n} case(s); "
            f"closest {runner_up}: {difference_text(versus)}"
        )
        if self.labels_needed is not None:
            return (
                f"{text}; {self.labels_plan(self.labels_needed)} would bring that difference's interval "
                "under the target width."
            ) + self.plan_sentence()
        if self.cases_needed is None:
            return text + "." + self.plan_sentence()
        return (
            f"{text}; about {self.cases_needed} cases would tell them apart if the difference is real."
            + self.plan_sentence()
        )

    def labels_plan(self, needed: int) -> str:
        """`about 40 labelled cases in all`, or that the eval set is too small for it."""
        if self.label_cases is None:
            return f"about {needed} labelled cases in all"
        return labels_plan_text(needed, self.label_cases)

    def labels_alone_sentence(self) -> str:
        """For a label-corrected verdict: the labels alone's own verdict on the same runner-up, and which
        of the two decides."""
        if not self.corrected or self.runner_up is None:
            return ""
        theirs = next((c for c in self.labels_alone if self.runner_up in c.cells), None)
        if theirs is None:
            return ""
        ours = self.runner_up_comparison
        corrected = ours is not None and ours.test == "prediction_powered"
        how = "the label-corrected" if corrected else "the labels-alone"
        return (
            f" Labels alone: {self.name(theirs.candidate)} {difference_text(theirs)}, {theirs.verdict}"
            f" (p={theirs.p_holm:.3g} after Holm). The verdict is {how} difference's, the narrower of "
            "the two."
        )

    def plan_sentence(self) -> str:
        """` Planned from the top two's differences: on 50 cases the paired test detects ...`; for a
        label-corrected verdict with `statistics.detect`, the labels that difference needs; or nothing."""
        if self.corrected and self.detect is not None:
            if self.weighted_labels:
                return (
                    f" Labels to detect a difference of {self.detect:g} are not planned for a weighted "
                    "(uncertainty-first) sample."
                )
            if self.labels_to_detect is None:
                return f" Even labelling every case would not detect a difference of {self.detect:g}."
            return (
                f" {self.labels_plan(self.labels_to_detect).capitalize()} (a simple random sample) would "
                f"detect a difference of {self.detect:g} with the label-corrected test."
            )
        if self.plan is None:
            return ""
        return f" Planned from the top two's differences: {self.plan.text()}."


def difference_text(comparison: PairedComparison) -> str:
    """A difference with the interval its verdict can be read against (adjusted for the number of
    comparisons) first, named for how it was adjusted, and the unadjusted one labelled as such, so the
    two are not mistaken for one another. Comparisons stored before Holm-level intervals keep their old
    wording (their adjusted interval was a bootstrap at Bonferroni's level), and those stored before
    adjusted intervals existed show the unadjusted one alone."""
    c = comparison
    unadjusted = interval_text(c.low, c.high, digits=3, significant=True)
    if c.adjusted_low is None or c.adjusted_high is None or c.family is None:
        return f"{c.difference:+.3g} {unadjusted} unadjusted"
    how = (
        f"adjusted (Holm, {c.family} comparison(s))"
        if c.adjustment == "holm"
        else f"adjusted for {c.family} comparison(s)"
    )
    adjusted = interval_text(c.adjusted_low, c.adjusted_high, digits=3, significant=True)
    return f"{c.difference:+.3g} {adjusted} {how}; unadjusted {unadjusted}"


def compare_cells(
    headline: Sequence[MetricInfo],
    values_by_cell: Mapping[str, CaseValues],
    settings: StatisticsConfig,
    names: Mapping[str, str] | None = None,
    best_of: Mapping[str, str] | None = None,
) -> list[MetricVerdict]:
    """One verdict per headline metric that at least two cells have values for; cells by id (`names`:
    their labels, for people; `best_of`: column -> the cell that is the best on it, chosen elsewhere)."""
    verdicts = []
    for metric in headline:
        values = {cell: v[metric.column] for cell, v in values_by_cell.items() if v.get(metric.column)}
        compared = compare_to_best(
            values,
            higher_is_better=metric.higher_is_better,
            alpha=settings.alpha,
            seed=settings.seed,
            resamples=settings.resamples,
            confidence=settings.confidence,
            best=(best_of or {}).get(metric.column),
        )
        if compared is None:
            continue
        best, comparisons = compared
        runner_up = closest(comparisons, metric.higher_is_better)
        needed, planned = None, None
        if runner_up is not None:
            differences, binary = top_two_differences(values, best, runner_up.candidate)
            test = PlannedTest.of(settings, max(1, runner_up.family or 1), binary=binary)  # Holm's family
            needed = cases_needed(differences, test)
            planned = plan(differences, runner_up.n, test, detect=settings.detect)
        verdicts.append(
            metric_verdict(metric, best, comparisons, names or {}, cases_needed=needed, plan=planned)
        )
    return verdicts


def top_two_differences(
    values: Mapping[str, Mapping[str, float]], best: str, runner_up: str
) -> tuple[list[float], bool]:
    """runner-up - best on the cases both scored (`values`: cell -> case id -> value), the pilot a plan
    is made from, and whether the metric is binary (every value 0 or 1), which `plan` models apart."""
    shared = [case for case in values[best] if case in values[runner_up]]
    differences = [values[runner_up][case] - values[best][case] for case in shared]
    return differences, is_binary(*(values[cell].values() for cell in (best, runner_up)))


def metric_verdict(
    metric: MetricInfo,
    best: str,
    comparisons: list[PairedComparison],
    names: Mapping[str, str],
    **fields: object,
) -> MetricVerdict:
    """The verdict on `metric` of `best` against `comparisons`, its runner-up the closest cell; `fields`:
    how many cases or labels would tell the top two apart, and whether the numbers are label-corrected."""
    runner_up = closest(comparisons, metric.higher_is_better)
    return MetricVerdict(
        column=metric.column,
        label=metric.label,
        higher_is_better=metric.higher_is_better,
        best=best,
        comparisons=comparisons,
        tied=tie_set(best, comparisons),
        runner_up=runner_up.candidate if runner_up else None,
        names=dict(names),
        **fields,
    )


def closest(comparisons: Sequence[PairedComparison], higher_is_better: bool) -> PairedComparison | None:
    """The runner-up: the other cell whose paired difference from the best is smallest but not zero (of
    cells with the same values, the one named first)."""
    differing = [c for c in comparisons if c.difference != 0]
    if not differing:
        return None
    return min(differing, key=lambda c: (-c.difference if higher_is_better else c.difference, c.candidate))
