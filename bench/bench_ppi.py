"""Do prediction-powered estimates keep their promise: 95% intervals that cover, narrower than a person's
labels alone when the judge is good, never wider when it is bad, and a paired verdict that the judge's
own bias cannot fool?

A simulation of `ragbench.stats.ppi.ppi_mean` on the samples `ragbench.review.sampling` draws, many
replications per setting (default 4,000: at 2,000 the Monte-Carlo standard error of a coverage, 0.5 %,
makes the lowest of 216 coverages fall a point below the truth by chance alone):
- N answers per cell (N = 200 with n = 20 and 40 labels; N = 1000 with n = 40 and 80; `--smoke`: N = 200
  with all three n), two cells answering the same N cases. A case has a difficulty d ~ N(0, 1), each answer
  its own noise e ~ N(0, 0.7); the person's true 1-5 label is clip(round(3 + mu_cell + d + e), 1, 5). In
  the setting with a difference (`differ`) cell B's mu is set so that its expected label is exactly +0.1
  above cell A's on the 0-1 scale; without (`same`) both mu are 0. Every value is on the 0-1 scale,
  (score - 1) / 4, and the truth an interval must cover is the expected value under this model (the
  estimand of PPI++ and of the labels alone: the system's quality, not these N answers' average).
- The judge reads an answer's latent quality with correlation rho, with the labels' own spread (so its
  scores are distributed as the labels are), and flatters cell A's wrong answers: +FLATTERY on its latent
  reading of every cell-A answer the person scores 1 or 2. That bias differs between the cells, so the
  judge alone calls A better than it is: the case the correction must catch. rho is calibrated per judge
  (low, medium, high agreement) so that the quadratic-weighted kappa of its scores against the labels of
  both cells is about 0.2, 0.5, 0.8; the table prints the mean kappa measured over the replications.
- Plans: `uniform` (a simple random sample of cases) and `uncertain` (weights from
  `sampling.uncertainty_weight` of how unsure the judge is of the case's least certain answer). The
  judge's uncertainty is simulated `info`rmative (0.1 + 0.3 x its absolute error in points, plus noise
  N(0, 0.1), clipped to 0-1) or `noinfo`rmative (the same values dealt out to the cases at random). Each
  replication draws the plan's seeded order (`sampling.case_draw`), the person labels the first n cases
  of it (both cells' answers), and `sampling.drawn_sample` turns them into the sample with its inclusion
  probabilities, passed to `ppi_mean` as the product passes them.
Per setting: coverage of the corrected 95% intervals of cell A's and B's means and of their paired
difference B - A (`ppi_mean` on the per-case differences of judge scores and of labels), and of the
labels-only intervals; mean widths, and their ratio to the labels alone of a uniform sample of the same n
(a person's n labels without any judge: the baseline the judge must beat); how often the corrected
paired test (p = `Estimate.p_value` < 0.05) picks cell B with a difference and calls one without; how often
the judge alone (a paired z-test on all N judge differences: the product's sign-flip test,
`stats.paired_p_value`, costs 40 ms a call at N = 1000 and gave the same verdict in 97-100% of 60 such
replications per judge and N) picks the wrong cell, A, or calls a difference without one.

Small samples (`--part small`; 4,000 replications per setting): what a new user labels first. N = 24
and 100 answers, n = 10, 15 and 20 labelled cases (a uniform sample), cell A's labels piled at an end of
the scale (expected label 0.05, 0.15, 0.85 or 0.95 on 0-1), cell B's SHIFT towards the middle (`differ`)
or the same, and judges whose latent reading correlates 0, 0.15 or 0.3 with the answer's quality (and
flatters A as above). Here PPI++'s weight is fitted to the same dozen labels, and the estimate used is the
narrower of it and the labels alone (`ppi_mean`): the table gives coverage, how often the labels alone
were used, the width against the labels alone of the same sample, and the power of the corrected paired
test beside the labels alone's own.

Targets (PASS/FAIL; exit 1 if any fails; `--smoke` checks none):
- coverage >= 93% of every corrected interval in every setting;
- with the high-agreement judge at 40 labels, intervals at least 30% narrower than labels alone (with
  uninformative weighting 0.70 x 1.02: that plan carries its design effect, bounded by the last target);
- with the low-agreement judge, never wider than labels alone (mean width ratio <= 1.0, +0.01 tolerance for
  Monte-Carlo noise);
- uncertainty-weighted sampling narrower than uniform where the judge's uncertainty is informative, and no
  more than 2% wider where it is not.
- small samples: coverage >= 93% of every interval (cell means and paired difference), width at most 1.00x
  the labels alone's in every setting, and the corrected paired test picking the better cell at most 2
  points less often than the labels alone's test in every setting with a difference.

    python bench/bench_ppi.py [--replications 4000] [--small-replications 4000] [--part all|main|small]
        [--seed 0] [--jobs 2] [--smoke]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from ragbench.report.pages import rows_to_text
from ragbench.review.sampling import SamplePlan, case_draw, drawn_sample, uncertainty_weight
from ragbench.stats.inference import weighted_kappa
from ragbench.stats.ppi import Estimate, ppi_mean

CASE_SD = 1.0  # case difficulty, shared by both cells' answers: what makes a paired comparison pay
ANSWER_SD = 0.7  # each answer's own noise
LATENT_SD = math.hypot(CASE_SD, ANSWER_SD)
SHIFT = 0.1  # cell B's true gain on the 0-1 scale where the cells differ
STEP = 0.25  # between two 1-5 labels on the 0-1 scale
FLATTERY = 1.0  # points the judge adds to its latent reading of cell A's answers the person scores 1-2
ALPHA = 0.05
JUDGES = {"low": 0.2, "medium": 0.5, "high": 0.8}  # target quadratic-weighted kappa
KAPPA_TOLERANCE = 0.05
PLANS = ("uniform", "unsure:info", "unsure:noinfo")
SCENARIOS = ("differ", "same")
LABELS_FULL = {200: (20, 40), 1000: (40, 80)}  # N -> the n labelled out of it
LABELS_SMOKE = {200: (20, 40, 80)}
CHUNK = 100  # replications per task: enough to amortise a task, small enough for an even spread on 2 cores
COVERAGE_GOAL = 0.93
HIGH_RATIO_GOAL = 0.70  # at least 30% narrower
LOW_RATIO_GOAL = 1.0
MC_TOLERANCE = 0.01  # Monte-Carlo noise in a mean width ratio over 4,000 replications
WEIGHTED_TOLERANCE = 1.02
COUNTS = ("cover_a", "cover_b", "cover_d", "cover_lab_a", "cover_lab_b", "picks_b", "picks_a")
SUMS = ("width_a", "width_b", "width_d", "lab_width_a", "lab_width_b", "lab_width_d", "lam_a", "lam_b")


def expected_label(mu: float) -> float:
    """E[clip(round(3 + L), 1, 5)] for L ~ N(mu, LATENT_SD^2), on the 0-1 scale: 1 + sum_k P(3 + L >= k + 0.5)
    on 1-5, exactly (the truth every interval is checked against)."""
    return sum(float(norm.cdf((mu - k + 2.5) / LATENT_SD)) for k in range(1, 5)) / 4


def gain_mu() -> float:
    """Cell B's latent mean that makes its expected label SHIFT above cell A's (mu 0) on the 0-1 scale."""
    return brentq(lambda mu: expected_label(mu) - expected_label(0.0) - SHIFT, 0.0, 3.0, xtol=1e-12)


def to_scores(latent: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(3 + latent), 1, 5)


@dataclass(frozen=True)
class Cells:
    """Both cells' labels and judge scores (1-5) and the judge's uncertainty per case, replication x case."""

    labels_a: np.ndarray
    labels_b: np.ndarray
    judge_a: np.ndarray
    judge_b: np.ndarray
    unsure: np.ndarray  # informative: from the judge's absolute error on the case's least certain answer


def simulate(
    truth: np.random.Generator,
    noise: np.random.Generator,
    shape: tuple[int, int],
    rho: float,
    mu_b: float,
    mu_a: float = 0.0,
) -> Cells:
    """One batch of replications. `truth` draws the labels, `noise` the judge: the labels are the same for
    every judge of a seed (common random numbers make the judges' rows comparable)."""
    difficulty = truth.normal(0.0, CASE_SD, shape)
    latent_a = mu_a + difficulty + truth.normal(0.0, ANSWER_SD, shape)
    latent_b = mu_b + difficulty + truth.normal(0.0, ANSWER_SD, shape)
    labels_a, labels_b = to_scores(latent_a), to_scores(latent_b)
    spread = math.sqrt(max(0.0, 1.0 - rho * rho)) * LATENT_SD
    judge_a = to_scores(rho * latent_a + spread * noise.normal(0.0, 1.0, shape) + FLATTERY * (labels_a <= 2))
    judge_b = to_scores(rho * latent_b + spread * noise.normal(0.0, 1.0, shape))
    unsure = [
        np.clip(0.1 + 0.3 * np.abs(judge - labels) + noise.normal(0.0, 0.1, shape), 0.0, 1.0)
        for judge, labels in ((judge_a, labels_a), (judge_b, labels_b))
    ]
    return Cells(labels_a, labels_b, judge_a, judge_b, np.maximum(*unsure))


def quadratic_kappa(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Quadratic-weighted kappa of 1-5 scores, one per row (vectorised `stats.weighted_kappa`, which the
    bench checks it against on each task's first replication)."""
    rows, size = first.shape
    cells = (first.astype(int) - 1) * 5 + (second.astype(int) - 1) + 25 * np.arange(rows)[:, None]
    observed = np.bincount(cells.ravel(), minlength=25 * rows).reshape(rows, 5, 5) / size
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    weights = (np.arange(5)[:, None] - np.arange(5)[None, :]) ** 2
    return 1.0 - (observed * weights).sum(axis=(1, 2)) / (expected * weights).sum(axis=(1, 2))


def pooled_kappa(cells: Cells) -> np.ndarray:
    """The judge's kappa against the labels over both cells' answers, per replication."""
    labels = np.concatenate([cells.labels_a, cells.labels_b], axis=1)
    return quadratic_kappa(labels, np.concatenate([cells.judge_a, cells.judge_b], axis=1))


def calibrate(target: float, mu_b: float, seed: int) -> float:
    """The rho whose judge has quadratic-weighted kappa `target` on a large sample pooled over both
    scenarios (fixed draws, so kappa is a smooth increasing function of rho)."""

    def kappa(rho: float) -> float:
        values = []
        for shift in (0.0, mu_b):
            truth, noise = np.random.default_rng([seed, 99, 1]), np.random.default_rng([seed, 99, 2])
            values.append(float(pooled_kappa(simulate(truth, noise, (1, 100_000), rho, shift))[0]))
        return float(np.mean(values)) - target

    return brentq(kappa, 0.0, 1.0, xtol=1e-4)


@dataclass(frozen=True)
class Task:
    """A chunk of replications of one N, judge and scenario; every n and plan of that N runs on them."""

    answers: int
    labelled: tuple[int, ...]
    judge: str
    rho: float
    scenario: str
    mu_b: float
    first: int  # index of its first replication: the plans' seeds and the data's draws follow from it
    replications: int
    seed: int


def weights_of(plan: str, cells: Cells, row: int, shuffled: np.ndarray) -> np.ndarray:
    """The plan's case weights in one replication, through the product's `uncertainty_weight`."""
    if plan == "uniform":
        return np.ones(cells.unsure.shape[1])
    unsure = cells.unsure[row] if plan == "unsure:info" else shuffled[row]
    return np.array([uncertainty_weight(float(how)) for how in unsure])


def run_task(task: Task) -> dict:
    """Every n and plan on the task's replications: counts and sums per (n, plan), kappa and the judge
    alone's verdicts per replication."""
    truth = np.random.default_rng([task.seed, task.answers, SCENARIOS.index(task.scenario), task.first])
    judge = 1 + list(JUDGES).index(task.judge)
    noise = np.random.default_rng(
        [task.seed, task.answers, SCENARIOS.index(task.scenario), task.first, judge]
    )
    cells = simulate(truth, noise, (task.replications, task.answers), task.rho, task.mu_b)
    shuffled = noise.permuted(cells.unsure, axis=1)  # the same values, blind to the judge's errors
    kappas = pooled_kappa(cells)
    first_labels = np.concatenate([cells.labels_a[0], cells.labels_b[0]]).astype(int).tolist()
    first_judge = np.concatenate([cells.judge_a[0], cells.judge_b[0]]).astype(int).tolist()
    checked = weighted_kappa(first_labels, first_judge)
    assert checked is not None and abs(checked - kappas[0]) < 1e-9, (checked, kappas[0])

    label_a, label_b = (cells.labels_a - 1) / 4, (cells.labels_b - 1) / 4
    judge_a, judge_b = (cells.judge_a - 1) / 4, (cells.judge_b - 1) / 4
    truth_a, truth_b = expected_label(0.0), expected_label(task.mu_b)
    truth_d = truth_b - truth_a
    # the judge alone: a paired z-test of its per-case differences B - A over all N cases
    judged = judge_b - judge_a
    z = judged.mean(axis=1) / (judged.std(axis=1, ddof=1) / math.sqrt(task.answers))
    significant = 2 * norm.sf(np.abs(z)) < ALPHA
    judge_wrong = significant & (z < 0) if task.scenario == "differ" else significant

    ids = [f"case{i:04d}" for i in range(task.answers)]
    totals = {(n, plan): dict.fromkeys(COUNTS + SUMS, 0.0) for n in task.labelled for plan in PLANS}
    for row in range(task.replications):
        plan_seed = task.seed * 1_000_000 + task.first + row
        draws = np.array([case_draw(plan_seed, case) for case in ids])
        for plan in PLANS:
            weights = weights_of(plan, cells, row, shuffled)
            order = np.argsort(draws / weights, kind="stable")
            weighting = "uniform" if plan == "uniform" else "uncertain"
            for n in task.labelled:
                chosen = order[:n]
                sample = drawn_sample(
                    dict(zip(ids, weights.tolist(), strict=True)),
                    [ids[i] for i in chosen],
                    SamplePlan(weighting=weighting, seed=plan_seed),
                )
                if len(sample.probabilities) != n or sample.left_out:
                    taken = len(sample.probabilities)
                    raise AssertionError(f"drawn_sample took {taken} of the first {n} cases")
                probabilities = None
                if not sample.uniform:
                    probabilities = np.ones(task.answers)
                    probabilities[chosen] = [sample.probabilities[ids[i]] for i in chosen]
                mask = np.zeros(task.answers, dtype=bool)
                mask[chosen] = True
                a, b, d = estimates(
                    judge_a[row], judge_b[row], label_a[row], label_b[row], mask, probabilities
                )
                add(totals[(n, plan)], a, b, d, truth_a, truth_b, truth_d)
    return {
        "task": task,
        "totals": totals,
        "kappa": float(kappas.sum()),
        "judge_wrong": int(judge_wrong.sum()),
    }


def estimates(
    judge_a: np.ndarray,
    judge_b: np.ndarray,
    label_a: np.ndarray,
    label_b: np.ndarray,
    labelled: np.ndarray,
    probabilities: np.ndarray | None,
) -> tuple[Estimate, Estimate, Estimate]:
    """Cell A's, cell B's and their paired difference's estimates from one sample, with the range and the
    step of 0-1 scores from 1-5 labels, as the product passes them (`labelled._corrected_metric`,
    `corrected_comparisons`)."""
    a = ppi_mean(judge_a, np.where(labelled, label_a, np.nan), probabilities, bounds=(0.0, 1.0), step=STEP)
    b = ppi_mean(judge_b, np.where(labelled, label_b, np.nan), probabilities, bounds=(0.0, 1.0), step=STEP)
    d = ppi_mean(
        judge_b - judge_a,
        np.where(labelled, label_b - label_a, np.nan),
        probabilities,
        bounds=(-1.0, 1.0),
        step=STEP,
    )
    return a, b, d


def add(
    total: dict[str, float],
    a: Estimate,
    b: Estimate,
    d: Estimate,
    truth_a: float,
    truth_b: float,
    truth_d: float,
) -> None:
    """One replication's estimates into the running counts and sums."""
    for name, estimate, truth in (("a", a, truth_a), ("b", b, truth_b), ("d", d, truth_d)):
        total[f"cover_{name}"] += estimate.low <= truth <= estimate.high
        total[f"width_{name}"] += estimate.high - estimate.low
        total[f"lab_width_{name}"] += estimate.labels_high - estimate.labels_low
        if name != "d":
            total[f"cover_lab_{name}"] += estimate.labels_low <= truth <= estimate.labels_high
            total[f"lam_{name}"] += estimate.judge_weight
    significant = d.p_value < ALPHA
    total["picks_b"] += significant and d.estimate > 0
    total["picks_a"] += significant and d.estimate < 0


def tasks(
    labels: dict[int, tuple[int, ...]], rhos: dict[str, float], mu_b: float, args: argparse.Namespace
) -> list[Task]:
    """Every (N, judge, scenario) cut into chunks of CHUNK replications, largest N first (the longest tasks
    start first, so the two workers finish together)."""
    found = []
    for answers in sorted(labels, reverse=True):
        for judge, scenario in ((j, s) for j in JUDGES for s in SCENARIOS):
            for first in range(0, args.replications, CHUNK):
                found.append(
                    Task(
                        answers=answers,
                        labelled=labels[answers],
                        judge=judge,
                        rho=rhos[judge],
                        scenario=scenario,
                        mu_b=mu_b if scenario == "differ" else 0.0,
                        first=first,
                        replications=min(CHUNK, args.replications - first),
                        seed=args.seed,
                    )
                )
    return found


def run_all(todo: list, jobs: int, progress: bool) -> list[dict]:
    """Every task, each by its own kind's runner (`Task`: run_task, `SmallTask`: run_small_task)."""

    def runner(task: object) -> Callable[..., dict]:
        return run_small_task if isinstance(task, SmallTask) else run_task

    if jobs <= 1:
        return [runner(task)(task) for task in todo]
    from tqdm import tqdm

    done = []
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(runner(task), task) for task in todo]
        for future in tqdm(as_completed(futures), total=len(futures), disable=not progress, unit="task"):
            done.append(future.result())
    return done


@dataclass
class Setting:
    """Everything one table row needs, summed over its tasks."""

    replications: int = 0
    kappa: float = 0.0
    judge_wrong: int = 0
    totals: dict[str, float] | None = None

    def mean(self, key: str) -> float:
        assert self.totals is not None
        return self.totals[key] / self.replications


def collect(results: Iterable[dict]) -> dict[tuple[int, int, str, str, str], Setting]:
    """(n, N, judge, plan, scenario) -> its setting, the tasks' chunks summed."""
    settings: dict[tuple[int, int, str, str, str], Setting] = {}
    for result in results:
        task: Task = result["task"]
        for (n, plan), total in result["totals"].items():
            setting = settings.setdefault((n, task.answers, task.judge, plan, task.scenario), Setting())
            setting.replications += task.replications
            setting.kappa += result["kappa"]
            setting.judge_wrong += result["judge_wrong"]
            if setting.totals is None:
                setting.totals = dict.fromkeys(total, 0.0)
            for key, value in total.items():
                setting.totals[key] += value
    return settings


def width(setting: Setting) -> float:
    """The corrected intervals' mean width, both cells."""
    return (setting.mean("width_a") + setting.mean("width_b")) / 2


def labels_alone(settings: dict, n: int, answers: int, judge: str, scenario: str) -> tuple[float, float]:
    """Mean width of the labels-only intervals of a uniform sample of n (cell means; difference)."""
    uniform = settings[(n, answers, judge, "uniform", scenario)]
    return (uniform.mean("lab_width_a") + uniform.mean("lab_width_b")) / 2, uniform.mean("lab_width_d")


def table(settings: dict, n: int, answers: int) -> list[dict]:
    rows = []
    for judge in JUDGES:
        for plan in PLANS:
            for scenario in SCENARIOS:
                s = settings[(n, answers, judge, plan, scenario)]
                lab_width, lab_width_d = labels_alone(settings, n, answers, judge, scenario)
                differ = scenario == "differ"
                rows.append(
                    {
                        "judge": judge,
                        "kappa": f"{s.kappa / s.replications:.3f}",
                        "plan": plan,
                        "cells": scenario,
                        "cov_A": f"{s.mean('cover_a'):.3f}",
                        "cov_B": f"{s.mean('cover_b'):.3f}",
                        "cov_diff": f"{s.mean('cover_d'):.3f}",
                        "cov_labels": f"{(s.mean('cover_lab_a') + s.mean('cover_lab_b')) / 2:.3f}",
                        "lam": f"{(s.mean('lam_a') + s.mean('lam_b')) / 2:.2f}",
                        "width": f"{width(s):.4f}",
                        "w_labels": f"{lab_width:.4f}",
                        "ratio": f"{width(s) / lab_width:.3f}",
                        "ratio_diff": f"{s.mean('width_d') / lab_width_d:.3f}",
                        "picks_B": f"{s.mean('picks_b'):.3f}" if differ else "-",
                        "false_diff": "-" if differ else f"{(s.mean('picks_a') + s.mean('picks_b')):.3f}",
                        "judge_wrong": f"{s.judge_wrong / s.replications:.3f}",
                    }
                )
    return rows


def name(key: tuple[int, int, str, str, str]) -> str:
    n, answers, judge, plan, scenario = key
    return f"n={n} N={answers} {judge} {plan} {scenario}"


def coverages(settings: dict, name_of: Callable[..., str]) -> list[tuple[float, str, str]]:
    """Every setting's coverage of cell A's, cell B's and the difference's intervals, lowest first."""
    return sorted(
        (s.mean(f"cover_{part}"), name_of(key), label)
        for key, s in settings.items()
        for part, label in (("a", "cell A"), ("b", "cell B"), ("d", "difference"))
    )


def check(settings: dict) -> bool:
    """Print a PASS/FAIL line per target (with every failing setting); True when all pass."""
    passed = True

    def verdict(met: bool) -> str:
        nonlocal passed
        passed &= met
        return "PASS" if met else "FAIL"

    coverage = coverages(settings, name)
    misses = [item for item in coverage if item[0] < COVERAGE_GOAL]
    lowest = coverage[0]
    print(
        f"coverage >= {COVERAGE_GOAL:.0%} (corrected cell means and paired difference, every setting): "
        f"lowest {lowest[0]:.1%} ({lowest[1]}, {lowest[2]}); {len(misses)} of {len(coverage)} below: "
        f"{verdict(not misses)}"
    )
    replications = next(iter(settings.values())).replications
    print(
        f"  Monte-Carlo SE of a coverage near 95% over {replications} replications: "
        f"{math.sqrt(0.95 * 0.05 / replications):.1%}. Lowest per n, N and plan (over judges and scenarios), "
        "cell A / cell B / difference, and how many of its intervals fall short:"
    )
    groups = sorted(
        {(key[0], key[1], key[3]) for key in settings}, key=lambda g: (g[1], g[0], PLANS.index(g[2]))
    )
    for n, answers, plan in groups:
        mine = [s for key, s in settings.items() if (key[0], key[1], key[3]) == (n, answers, plan)]
        lows = [min(s.mean(f"cover_{part}") for s in mine) for part in "abd"]
        short = sum(s.mean(f"cover_{part}") < COVERAGE_GOAL for s in mine for part in "abd")
        shown = " / ".join(f"{value:.1%}" for value in lows)
        print(f"  n={n} N={answers} {plan}: {shown}; {short} of {3 * len(mine)} below {COVERAGE_GOAL:.0%}")

    def ratios(judge: str, n: int | None) -> list[tuple[float, str]]:
        return sorted(
            (width(s) / labels_alone(settings, key[0], key[1], judge, key[4])[0], name(key))
            for key, s in settings.items()
            if key[2] == judge and (n is None or key[0] == n)
        )

    high = ratios("high", 40)
    if high:
        # uninformative weighting carries its design effect (bounded at 2% over uniform by its own target)
        def high_goal(where: str) -> float:
            return HIGH_RATIO_GOAL * (WEIGHTED_TOLERANCE if "unsure:noinfo" in where else 1.0)

        over = [(value, where) for value, where in high if value > high_goal(where)]
        widest = high[-1]
        print(
            f"high-agreement judge, 40 labels: width <= {HIGH_RATIO_GOAL:.2f} x labels alone (at least 30% "
            f"narrower; {HIGH_RATIO_GOAL * WEIGHTED_TOLERANCE:.3f} with uninformative weighting, its design "
            f"effect), every plan, N and scenario: widest {widest[0]:.3f} ({widest[1]}): {verdict(not over)}"
        )
        for value, where in over:
            print(f"  wider: {value:.3f} {where}")
    low = ratios("low", None)
    widest = low[-1]
    print(
        f"low-agreement judge: width <= {LOW_RATIO_GOAL:.2f} x labels alone (+{MC_TOLERANCE} for Monte-Carlo "
        f"noise), every setting: widest {widest[0]:.3f} ({widest[1]}): "
        f"{verdict(widest[0] <= LOW_RATIO_GOAL + MC_TOLERANCE)}"
    )
    for value, where in low:
        if value > LOW_RATIO_GOAL + MC_TOLERANCE:
            print(f"  wider: {value:.3f} {where}")
    for plan, goal, what in (
        ("unsure:info", 1.0, "narrower than uniform (informative uncertainty)"),
        ("unsure:noinfo", WEIGHTED_TOLERANCE, "within 2% of uniform (uninformative uncertainty)"),
    ):
        found = sorted(
            (width(s) / width(settings[(key[0], key[1], key[2], "uniform", key[4])]), name(key))
            for key, s in settings.items()
            if key[3] == plan
        )
        failing = [item for item in found if (item[0] >= goal if goal == 1.0 else item[0] > goal)]
        print(
            f"uncertainty-weighted {what}: width ratio to uniform {found[0][0]:.3f}-{found[-1][0]:.3f}, "
            f"widest ({found[-1][1]}); {len(failing)} of {len(found)} settings miss: {verdict(not failing)}"
        )
        for value, where in failing:
            print(f"  miss: {value:.3f} {where}")
    return passed


# Small samples: a dozen labels, piled at an end of the scale, from a judge that agrees poorly. What a new
# user labels first, and where PPI++'s tuned weight, fitted to the same few labels, can cost more than it
# saves (arXiv 2505.20178: it helps at n labels only when the judge's correlation exceeds about
# 1/sqrt(n - 2)); the estimate used is the narrower of the corrected and the labels-alone interval.
SMALL_LABELS = (10, 15, 20)
SMALL_ANSWERS = (24, 100)
SMALL_PILES = (0.05, 0.15, 0.85, 0.95)  # cell A's expected label on the 0-1 scale
SMALL_RHOS = (0.0, 0.15, 0.3)  # the judge's correlation with an answer's latent quality
SMALL_SMOKE = {"answers": (24,), "labels": (10, 20), "piles": (0.05, 0.95), "rhos": (0.0, 0.3)}
POWER_TOLERANCE = 0.02  # the corrected paired test may pick the better cell at most 2 points less often
SMALL_COUNTS = (
    "cover_a",
    "cover_b",
    "cover_d",
    "cover_lab",
    "alone",
    "picks",
    "picks_lab",
    "false",
    "false_lab",
)
SMALL_SUMS = ("width", "lab_width", "width_d", "lab_width_d")


def latent_mean(expected: float) -> float:
    """The latent mean whose expected 0-1 label is `expected`."""
    return brentq(lambda mu: expected_label(mu) - expected, -10.0, 10.0, xtol=1e-12)


@dataclass(frozen=True)
class SmallTask:
    """A chunk of replications of one N, pile, judge and scenario; every small n runs on them."""

    answers: int
    labelled: tuple[int, ...]
    pile: float
    rho: float
    scenario: str
    first: int
    replications: int
    seed: int


def run_small_task(task: SmallTask) -> dict:
    """Cell A's labels pile at `pile`; in `differ` cell B's expected label is SHIFT towards the middle of
    the scale (the better cell, where labels pile at the bottom; the worse, at the top). A uniform sample
    of n cases, both cells' answers labelled; the judge flatters A as in the main settings."""
    toward_middle = 1.0 if task.pile < 0.5 else -1.0
    mu_a = latent_mean(task.pile)
    mu_b = latent_mean(task.pile + toward_middle * SHIFT) if task.scenario == "differ" else mu_a
    key = [task.seed, 7, task.answers, SCENARIOS.index(task.scenario), round(task.pile * 100), task.first]
    truth, noise = np.random.default_rng(key), np.random.default_rng([*key, round(task.rho * 100)])
    cells = simulate(truth, noise, (task.replications, task.answers), task.rho, mu_b, mu_a)
    label_a, label_b = (cells.labels_a - 1) / 4, (cells.labels_b - 1) / 4
    judge_a, judge_b = (cells.judge_a - 1) / 4, (cells.judge_b - 1) / 4
    truth_a, truth_b = expected_label(mu_a), expected_label(mu_b)
    truth_d = truth_b - truth_a
    totals = {n: dict.fromkeys(SMALL_COUNTS + SMALL_SUMS, 0.0) for n in task.labelled}
    for row in range(task.replications):
        order = noise.permutation(task.answers)
        for n in task.labelled:
            mask = np.zeros(task.answers, dtype=bool)
            mask[order[:n]] = True
            a, b, d = estimates(judge_a[row], judge_b[row], label_a[row], label_b[row], mask, None)
            add_small(totals[n], a, b, d, truth_a, truth_b, truth_d)
    return {"task": task, "totals": totals}


def add_small(
    total: dict[str, float],
    a: Estimate,
    b: Estimate,
    d: Estimate,
    truth_a: float,
    truth_b: float,
    truth_d: float,
) -> None:
    for name, estimate, truth in (("a", a, truth_a), ("b", b, truth_b), ("d", d, truth_d)):
        total[f"cover_{name}"] += estimate.low <= truth <= estimate.high
        total["cover_lab"] += (estimate.labels_low <= truth <= estimate.labels_high) / 3
        total["alone"] += (not estimate.judge_used) / 3
    for estimate in (a, b):
        total["width"] += (estimate.high - estimate.low) / 2
        total["lab_width"] += (estimate.labels_high - estimate.labels_low) / 2
    total["width_d"] += d.high - d.low
    total["lab_width_d"] += d.labels_high - d.labels_low
    direction = np.sign(truth_d)
    alone = d.labels_only
    assert alone is not None and d.estimate is not None
    if direction:
        total["picks"] += d.p_value < ALPHA and np.sign(d.estimate) == direction
        total["picks_lab"] += d.labels_p_value < ALPHA and np.sign(alone.estimate) == direction
    else:
        total["false"] += d.p_value < ALPHA
        total["false_lab"] += d.labels_p_value < ALPHA


def small_tasks(args: argparse.Namespace) -> list[SmallTask]:
    grid = (
        SMALL_SMOKE
        if args.smoke
        else {
            "answers": SMALL_ANSWERS,
            "labels": SMALL_LABELS,
            "piles": SMALL_PILES,
            "rhos": SMALL_RHOS,
        }
    )
    found = []
    for answers in sorted(grid["answers"], reverse=True):
        for pile, rho, scenario in (
            (p, r, s) for p in grid["piles"] for r in grid["rhos"] for s in SCENARIOS
        ):
            for first in range(0, args.small_replications, CHUNK):
                found.append(
                    SmallTask(
                        answers=answers,
                        labelled=tuple(grid["labels"]),
                        pile=pile,
                        rho=rho,
                        scenario=scenario,
                        first=first,
                        replications=min(CHUNK, args.small_replications - first),
                        seed=args.seed,
                    )
                )
    return found


def collect_small(results: Iterable[dict]) -> dict[tuple[int, int, float, float, str], Setting]:
    """(n, N, pile, rho, scenario) -> its setting, the tasks' chunks summed."""
    settings: dict[tuple[int, int, float, float, str], Setting] = {}
    for result in results:
        task: SmallTask = result["task"]
        for n, total in result["totals"].items():
            setting = settings.setdefault((n, task.answers, task.pile, task.rho, task.scenario), Setting())
            setting.replications += task.replications
            if setting.totals is None:
                setting.totals = dict.fromkeys(total, 0.0)
            for key, value in total.items():
                setting.totals[key] += value
    return settings


def small_table(settings: dict, n: int, answers: int) -> list[dict]:
    rows = []
    for (size, big, pile, rho, scenario), s in sorted(settings.items()):
        if (size, big) != (n, answers):
            continue
        differ = scenario == "differ"
        rows.append(
            {
                "pile_A": f"{pile:.2f}",
                "rho": f"{rho:.2f}",
                "cells": scenario,
                "cov_A": f"{s.mean('cover_a'):.3f}",
                "cov_B": f"{s.mean('cover_b'):.3f}",
                "cov_diff": f"{s.mean('cover_d'):.3f}",
                "cov_labels": f"{s.mean('cover_lab'):.3f}",
                "alone": f"{s.mean('alone'):.2f}",
                "width": f"{s.mean('width'):.4f}",
                "ratio": f"{s.mean('width') / s.mean('lab_width'):.3f}",
                "ratio_diff": f"{s.mean('width_d') / s.mean('lab_width_d'):.3f}",
                "power": f"{s.mean('picks'):.3f}" if differ else "-",
                "power_labels": f"{s.mean('picks_lab'):.3f}" if differ else "-",
                "false_diff": "-" if differ else f"{s.mean('false'):.3f}",
                "false_labels": "-" if differ else f"{s.mean('false_lab'):.3f}",
            }
        )
    return rows


def small_name(key: tuple[int, int, float, float, str]) -> str:
    n, answers, pile, rho, scenario = key
    return f"n={n} N={answers} pile {pile:.2f} rho {rho:.2f} {scenario}"


def check_small(settings: dict) -> bool:
    """The small-sample targets, a PASS/FAIL line each (with every failing setting); True when all pass."""
    passed = True
    coverage = coverages(settings, small_name)
    misses = [item for item in coverage if item[0] < COVERAGE_GOAL]
    passed &= not misses
    lowest = coverage[0]
    print(
        f"small samples: coverage >= {COVERAGE_GOAL:.0%} (cell means and paired difference, every setting): "
        f"lowest {lowest[0]:.1%} ({lowest[1]}, {lowest[2]}); {len(misses)} of {len(coverage)} below: "
        f"{'PASS' if not misses else 'FAIL'}"
    )
    for value, where, what in misses:
        print(f"  short: {value:.3f} {where} {what}")
    ratios = sorted(
        (
            max(s.mean("width") / s.mean("lab_width"), s.mean("width_d") / s.mean("lab_width_d")),
            small_name(key),
        )
        for key, s in settings.items()
    )
    wider = [item for item in ratios if item[0] > 1.0]
    passed &= not wider
    print(
        f"small samples: width <= 1.00 x the labels alone (cell means and paired difference, every setting): "
        f"widest {ratios[-1][0]:.3f} ({ratios[-1][1]}): {'PASS' if not wider else 'FAIL'}"
    )
    gaps = sorted(
        (s.mean("picks") - s.mean("picks_lab"), small_name(key))
        for key, s in settings.items()
        if key[4] == "differ"
    )
    short = [item for item in gaps if item[0] < -POWER_TOLERANCE]
    passed &= not short
    print(
        f"small samples: power of the corrected paired test >= the labels alone's - {POWER_TOLERANCE:.0%} "
        f"(every setting with a difference): smallest gain {gaps[0][0]:+.3f} ({gaps[0][1]}): "
        f"{'PASS' if not short else 'FAIL'}"
    )
    for value, where in short:
        print(f"  short: {value:+.3f} {where}")
    return passed


def print_small(settings: dict) -> None:
    print(
        "\nSmall samples: n labelled cases of N, cell A's labels piled at pile_A (0-1 scale), cell B's "
        f"{SHIFT} towards the middle (differ) or the same; a uniform sample; the judge's latent correlation "
        "rho. alone: share of intervals that are the labels alone (the judge would have widened them). "
        "ratio / ratio_diff: mean width over the labels alone's on the same sample. power / power_labels: "
        "the corrected / the labels-alone paired test picks the better cell (p < 0.05); false_*: calls a "
        "difference without one."
    )
    for n, answers in sorted({(key[0], key[1]) for key in settings}, key=lambda k: (k[1], k[0])):
        print(f"\nsmall samples: n = {n} labelled of N = {answers}")
        print(rows_to_text(small_table(settings, n, answers)))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=4000, help="replications per setting")
    parser.add_argument("--seed", type=int, default=0, help="seeds the data, the judges and the plans")
    parser.add_argument(
        "--small-replications", type=int, default=4000, help="replications per small-sample setting"
    )
    parser.add_argument(
        "--part",
        choices=("all", "main", "small"),
        default="all",
        help="the main settings, the small-sample settings, or both (targets of the parts run)",
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    parser.add_argument(
        "--smoke", action="store_true", help="30 replications, N = 200 only, one process, targets not checked"
    )
    args = parser.parse_args()
    if args.smoke:
        args.replications = min(args.replications, 30)
        args.small_replications = min(args.small_replications, 20)
        args.jobs = 1
    if args.replications < 1:
        parser.error("--replications must be at least 1")
    return args


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    labels = LABELS_SMOKE if args.smoke else LABELS_FULL
    mu_b = gain_mu()
    rhos = {judge: calibrate(target, mu_b, args.seed) for judge, target in JUDGES.items()}
    print(
        f"prediction-powered means (ragbench.stats.ppi.ppi_mean), {args.replications} replications per "
        f"setting, seed {args.seed}; values on the 0-1 scale. Cells A and B answer the same N cases; true "
        f"means {expected_label(0.0):.4f} (A) and {expected_label(mu_b):.4f} (B, `differ`: +{SHIFT}) or "
        f"{expected_label(0.0):.4f} (B, `same`). The judge flatters A's answers labelled 1-2 by "
        f"+{FLATTERY} point on its latent reading."
    )
    for judge, target in JUDGES.items():
        print(f"  judge {judge}: rho {rhos[judge]:.3f}, calibrated to quadratic-weighted kappa {target}")
    print(
        "  plans: uniform; unsure:info / unsure:noinfo = uncertainty-weighted with the judge's uncertainty "
        "informative / uninformative. Labels: the first n cases of the plan's order, both cells."
    )
    print(
        "  cov_*: share of 95% intervals covering the truth (A, B, B - A corrected; labels: the labels-only "
        "interval of the plan's sample, both cells). width: mean corrected width (both cells); w_labels: "
        "labels alone on a uniform sample of n; ratio = width / w_labels (ratio_diff: the same for B - A). "
        "picks_B / false_diff: corrected paired test p < 0.05 picks B (differ) / calls a difference "
        "(same). judge_wrong: the judge alone's paired z-test picks A (differ) / calls a difference (same)."
    )
    todo = (tasks(labels, rhos, mu_b, args) if args.part != "small" else []) + (
        small_tasks(args) if args.part != "main" else []
    )
    results = run_all(todo, args.jobs, progress=not args.smoke)
    settings = collect(r for r in results if isinstance(r["task"], Task))
    small = collect_small(r for r in results if isinstance(r["task"], SmallTask))
    calibrated = True
    if settings:
        for answers in sorted(labels):
            for n in labels[answers]:
                print(f"\nn = {n} labelled cases of N = {answers}")
                print(rows_to_text(table(settings, n, answers)))
        print()
        for judge, target in JUDGES.items():
            measured = [s.kappa / s.replications for key, s in settings.items() if key[2] == judge]
            close = all(abs(value - target) <= KAPPA_TOLERANCE for value in measured)
            calibrated &= close
            print(
                f"judge {judge}: measured mean kappa {min(measured):.3f}-{max(measured):.3f} over the "
                f"settings, target {target} +- {KAPPA_TOLERANCE}: {'within' if close else 'OUTSIDE'}"
            )
    if small:
        print_small(small)
    seconds = time.perf_counter() - started
    if args.smoke:
        print(f"\n{seconds:.1f} s\nsmoke run: targets not checked")
        return 0
    print()
    passed = calibrated
    if settings:
        passed = check(settings) and passed
    if small:
        passed = check_small(small) and passed
    print(f"\n{seconds:.0f} s; targets: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
