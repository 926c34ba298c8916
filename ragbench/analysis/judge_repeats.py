"""How repeatable a judge's verdicts are, from its repeats (`ragbench.scoring.repeats`): per judge, cell
and criterion, the flip rate at the pass threshold, the share of answers whose verdicts straddle it, the
position effect (reordered against identical repeats) and the variance the judge adds to the cell's mean.

The flip rate is averaged per answer first (the share of an answer's repeats whose pass/fail differs from
its first verdict), then over answers: an answer's repeats are not independent of one another, the
answers are, so the interval is over answers (betting, on the 0-1 scale; `ragbench.stats.intervals`).

A cell's interval with repeats (`with_judge_variance`): the case interval's half-widths and the judge's
share of the mean's variance added in quadrature, z^2 * (mean within-answer variance) / n. The case
interval is a guarantee for the mean of one verdict per case; a rerun of the same judge on the same
answers moves the mean by about that much again, which the case interval does not show. Averaging each
case's repeats before the interval was the other choice, but only the sampled answers have repeats, so
the cell's mean would mix averaged and single verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, variance

from pydantic import BaseModel

from ragbench.analysis.judge_card import PASS_AT, passed
from ragbench.grid.cell import CellSpec
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import Scale
from ragbench.stats.inference import StatisticsConfig
from ragbench.stats.intervals import CONFIDENCE, Interval, mean_interval


@dataclass(frozen=True)
class RepeatedAnswer:
    """One answer's first verdict and its repeats' scores, each marked reordered or identical."""

    case_id: str
    first: int
    repeats: Sequence[tuple[int, bool]]  # (score, reordered)


class Repeatability(BaseModel):
    """One judge's repeatability on one criterion of one cell; rates are shares of answers."""

    judge: str
    cell: str  # label
    cell_id: str
    criterion: str
    column: str  # the results table's column the criterion's scores make
    answers: int
    repeats: int  # repeats asked per answer (the most any answer got)
    pass_at: int | None  # the 1-5 pass threshold; None on a pass/fail scale
    flip_rate: float  # mean over answers of the share of repeats whose pass/fail differs from the first
    flip_low: float | None
    flip_high: float | None
    straddling: float  # share of answers with both a passing and a failing verdict
    identical_flip: float | None  # flip rate over identical repeats only (None: none asked)
    reordered_flip: float | None
    position_shift: float | None  # mean (repeat - first) on the 0-1 scale, reordered minus identical
    judge_variance: float  # mean over answers of the variance of its verdicts' values (0-1 scale)

    def line(self) -> str:
        """The terminal's and the judge card's one line."""
        interval = f" [{self.flip_low:.2f}, {self.flip_high:.2f}]" if self.flip_low is not None else ""
        position = (
            f"; identical {self.identical_flip:.0%} vs reordered {self.reordered_flip:.0%} flipped, "
            f"shift {self.position_shift:+.2f}"
            if self.identical_flip is not None
            and self.reordered_flip is not None
            and self.position_shift is not None
            else ""
        )
        return (
            f"judge {self.judge} repeats on {self.criterion} ({self.cell}): flip rate "
            f"{self.flip_rate:.2f}{interval} over {self.answers} answers x {self.repeats}; "
            f"{self.straddling:.0%} straddle the threshold{position}; judge variance "
            f"{self.judge_variance:.4f}"
        )


def _flip_share(first: bool, repeats: Sequence[bool]) -> float | None:
    return fmean(r != first for r in repeats) if repeats else None


def repeatability(
    answers: Sequence[RepeatedAnswer],
    *,
    judge: str,
    cell: str,
    cell_id: str,
    criterion: str,
    column: str,
    scale: Scale,
    value: Callable[[int], float],
    pass_at: int = PASS_AT,
    confidence: float = CONFIDENCE,
) -> Repeatability | None:
    """The statistics of the answers that have repeats (None without any); `value` maps a score to the
    0-1 case value the cell's mean uses."""
    answers = [a for a in answers if a.repeats]
    if not answers:
        return None

    def passes(score: int) -> bool:
        return bool(passed(score, scale, pass_at))

    flips, identical, reordered, straddles, variances = [], [], [], [], []
    shifts_identical, shifts_reordered = [], []
    for answer in answers:
        first = passes(answer.first)
        verdicts = [first] + [passes(score) for score, _ in answer.repeats]
        flips.append(fmean(v != first for v in verdicts[1:]))
        straddles.append(len(set(verdicts)) > 1)
        values = [value(answer.first)] + [value(score) for score, _ in answer.repeats]
        variances.append(variance(values))
        for wanted, shares, shifts in (
            (False, identical, shifts_identical),
            (True, reordered, shifts_reordered),
        ):
            scores = [score for score, is_reordered in answer.repeats if is_reordered is wanted]
            if (share := _flip_share(first, [passes(s) for s in scores])) is not None:
                shares.append(share)
                shifts.append(fmean(value(s) - value(answer.first) for s in scores))
    interval = mean_interval(flips, bounds=(0.0, 1.0), confidence=confidence)
    both = identical and reordered
    return Repeatability(
        judge=judge,
        cell=cell,
        cell_id=cell_id,
        criterion=criterion,
        column=column,
        answers=len(answers),
        repeats=max(len(a.repeats) for a in answers),
        pass_at=pass_at if scale == "1-5" else None,
        flip_rate=fmean(flips),
        flip_low=None if interval is None or interval.too_few else interval.low,
        flip_high=None if interval is None or interval.too_few else interval.high,
        straddling=fmean(straddles),
        identical_flip=fmean(identical) if identical else None,
        reordered_flip=fmean(reordered) if reordered else None,
        position_shift=fmean(shifts_reordered) - fmean(shifts_identical) if both else None,
        judge_variance=fmean(variances),
    )


