"""A review queue that is also a random sample: which cases a person labels, drawn with known
probabilities, so their labels can correct the judge's numbers (`ragbench.stats.ppi`).

The unit drawn is the case: every compared cell's answer to a drawn case is asked for together, which
makes paired labels for every comparison between cells. Each case gets a weight (1 for a uniform plan;
higher where the judge is least sure for `uncertain`) and a seeded draw u in (0, 1); cases are asked in
the order of u / weight (sequential Poisson sampling). Whatever prefix of that order a person has labelled
is a Poisson sample: with t the key of the first case not labelled, case i is in it with probability
min(1, t * weight_i). A uniform plan's prefix is a simple random sample of the cases.

Each label keeps its plan, weight and draw (`SampleDraw`), so a later run can check that the labels were
drawn from its own answers' plan and recompute every probability; labels given in any other order (the
queue's `disagreement`, `uncertain` or `random` orders) carry none and are never passed off as a sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ragbench.hashing import seeded_rank
from ragbench.review.labels import Label, SampleDraw
from ragbench.review.queue import ReviewItem, closeness_to_middle, spread
from ragbench.stats.ppi import judge_ceiling, labels_for_width, labels_plan_text, ppi_mean

Weighting = Literal["uniform", "uncertain"]
WEIGHTINGS: tuple[Weighting, ...] = ("uniform", "uncertain")
# the review page's orders that draw a sample, beside the queue's own (`ragbench.review.queue.ORDERS`)
SAMPLE_ORDERS: dict[str, Weighting] = {"sample": "uniform", "sample_uncertain": "uncertain"}
# an `uncertain` plan's weights lie in [FLOOR, 1]: every case keeps a real chance to be drawn, which bounds
# the inverse-probability weights (and so the variance) when the judge's uncertainty says little. At 0.25,
# weighting by an uncertainty that says nothing widened the intervals 2-3.5 % over a uniform sample
# (bench/bench_ppi.py); at 0.5 it stays within about 1 %, and an informative one still narrows them.
FLOOR = 0.5


class SamplePlan(BaseModel):
    """How a sample is drawn: the weighting and the seed of the draws."""

    model_config = ConfigDict(frozen=True)

    weighting: Weighting = "uniform"
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.weighting}:{self.seed}"

    @classmethod
    def parse(cls, name: str) -> SamplePlan:
        weighting, _, seed = name.partition(":")
        if weighting not in WEIGHTINGS or not seed.lstrip("-").isdigit():
            raise ValueError(f"sample plan {name!r}: expected WEIGHTING:SEED, WEIGHTING one of {WEIGHTINGS}")
        return cls(weighting=weighting, seed=int(seed))  # type: ignore[arg-type]


def case_draw(seed: int, case_id: str) -> float:
    """The case's seeded uniform draw in (0, 1)."""
    return (int.from_bytes(seeded_rank(seed, f"sample:{case_id}")[:8], "big") + 0.5) / 2.0**64


def case_weights(items: Iterable[ReviewItem], weighting: Weighting) -> dict[str, float]:
    """case id -> its weight: 1 everywhere for `uniform`; for `uncertain`, FLOOR plus the rest in proportion
    to how unsure the judge is of the case's least certain answer (verdicts near the middle of the scale,
    self-consistency samples or judges that disagree, a verdict against the keyword tests)."""
    unsure: dict[str, float] = {}
    for item in items:
        how = max(spread(item), closeness_to_middle(item)) if item.verdicts else 1.0
        unsure[item.input.case_id] = max(unsure.get(item.input.case_id, 0.0), how)
    if weighting == "uniform":
        return dict.fromkeys(unsure, 1.0)
    return {case: uncertainty_weight(how) for case, how in unsure.items()}


def uncertainty_weight(how_unsure: float) -> float:
    """An `uncertain` plan's weight of a case from how unsure the judge is of it (0-1): FLOOR at 0, 1 at 1."""
    return FLOOR + (1 - FLOOR) * min(1.0, max(0.0, how_unsure))


def sample_order(items: Sequence[ReviewItem], plan: SamplePlan) -> list[ReviewItem]:
    """The queue of a sample plan: cases in the order of draw / weight, each case's answers together."""
    weights = case_weights(items, plan.weighting)
    keys = {case: case_draw(plan.seed, case) / weight for case, weight in weights.items()}
    return sorted(items, key=lambda item: (keys[item.input.case_id], item.input.case_id, item.key))


def draws(items: Sequence[ReviewItem], plan: SamplePlan) -> dict[str, SampleDraw]:
    """case id -> the draw its labels are stored with."""
    return {
        case: SampleDraw(plan=plan.name, weight=weight, draw=case_draw(plan.seed, case))
        for case, weight in case_weights(items, plan.weighting).items()
    }


class DrawnSample(BaseModel):
    """The labelled cases that form a sample of a run's cases, with their inclusion probabilities."""

    plan: str
    probabilities: dict[str, float]  # labelled case in the sample -> its inclusion probability
    cases: int  # cases the sample was drawn from
    left_out: list[str] = []  # labelled cases after the first unlabelled one in the plan's order
    ended_at: str | None = None  # that first unlabelled case, where the sample ends (None: a census)
    uniform: bool

    @property
    def census(self) -> bool:
        return len(self.probabilities) == self.cases

    def probabilities_of(self, cases: Iterable[str]) -> list[float] | None:
        """Each case's inclusion probability for a weighted sample (1 where unlabelled: never read); None for
        a uniform one, which the estimate treats as a simple random sample."""
        return None if self.uniform else [self.probabilities.get(case, 1.0) for case in cases]


