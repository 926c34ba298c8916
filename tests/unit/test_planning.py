"""The plan checked against the test it plans for: runs simulated at the planned minimum detectable
difference, put through the report's own paired test (compare_to_best, or its sign-flip tests and Holm
exactly as compare_to_best calls them), detect it at the planned power, within 5 points.

Each simulation is SIMS runs from a fixed seed, so a run sees the same numbers every time; 5 points is
about 4 binomial standard errors of a share near 0.8 over SIMS runs (0.013), the rest left to the plan's
approximation (the t-test's power for a continuous metric, the sign test's for a binary one, each tested
at Holm's strictest level). The shares these seeds give are beside CASES.
"""

import itertools
import math

import numpy as np
import pytest
from pydantic import ValidationError

from ragbench.analysis.planning import (
    PlannedTest,
    binary_power,
    cases_needed,
    disagreement,
    fewest_rejecting_cases,
    is_binary,
    labels_needed,
    minimum_detectable_difference,
    plan,
)
from ragbench.stats.inference import StatisticsConfig, compare_to_best, holm, sign_flip_tests, verdict_of
from ragbench.stats.permutation import SignFlipTest
from ragbench.stats.ppi import MIN_LABELS, ppi_mean

SIMS = 1000
ALPHA, POWER, RESAMPLES = 0.05, 0.8, 2000  # the defaults a run uses (StatisticsConfig)
TOLERANCE = 0.05  # the "within 5 points"


def continuous_pilot() -> np.ndarray:
    """A previous run's per-case differences of two cells on 50 cases: continuous, sd about 0.3."""
    return np.random.default_rng(11).normal(0.02, 0.3, 50)


def binary_pilot() -> np.ndarray:
    """A previous run's per-case hit differences of two cells on 60 cases, disagreeing on a quarter."""
    rng = np.random.default_rng(12)
    first = rng.binomial(1, 0.7, 60)
    second = np.where(rng.random(60) < 0.25, 1 - first, first)
    return (second - first).astype(float)


def sparse_pilot() -> np.ndarray:
    """A previous run's per-case MRR differences of two retrieval cells on 50 cases: most cases rank the
    source the same (difference 0), the others move by a quarter to a whole rank's reciprocal."""
    rng = np.random.default_rng(13)
    moved = rng.random(50) < 0.3
    return moved * rng.choice([0.25, 0.5, 0.67, 1.0], 50) * rng.choice([-1.0, 1.0], 50)


PILOTS = {"continuous": continuous_pilot, "binary": binary_pilot, "sparse": sparse_pilot}


def draw(rng: np.random.Generator, pilot: np.ndarray, mean: float, n: int, kind: str) -> np.ndarray:
    """n per-case differences of mean `mean` with the pilot's spread: normal with its sd (`continuous`),
    the pilot's own differences centred, resampled and shifted (`sparse`: skewed, mostly 0), or -1/0/1
    with its share of disagreeing cases (at least |mean|) split (q + mean) / 2 one way and (q - mean) / 2
    the other (`binary`)."""
    if kind == "continuous":
        return mean + float(pilot.std(ddof=1)) * rng.standard_normal(n)
    if kind == "sparse":
        return mean + rng.choice(pilot - pilot.mean(), n)
    q = max(disagreement(pilot), abs(mean))
    u = rng.random(n)
    return np.where(u < (q + mean) / 2, 1.0, np.where(u < q, -1.0, 0.0))


