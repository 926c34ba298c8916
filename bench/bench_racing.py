"""Does racing a grid's cells keep the best one, stop no cell as good as the leader, and save calls?

Replays `ragbench.analysis.racing` exactly as the pipeline runs it (start_race, then a look after every
round of `batch` shared cases, each case order seeded), many times over:
- synthetic cells with known differences. Each case has a difficulty z ~ N(0, 1), each answer its own
  noise e ~ N(0, 0.7); cell k's latent quality on a case is q_k - z + e, with q = +gap for the first cell
  (the truly best) and 0 for the others. A judge-like score is clip(round(3 + latent), 1, 5), a binary
  score (pass/fail) latent > 0; both are compared, as every metric is, with the paired permutation test of
  the mean. Every cell answers and is judged: 2 calls per case per cell.
- equal cells (every q = 0): any elimination is a false one, the leader being picked from the same data
  included (Holm alone does not cover that).
- a real full evaluation's per-case values (`case_values.csv` as a run writes it: cell, label, metric,
  case, value), each replay a seeded permutation of its cases. The truly best is the cell with the best
  mean on all cases; the tie set is the real values shuffled among the cells case by case (every cell
  as good as any other, each case's difficulty kept), where any elimination is false. 1 call per case per
  cell: a retrieval metric costs no LLM call, so a case answered is the race's unit there.

The default real data, bench/data/race_replay_mrr.csv, is the mrr rows (cell, label, metric, case,
value) of the case_values.csv of a full run of the default config (configs/default.yaml: chunk sizes 128
and 256 x dense, bm25 and hybrid retrieval, 6 cells, every one of the 50 eval cases retrieved):

    python run.py
    grep -E '^cell,|,mrr,' output/latest/case_values.csv > bench/data/race_replay_mrr.csv

Criteria (PASS/FAIL; `--smoke` runs a tiny version and reports them without enforcing them):
- the best cell (or one within `--margin` of it) is kept in >= 95% of the replays of every scenario with
  a truly best cell;
- with equal cells, the share of replays with any elimination is <= alpha (printed with its Wilson 95%
  interval);
- on the clear-winner grid, the race's reader and judge calls are <= 20% of a full evaluation's (mean over
  replays); the harder and the binary scenarios show where that does not hold (reported, not enforced).

    python bench/bench_racing.py [--replays 200] [--harder-replays 100] [--null-replays 400]
        [--binary-replays 20] [--real-replays 100] [--tie-replays 100] [--case-values PATH] [--metric mrr]
        [--lower-is-better] [--margin M] [--alpha 0.05] [--batch 8] [--jobs 2]
        [--smoke]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parent.parent

from ragbench.analysis.racing import RaceConfig, RaceTrace, look, start_race  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.retrieval.measures import RETRIEVAL_MEASURES  # noqa: E402
from ragbench.stats.formatting import interval_text  # noqa: E402
from ragbench.stats.inference import StatisticsConfig, wilson_interval  # noqa: E402

REAL_DATA = ROOT / "bench" / "data" / "race_replay_mrr.csv"
KEEP_GOAL = 0.95
SHARE_GOAL = 0.20
NOISE_SD = 0.7  # each answer's own noise, on the latent scale where case difficulty has SD 1
STATISTICS = StatisticsConfig()  # the product's seed and resamples for every look


class Replay(NamedTuple):
    """One race's outcome as the criteria read it."""

    kept_best: bool
    any_eliminated: bool
    share: float


@dataclass(frozen=True)
class Scenario:
    """Races of one kind: synthetic cells (`gap`, `binary`) or real values (`values`, `shuffled`)."""

    name: str
    cells: int
    cases: int
    replays: int
    settings: RaceConfig
    higher_is_better: bool = True
    gap: float = 0.0
    binary: bool = False
    calls_per_case: int = 2
    values: Mapping[str, Mapping[str, float]] | None = None
    shuffled: bool = False  # real values exchanged among the cells case by case: a tie set
    seed: int = 0
    about: str = ""

    @property
    def null(self) -> bool:
        """Every cell as good as every other: nothing to keep, any elimination is false."""
        return self.shuffled or (self.values is None and self.gap == 0)