def drawn_sample(weights: Mapping[str, float], labelled: Iterable[str], plan: SamplePlan) -> DrawnSample:
    """The sample a person's labels make: the labelled prefix of the plan's order over the cases with
    `weights`. A labelled case after the first case not (fully) labelled is left out: with it, the set would
    no longer be a Poisson sample with known probabilities."""
    done = set(labelled)
    order = sorted(weights, key=lambda case: (case_draw(plan.seed, case) / weights[case], case))
    prefix: list[str] = []
    threshold, ended_at = math.inf, None
    for case in order:
        if case not in done:
            threshold, ended_at = case_draw(plan.seed, case) / weights[case], case
            break
        prefix.append(case)
    return DrawnSample(
        plan=plan.name,
        probabilities={case: min(1.0, threshold * weights[case]) for case in prefix},
        cases=len(order),
        left_out=sorted(done.intersection(order) - set(prefix)),
        ended_at=ended_at,
        uniform=plan.weighting == "uniform",
    )


def labelled_sample(
    items: Sequence[ReviewItem], is_labelled: Callable[[ReviewItem], bool], plan: SamplePlan
) -> DrawnSample:
    """The sample the labels of `items` (one criterion's) make under `plan`: a case counts as labelled when
    every one of its answers is."""
    weights = case_weights(items, plan.weighting)
    partial = {item.input.case_id for item in items if not is_labelled(item)}
    return drawn_sample(weights, set(weights) - partial, plan)


def sample_progress(
    items: Sequence[ReviewItem], labels: Iterable[Label], plan: SamplePlan, width: float
) -> list[dict]:
    """Per judge and criterion on a sample order: cases of the sample labelled so far, the corrected mean
    (over the cases, each the mean of its answers) with its interval, and how many labelled cases would
    bring the interval's width under `width` at the judge-person agreement seen so far (a planning figure),
    with the most a label can be worth with this judge (1/(1 - rho^2)). What the page shows beside the
    queue; the run's report gives the same per cell."""
    by_key = {item.key: item for item in items}
    given = {
        "|".join(label.key): label
        for label in labels
        if label.sample is not None and label.sample.plan == plan.name and "|".join(label.key) in by_key
    }
    found = []
    for criterion in sorted({item.criterion for item in items}):
        mine = [item for item in items if item.criterion == criterion]
        sample = labelled_sample(mine, lambda item: item.key in given, plan)
        judges = sorted({judge for item in mine for judge in item.verdicts})
        for judge in judges:
            # the case is the unit drawn (its answers are labelled together and are alike): one value per
            # case, the mean over its answers, so the interval does not count a case's answers as independent
            verdict, person, cases = _case_means(mine, judge, given, sample)
            estimate = ppi_mean(verdict, person, sample.probabilities_of(cases), bounds=(0.0, 1.0))
            labelled = [(v, p) for v, p in zip(verdict, person, strict=True) if not math.isnan(p)]
            found.append(
                {
                    "criterion": criterion,
                    "judge": judge,
                    "cases": sample.cases,
                    "sampled_cases": len(sample.probabilities),
                    "estimate": estimate.text(),
                    "labels_for_width": (needed := labels_for_width(estimate, width)),
                    # the same figure in words, capped by the cases there are to label
                    "labels_plan": None if needed is None else labels_plan_text(needed, sample.cases),
                    "width": width,
                    "ceiling": judge_ceiling([v for v, _ in labelled], [p for _, p in labelled]),
                }
            )
    return found


def _case_means(
    items: Sequence[ReviewItem], judge: str, given: Mapping[str, Label], sample: DrawnSample
) -> tuple[list[float], list[float], list[str]]:
    """Per case `judge` scored: the mean of its verdicts and, for a sampled case, of the person's labels of
    its answers, both on 0-1."""
    verdicts: dict[str, list[float]] = {}
    labels: dict[str, list[float]] = {}
    for item in items:
        if judge not in item.verdicts:
            continue
        low, top = (1, 4) if item.scale == "1-5" else (0, 1)
        case = item.input.case_id
        verdicts.setdefault(case, []).append((item.verdicts[judge] - low) / top)
        if case in sample.probabilities:
            labels.setdefault(case, []).append((given[item.key].value - low) / top)
    cases = sorted(verdicts)
    return (
        [sum(verdicts[c]) / len(verdicts[c]) for c in cases],
        [sum(labels[c]) / len(labels[c]) if c in labels else math.nan for c in cases],
        cases,
    )


def sample_progress_sentence(order: str, progress: Mapping) -> str:
    """One line of `sample_progress` for the terminal (the page shows the same figures)."""
    more = progress["labels_plan"]
    plan = f"; {more} for an interval narrower than {progress['width']:g}" if more is not None else ""
    ceiling = progress["ceiling"]
    worth = f"; a label is worth at most {ceiling:.2f} with this judge" if ceiling is not None else ""
    return (
        f"{order} ({progress['judge']} on {progress['criterion']}): {progress['sampled_cases']} of "
        f"{progress['cases']} cases labelled, corrected mean {progress['estimate']}{plan}{worth}"
    )