def cells(rng: np.random.Generator, differences: np.ndarray, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """Two cells' per-case values whose differences (second - first) are `differences`: 0/1 values for a
    binary metric (a case both hit or both miss where the difference is 0), continuous ones otherwise."""
    if binary:
        same = rng.binomial(1, 0.7, differences.size).astype(float)
        first = np.where(differences == 0, same, (differences < 0).astype(float))
        return first, first + differences
    first = rng.normal(0.5, 0.2, differences.size)
    return first, first + differences


def share_through_compare_to_best(pilot: np.ndarray, mdd: float, n: int, kind: str, seed: int) -> float:
    """Two cells, one better by `mdd`, through compare_to_best as the report calls it: detected when the
    better one is the best and the other's verdict is "worse"."""
    rng = np.random.default_rng(seed)
    detected = 0
    for _ in range(SIMS):
        other, better = cells(rng, draw(rng, pilot, mdd, n, kind), kind == "binary")
        values = {"other": dict(enumerate(other)), "better": dict(enumerate(better))}
        best, (versus,) = compare_to_best(values, higher_is_better=True, alpha=ALPHA, resamples=RESAMPLES)
        detected += best == "better" and versus.verdict == "worse"
    return detected / SIMS


def share_through_holm(
    pilot: np.ndarray, mdd: float, n: int, kind: str, comparisons: int, seed: int
) -> float:
    """The best against `comparisons` cells: one behind by `mdd`, the others tied with the best (the case
    the plan's alpha / comparisons is for), through the calls compare_to_best makes (sign_flip_tests on
    every comparison at once, holm, verdict_of): detected when the one behind is "worse"."""
    rng = np.random.default_rng(seed)
    detected = 0
    for _ in range(SIMS):
        behind = [draw(rng, pilot, -mdd, n, kind)] + [
            draw(rng, pilot, 0.0, n, kind) for _ in range(comparisons - 1)
        ]
        pairs = [cells(rng, -d, kind == "binary") for d in behind]  # (the candidate's values, best's)
        tests = sign_flip_tests([(best, candidate) for candidate, best in pairs], seed=0, resamples=RESAMPLES)
        p_values = [test.p_value() for test, _ in tests]
        first = tests[0][0]
        verdict = verdict_of(first.mean, holm(p_values)[0], alpha=ALPHA, higher_is_better=True)
        detected += verdict == "worse"
    return detected / SIMS


# (pilot, cases, comparisons): n = 50 is the packaged eval set's size, 20 a small sample; the binary pilot
# is a hit rate, planned at the sign test's exact power; the sparse one an MRR, planned as continuous.
# Detection shares at these seeds (2026-11-28), in order: 0.803, 0.808, 0.823, 0.779, 0.832, 0.809; at
# seeds 101, 202 and 303 all six stay within 0.787-0.833.
CASES = [
    ("continuous", 50, 1),
    ("continuous", 20, 3),
    ("binary", 50, 1),
    ("binary", 100, 3),
    ("sparse", 50, 1),
    ("sparse", 100, 3),
]


@pytest.mark.parametrize("kind, n, comparisons", CASES, ids=[f"{k}-n{n}-m{m}" for k, n, m in CASES])
def test_the_planned_difference_is_detected_at_the_planned_power(kind, n, comparisons):
    pilot, binary = PILOTS[kind](), kind == "binary"
    mdd = minimum_detectable_difference(pilot, n, PlannedTest(ALPHA, POWER, comparisons, binary, RESAMPLES))
    assert mdd is not None and mdd > 0
    if comparisons == 1:
        share = share_through_compare_to_best(pilot, mdd, n, kind, seed=n)
    else:
        share = share_through_holm(pilot, mdd, n, kind, comparisons, seed=n)
    assert abs(share - POWER) <= TOLERANCE, (kind, n, comparisons, mdd, share)


def test_too_few_cases_detect_nothing_and_the_plan_says_why():
    # the sign-flip test's smallest p-value on n cases is 2 / 2^n: 0.0625 on 5, 0.03125 on 6
    assert fewest_rejecting_cases(0.05) == 6
    assert fewest_rejecting_cases(0.05 / 3) == 7  # Holm's strictest level over 3 comparisons
    assert fewest_rejecting_cases(0.001, resamples=2000) == 11  # drawn patterns: p >= 2 / 2001
    assert fewest_rejecting_cases(0.0005, resamples=2000) is None  # no number of cases gets under it
    pilot = continuous_pilot()
    five = plan(pilot, 5, detect=0.5)
    assert five.detectable is None and five.can_detect is False
    assert "0.0625" in five.why_not and "at least 6 cases" in five.why_not
    assert "THIS SAMPLE CANNOT DETECT IT" in five.text()
    assert minimum_detectable_difference(pilot, 6) is not None
    crowded = plan(pilot, 50, PlannedTest(comparisons=100, resamples=2000))
    assert crowded.detectable is None and "raise statistics.resamples" in crowded.why_not
    assert cases_needed(pilot, PlannedTest(comparisons=100, resamples=2000), difference=0.5) is None


@pytest.mark.parametrize("binary", [False, True])
def test_a_pilot_without_spread_plans_nothing(binary):
    same = plan(np.zeros(30), 50, PlannedTest(binary=binary), detect=0.05)
    assert same.detectable is None and not same.spread and same.can_detect is None
    assert "do not vary" in same.text() and "nor whether it detects a difference of 0.05" in same.text()
    assert cases_needed(np.zeros(30), PlannedTest(binary=binary), difference=0.05) is None
    assert minimum_detectable_difference([0.5], 50, PlannedTest(binary=binary)) is None  # one case: no spread


def test_every_case_moving_by_one_amount_needs_only_the_cases_that_can_reject():
    assert minimum_detectable_difference([0.25] * 10, 50) is None  # no spread to scale a plan by
    assert cases_needed([0.25] * 10) == 6
    assert cases_needed([0.25] * 10, PlannedTest(comparisons=3)) == 7


def test_the_binary_power_is_the_sign_flip_tests_exactly():
    """Every outcome of 8 cases (3^8 of them, each -1, 0 or 1) through the real test, enumerated (2^8
    sign patterns <= resamples), weighted by its probability: the same power to the last digits."""
    n, disagree, difference, level = 8, 0.8, 0.6, 0.05
    up, down = (disagree + difference) / 2, (disagree - difference) / 2
    chance = {1.0: up, -1.0: down, 0.0: 1 - disagree}
    power = 0.0
    for outcome in itertools.product((-1.0, 0.0, 1.0), repeat=n):
        d = np.asarray(outcome)
        if SignFlipTest(d, seed=0, resamples=RESAMPLES).p_value() < level:
            power += math.prod(chance[v] for v in outcome)
    assert binary_power(difference, disagree, n, level, RESAMPLES) == pytest.approx(power, abs=1e-12)
    assert power > 0.3  # not trivially zero


@pytest.mark.parametrize("binary", [False, True])
def test_the_cases_a_difference_needs_and_the_difference_a_sample_detects_agree(binary):
    pilot = binary_pilot() if binary else continuous_pilot()
    for n in (30, 50, 200):
        mdd = minimum_detectable_difference(pilot, n, PlannedTest(binary=binary))
        needed = cases_needed(pilot, PlannedTest(binary=binary), difference=mdd)
        # the sign test's power is not monotone in n (discrete), by a case or two around its target
        assert abs(needed - n) <= (2 if binary else 0), (n, mdd, needed)
    tests = [PlannedTest(comparisons=m, binary=binary) for m in (1, 3, 10)]
    detects = [minimum_detectable_difference(pilot, 50, test) for test in tests]
    assert detects == sorted(detects) and detects[0] < detects[-1]  # Holm's level costs detectable size


def test_a_named_difference_is_said_detectable_or_not():
    pilot = continuous_pilot()
    small = plan(pilot, 50, detect=0.05)
    assert small.can_detect is False and small.cases_to_detect > 50
    assert f"needs about {small.cases_to_detect} cases: THIS SAMPLE CANNOT DETECT IT" in small.text()
    large = plan(pilot, 50, detect=0.3)
    assert large.can_detect is True and large.cases_to_detect <= 50
    assert "this sample can detect it" in large.text()
    assert (
        plan(pilot, 50, PlannedTest(comparisons=3))
        .text()
        .startswith("on 50 cases the paired test detects a difference of ")
    )
    assert "alpha 0.05 / 3 comparisons (Holm)" in plan(pilot, 50, PlannedTest(comparisons=3)).text()


def test_binary_metrics_are_told_by_their_values():
    assert is_binary([0.0, 1.0, math.nan], [1.0, 1.0])
    assert not is_binary([0.0, 0.5])


def test_the_difference_to_detect_is_a_positive_number_or_none():
    settings = StatisticsConfig()
    assert settings.detect is None and settings.power == 0.8
    assert StatisticsConfig(detect=0.05).detect == 0.05
    for bad in (0.0, -0.05, math.inf, math.nan):
        with pytest.raises(ValidationError):
            StatisticsConfig(detect=bad)
    with pytest.raises(ValidationError):
        StatisticsConfig(power=1.0)


def judged_population(
    rng: np.random.Generator, n: int, difference: float, kind: str
) -> tuple[np.ndarray, ...]:
    """Per-case differences of two cells on n answers: the judge's (every answer) and the person's. `scores`:
    continuous, the judge tracking the person with noise and a bias; `verdicts`: each answer right or wrong
    by the person (0/1), the judge's 0-1 score in quarters, right about the person most of the time."""
    if kind == "scores":
        person = difference + 0.4 * rng.standard_normal(n)
        return 0.05 + 0.8 * (person - difference) + difference + 0.3 * rng.standard_normal(n), person

    def cell(p: float) -> tuple[np.ndarray, np.ndarray]:
        right = (rng.random(n) < p).astype(float)
        return np.clip(np.round((right * 0.8 + 0.1 + 0.25 * rng.standard_normal(n)) * 4) / 4, 0, 1), right

    (judge_a, person_a), (judge_b, person_b) = cell(0.6), cell(0.6 + difference)
    return judge_b - judge_a, person_b - person_a


def judged_pilot(difference: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A large pilot (40,000 answers, half labelled): the check is of the plan, not of a pilot's noise (at
    2,000 labels the labels' variance alone is off by 2-3%, and the labels needed with it)."""
    judge, person = judged_population(np.random.default_rng(21), 40_000, difference, kind)
    return judge, np.where(np.arange(40_000) < 20_000, person, np.nan)


# (kind, answers, difference, comparisons): 128, 53, 96 and 25 labels planned; detection shares at these
# seeds (2026-11-28), in order: 0.803, 0.813, 0.811, 0.785; at seeds 7 and 8 all within 0.785-0.827
LABELLED = [
    ("scores", 150, 0.1, 1),
    ("scores", 150, 0.15, 3),
    ("verdicts", 200, 0.15, 1),
    ("verdicts", 100, 0.25, 1),
]


@pytest.mark.parametrize("kind, answers, difference, comparisons", LABELLED)
def test_the_planned_labels_detect_the_difference_at_the_planned_power(
    kind, answers, difference, comparisons
):
    """Runs labelled as planned (a simple random sample of that many answers), each comparison put through
    the label-corrected test (ppi_mean's t-test), Holm over the comparisons, the others tied."""
    needed = labels_needed(
        *judged_pilot(difference, kind), answers=answers, difference=difference, comparisons=comparisons
    )
    assert needed is not None and MIN_LABELS <= needed < answers
    rng = np.random.default_rng(answers)
    detected = 0
    for _ in range(SIMS):
        estimates = []
        for k in range(comparisons):
            judge, person = judged_population(rng, answers, difference if k == 0 else 0.0, kind)
            labelled = np.zeros(answers, dtype=bool)
            labelled[rng.choice(answers, needed, replace=False)] = True
            estimates.append(ppi_mean(judge, np.where(labelled, person, np.nan)))
        detected += holm([e.p_value for e in estimates])[0] < ALPHA and estimates[0].estimate > 0
    assert abs(detected / SIMS - POWER) <= TOLERANCE, (kind, answers, needed, detected / SIMS)


def test_labels_are_not_planned_where_no_number_of_them_can_decide():
    judge, person = judged_pilot(0.15, "verdicts")
    # labelling every one of 300 answers leaves alpha 0.05 / 3 out of reach of 80% power at 0.12
    assert labels_needed(judge, person, answers=300, difference=0.12, comparisons=3) is None
    few = np.full(judge.size, np.nan)
    few[:2] = person[:2]
    assert labels_needed(judge, few, answers=300, difference=0.5) is None  # 2 labels: no spread
    assert labels_needed(judge, np.zeros(judge.size), answers=300, difference=0.5) is None  # no variation
    # a huge difference still needs the labels an interval takes (scipy's noncentral t is NaN out there)
    assert labels_needed(judge, person, answers=300, difference=0.9, min_labels=20) == 20
    assert labels_needed(judge, person, answers=300, difference=0.9) == MIN_LABELS