def with_judge_variance(
    interval: Interval,
    judge_variance: float,
    *,
    bounds: tuple[float, float],
    confidence: float = CONFIDENCE,
) -> Interval:
    """A cell's case interval widened by the judge's variance (see the module), cut to `bounds`; an
    interval too few cases give stays one."""
    if interval.too_few or interval.low is None or interval.high is None:
        return interval
    if judge_variance < 0:
        raise ValueError(f"a variance is not negative, got {judge_variance}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    judge_part = z * z * judge_variance / interval.n
    low = interval.mean - math.sqrt((interval.mean - interval.low) ** 2 + judge_part)
    high = interval.mean + math.sqrt((interval.high - interval.mean) ** 2 + judge_part)
    return interval.model_copy(update={"low": max(bounds[0], low), "high": min(bounds[1], high)})


def cell_repeatability(result: JudgeResult, *, judge: str, cell: str) -> list[Repeatability]:
    """Per criterion of the rubrics a cell's judge repeated: the statistics of its repeats against the
    answers' first verdicts (a repeat that failed, or whose first verdict failed, is left out)."""
    found = []
    firsts = {j.case_id: j.scores for j in result.judgements}
    for rubric in result.rubrics:
        for criterion in rubric.criteria:
            by_case: dict[str, list[tuple[int, bool]]] = {}
            for verdict in result.repeats:
                if verdict.rubric == rubric.name and criterion.name in verdict.scores:
                    by_case.setdefault(verdict.repeat.case_id, []).append(
                        (verdict.scores[criterion.name], verdict.repeat.reordered)
                    )
            answers = [
                RepeatedAnswer(case_id, firsts[case_id][criterion.name], repeats)
                for case_id, repeats in by_case.items()
                if criterion.name in firsts.get(case_id, {})
            ]
            measured = repeatability(
                answers,
                judge=judge,
                cell=cell,
                cell_id=result.spec.id,
                criterion=criterion.name,
                column=criterion.column,
                scale=criterion.scale,
                value=criterion.case_value,
            )
            if measured is not None:
                found.append(measured)
    return found


def runs_repeatability(
    cells: Sequence[CellSpec],
    judged_of: Callable[[CellSpec], JudgeResult | None],
    judge_name: Callable[[CellSpec], str],
    labels: Mapping[str, str],
) -> list[Repeatability]:
    """Every judged cell's `cell_repeatability`, named as the results table names judges and cells."""
    return [
        measured
        for cell in cells
        if (judged := judged_of(cell)) is not None
        for measured in cell_repeatability(judged, judge=judge_name(cell), cell=labels[cell.id])
    ]


def widen_rows(
    rows: Sequence[dict],
    repeated: Sequence[Repeatability],
    case_values: Mapping[str, Mapping[str, Mapping[str, float]]],
    settings: StatisticsConfig,
    metrics: Mapping[str, MetricInfo],
) -> list[dict]:
    """The table's rows with each repeated column's interval widened by its judge's variance
    (`with_judge_variance`) and `<column>_judge_variance`, the variance the judge adds to the mean."""
    by_cell: dict[str, list[Repeatability]] = {}
    for measured in repeated:
        by_cell.setdefault(measured.cell_id, []).append(measured)
    out = []
    for row in rows:
        row = dict(row)
        for measured in by_cell.get(row["cell"], []):
            metric, values = metrics.get(measured.column), case_values[row["cell"]].get(measured.column)
            interval = metric.interval(list(values.values()), settings) if metric and values else None
            if metric is None or interval is None or interval.too_few:
                continue
            bounds = metric.bounds or (0.0, 1.0)  # a judge's column is bounded: its scale or a rate
            wider = with_judge_variance(
                interval, measured.judge_variance, bounds=bounds, confidence=settings.confidence
            )
            assert wider.low is not None and wider.high is not None
            row[f"{measured.column}_low"], row[f"{measured.column}_high"] = (
                round(wider.low, 4),
                round(wider.high, 4),
            )
            row[f"{measured.column}_judge_variance"] = round(measured.judge_variance / interval.n, 6)
        out.append(row)
    return out