def expected_score(quality: float, *, binary: bool) -> float:
    """A synthetic cell's true mean: its latent quality q - z + e is N(q, 1 + NOISE_SD^2)."""
    scale = math.hypot(1.0, NOISE_SD)
    if binary:
        return float(norm.sf(0.0, loc=quality, scale=scale))
    # clip(round(3 + latent), 1, 5) = 1 + the number of steps -1.5, -0.5, 0.5, 1.5 the latent reaches
    return 1.0 + float(sum(norm.sf(step, loc=quality, scale=scale) for step in (-1.5, -0.5, 0.5, 1.5)))


def synthetic_values(scenario: Scenario, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """cell -> case -> value; cell c0 is the truly best when gap > 0."""
    difficulty = rng.normal(0.0, 1.0, scenario.cases)
    values = {}
    for k in range(scenario.cells):
        quality = scenario.gap if k == 0 else 0.0
        latent = quality - difficulty + rng.normal(0.0, NOISE_SD, scenario.cases)
        scores = (latent > 0).astype(float) if scenario.binary else np.clip(np.round(3 + latent), 1, 5)
        values[f"c{k}"] = {f"q{i:03d}": float(v) for i, v in enumerate(scores)}
    return values


def shuffled_among_cells(
    values: Mapping[str, Mapping[str, float]], rng: np.random.Generator
) -> dict[str, dict[str, float]]:
    """Each case's values dealt out to the cells at random: the cells become exchangeable."""
    cells = list(values)
    cases = sorted({case for by_case in values.values() for case in by_case})
    out: dict[str, dict[str, float]] = {cell: {} for cell in cells}
    for case in cases:
        column = [values[cell].get(case, math.nan) for cell in cells]
        for cell, value in zip(cells, rng.permutation(column), strict=True):
            out[cell][case] = float(value)
    return out


def means(values: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {cell: float(np.nanmean(list(by_case.values()))) for cell, by_case in values.items()}


def good_cells(true_means: Mapping[str, float], higher_is_better: bool, margin: float | None) -> set[str]:
    """The best cell and any within the margin of it: keeping one of them is keeping the best."""
    sign = 1.0 if higher_is_better else -1.0
    best = max(sign * mean for mean in true_means.values())
    return {cell for cell, mean in true_means.items() if sign * mean >= best - (margin or 0.0)}


def race(
    values: Mapping[str, Mapping[str, float]],
    order: Sequence[str],
    scenario: Scenario,
) -> RaceTrace:
    """A race as the pipeline runs it: after each round, every survivor's values on the cases answered so
    far and its calls (every survivor answered every case so far)."""
    trace = start_race(
        list(values),
        order,
        scenario.settings,
        metric_label=scenario.settings.metric,
        higher_is_better=scenario.higher_is_better,
        test="paired_permutation",
    )
    seen: dict[str, dict[str, float]] = {cell: {} for cell in values}
    while (span := trace.next_cases()) is not None:
        start, stop = span
        for cell in trace.survivors:
            new = trace.order[start:stop]
            seen[cell].update((case, values[cell][case]) for case in new if case in values[cell])
        trace = look(
            trace,
            {cell: seen[cell] for cell in trace.survivors},
            {cell: scenario.calls_per_case * stop for cell in trace.survivors},
            seed=STATISTICS.seed,
            resamples=STATISTICS.resamples,
        )
    return trace


def replay(task: tuple[Scenario, int]) -> Replay:
    """Replay number `index` of a scenario, seeded by the scenario and the index alone (any --jobs)."""
    scenario, index = task
    rng = np.random.default_rng([scenario.seed, index])
    if scenario.values is None:
        values = synthetic_values(scenario, rng)
        qualities = {cell: scenario.gap if cell == "c0" else 0.0 for cell in values}
        true_means = {cell: expected_score(q, binary=scenario.binary) for cell, q in qualities.items()}
    else:
        values = shuffled_among_cells(scenario.values, rng) if scenario.shuffled else dict(scenario.values)
        true_means = means(scenario.values)
    cases = sorted({case for by_case in values.values() for case in by_case})
    trace = race(values, [cases[i] for i in rng.permutation(len(cases))], scenario)
    kept = set(trace.survivors)
    good = (
        set(values)
        if scenario.null
        else good_cells(true_means, scenario.higher_is_better, scenario.settings.margin)
    )
    return Replay(
        kept_best=bool(kept & good),
        any_eliminated=len(kept) < len(values),
        share=float(trace.share_of_full or 0.0),
    )


def run(scenario: Scenario, jobs: int) -> list[Replay]:
    tasks = [(scenario, index) for index in range(scenario.replays)]
    if jobs == 1:
        return [replay(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(replay, tasks, chunksize=max(1, len(tasks) // (4 * jobs))))


def load_case_values(
    path: Path, metric: str | None
) -> tuple[str, dict[str, dict[str, float]], dict[str, str]]:
    """(metric, cell -> case -> value, cell -> label) of one metric of a case_values.csv; an empty value
    (not scored) is NaN. Without `metric`, the file must hold only one."""
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    metrics = sorted({row["metric"] for row in rows})
    if metric is None:
        if len(metrics) != 1:
            raise SystemExit(f"{path} holds metrics {metrics}: choose one with --metric")
        metric = metrics[0]
    if metric not in metrics:
        raise SystemExit(f"{path} has no metric {metric!r} (it has {metrics})")
    values: dict[str, dict[str, float]] = {}
    labels: dict[str, str] = {}
    for row in rows:
        if row["metric"] == metric:
            values.setdefault(row["cell"], {})[row["case"]] = (
                float(row["value"]) if row["value"] else math.nan
            )
            labels[row["cell"]] = row["label"]
    return metric, values, labels


def retrieval_direction(metric: str) -> bool | None:
    """higher_is_better of a retrieval metric's column (any k), None for any other metric."""
    for measure in RETRIEVAL_MEASURES:
        prefix = measure.column_prefix
        if metric == measure.column or ("{" in measure.column and metric.startswith(prefix)):
            return measure.higher_is_better
    return None


def rate(count: int, n: int) -> str:
    return f"{count / n:.1%} ({count}/{n})"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=200, help="replays of the clear scenario")
    parser.add_argument("--harder-replays", type=int, default=100, help="replays of the harder scenario")
    parser.add_argument("--null-replays", type=int, default=400, help="replays with equal cells")
    parser.add_argument("--binary-replays", type=int, default=20, help="replays of the binary scenario")
    parser.add_argument("--real-replays", type=int, default=100, help="replays of the real values")
    parser.add_argument("--tie-replays", type=int, default=100, help="replays of the real values shuffled")
    parser.add_argument("--case-values", type=Path, default=REAL_DATA, help="a run's case_values.csv")
    parser.add_argument("--metric", help="the metric of --case-values raced on (default: its only one)")
    parser.add_argument(
        "--lower-is-better", action="store_true", help="for a --metric that is not a retrieval metric"
    )
    parser.add_argument("--margin", type=float, help="search.margin: equivalence within it ends a race")
    parser.add_argument("--alpha", type=float, default=RaceConfig.model_fields["alpha"].default)
    parser.add_argument("--batch", type=int, default=RaceConfig.model_fields["batch"].default)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    parser.add_argument(
        "--smoke", action="store_true", help="5 replays each, 4 cells x 40 cases, nothing enforced"
    )
    args = parser.parse_args()
    if args.smoke:
        args.replays = args.harder_replays = args.null_replays = args.binary_replays = 5
        args.real_replays = args.tie_replays = 5
        args.jobs = 1
    return args


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The synthetic scenarios on a grid of 8 cells x 200 cases (4 x 40 in smoke), then the real values."""
    cells, cases = (4, 40) if args.smoke else (8, 200)
    metric, real, labels = load_case_values(args.case_values, args.metric)
    known = retrieval_direction(metric)
    if known is True and args.lower_is_better:
        raise SystemExit(f"{metric} is a retrieval metric whose higher values are better")
    higher = known if known is not None else not args.lower_is_better
    if args.smoke:  # the first 4 cells by label
        real = {cell: real[cell] for cell in sorted(real, key=labels.__getitem__)[:4]}

    def settings(name: str) -> RaceConfig:
        return RaceConfig(
            strategy="race", metric=name, batch=args.batch, alpha=args.alpha, margin=args.margin
        )

    def synthetic(name: str, gap: float, binary: bool, replays: int, seed: int) -> Scenario:
        expected = [expected_score(q, binary=binary) for q in (gap, 0.0)]
        if binary:
            about = f"pass/fail; pass rate {expected[0]:.2f} vs {expected[1]:.2f}"
        else:
            about = f"judge-like 1-5 scores; expected score {expected[0]:.2f} vs {expected[1]:.2f}"
        lead = f"c0's latent +{gap} SD" if gap else "every cell's latent 0"
        return Scenario(
            name,
            cells,
            cases,
            replays,
            settings("score"),
            gap=gap,
            binary=binary,
            seed=seed,
            about=f"{cells} cells x {cases} cases, {lead}: {about}",
        )

    best = sorted(good_cells(means(real), higher, args.margin), key=labels.__getitem__)
    real_cases = len({case for by_case in real.values() for case in by_case})
    direction = "higher" if higher else "lower"
    common = {"cells": len(real), "cases": real_cases, "settings": settings(metric)}
    common |= {"higher_is_better": higher, "calls_per_case": 1, "values": real}
    return [
        synthetic("clear", 1.0, False, args.replays, 1),
        synthetic("harder", 0.5, False, args.harder_replays, 2),
        synthetic("binary", 1.0, True, args.binary_replays, 3),
        synthetic("equal", 0.0, False, args.null_replays, 4),
        Scenario(
            f"real-{metric}",
            **common,
            replays=args.real_replays,
            seed=5,
            about=f"{args.case_values.name}, {direction} is better; best mean on all cases: "
            + ", ".join(labels[cell] for cell in best),
        ),
        Scenario(
            f"tie-{metric}",
            **common,
            replays=args.tie_replays,
            shuffled=True,
            seed=6,
            about="the same values dealt out among the cells at random case by case (all equally good)",
        ),
    ]


def main() -> int:
    args = parse_args()
    races = scenarios(args)
    print(
        f"racing: alpha {args.alpha}, batch {args.batch}, margin {args.margin}; a seeded case order per "
        "replay. Calls: 2 per case per cell (reader + judge) on synthetic cells, 1 per case per cell on "
        f"real values. Synthetic: case difficulty SD 1, answer noise SD {NOISE_SD}, the other cells' latent 0"
    )
    rows, outcomes = [], {}
    for scenario in races:
        print(f"  {scenario.name}: {scenario.about}")
        started = time.perf_counter()
        replays = outcomes[scenario.name] = run(scenario, args.jobs)
        shares = [replay.share for replay in replays]
        rows.append(
            {
                "scenario": scenario.name,
                "cells": scenario.cells,
                "cases": scenario.cases,
                "replays": scenario.replays,
                "best_kept": "-" if scenario.null else float(np.mean([r.kept_best for r in replays])),
                "any_eliminated": float(np.mean([r.any_eliminated for r in replays])),
                "share_mean": float(np.mean(shares)),
                "share_max": float(np.max(shares)),
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
    print()
    print(rows_to_text(rows), end="\n\n")

    passed = True

    def verdict(met: bool) -> str:
        nonlocal passed
        passed &= args.smoke or met
        if args.smoke:
            return f"{'met' if met else 'missed'}, not enforced (smoke)"
        return "PASS" if met else "FAIL"

    within = f" (or one within {args.margin})" if args.margin else ""
    for scenario in races:
        replays, n = outcomes[scenario.name], scenario.replays
        if scenario.null:
            eliminated = sum(replay.any_eliminated for replay in replays)
            low, high = wilson_interval(eliminated, n) or (0.0, 1.0)
            print(
                f"false elimination (any cell) <= alpha {args.alpha:.0%} ({scenario.name}): "
                f"{rate(eliminated, n)}, Wilson 95% {interval_text(low, high, digits=1, percent=True)}: "
                f"{verdict(eliminated / n <= args.alpha)}"
            )
        else:
            kept = sum(replay.kept_best for replay in replays)
            print(
                f"best cell kept{within} >= {KEEP_GOAL:.0%} ({scenario.name}): {rate(kept, n)}: "
                f"{verdict(kept / n >= KEEP_GOAL)}"
            )
    for row in rows:
        if row["best_kept"] == "-":
            continue
        shown = (
            f"share of a full evaluation's calls ({row['scenario']}): "
            f"mean {row['share_mean']:.1%}, max {row['share_max']:.1%}"
        )
        if row["scenario"] == "clear":
            print(f"{shown}; <= {SHARE_GOAL:.0%} (mean): {verdict(row['share_mean'] <= SHARE_GOAL)}")
        else:
            print(f"{shown}; reported, not a criterion")
    enforced = " (smoke: criteria not enforced)" if args.smoke else ""
    print(
        f"\ngoal: best kept, false eliminations <= alpha, a clear winner for <= {SHARE_GOAL:.0%} of the "
        f"calls{enforced} -> {'PASS' if passed else 'FAIL'}"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
