"""bench/bench_ppi.py runs end to end on tiny data (`--smoke`) and prints what it promises: one table per
(n, N) with a row per judge, plan and scenario, coverages as shares, width ratios as positive numbers, the
measured kappa of each judge, and no target verdict (30 replications say nothing about 93% coverage).

`check_ppi` reads the output; it is what tests/system/test_bench_smoke.py's SMOKE_RUNS would run for
bench_ppi.py. The simulation's own pieces (the exact expected label, the calibrated gain, the vectorised
kappa) are checked against their definitions here too, since every coverage figure rests on them."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ragbench.stats.inference import weighted_kappa

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "bench_ppi.py"
HEADER = [
    "judge",
    "kappa",
    "plan",
    "cells",
    "cov_A",
    "cov_B",
    "cov_diff",
    "cov_labels",
    "lam",
    "width",
    "w_labels",
    "ratio",
    "ratio_diff",
    "picks_B",
    "false_diff",
    "judge_wrong",
]
SHARES = ["cov_A", "cov_B", "cov_diff", "cov_labels", "lam", "judge_wrong"]
RATIOS = ["width", "w_labels", "ratio", "ratio_diff"]


def tables(stdout: str) -> dict[tuple[int, int], list[dict[str, str]]]:
    """(n, N) -> the rows of the table printed under `n = .. labelled cases of N = ..`."""
    found: dict[tuple[int, int], list[dict[str, str]]] = {}
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        title = re.fullmatch(r"n = (\d+) labelled cases of N = (\d+)", line)
        if not title:
            continue
        header = lines[i + 1].split()
        assert header == HEADER, lines[i + 1]
        assert re.fullmatch(r"-+( +-+)*", lines[i + 2].strip()), lines[i + 2]
        rows = []
        for row in lines[i + 3 :]:
            if not row.strip():
                break
            rows.append(dict(zip(header, row.split(), strict=True)))
        found[(int(title.group(1)), int(title.group(2)))] = rows
    return found


SMALL_HEADER = [
    "pile_A",
    "rho",
    "cells",
    "cov_A",
    "cov_B",
    "cov_diff",
    "cov_labels",
    "alone",
    "width",
    "ratio",
    "ratio_diff",
    "power",
    "power_labels",
    "false_diff",
    "false_labels",
]


def check_small_tables(stdout: str) -> None:
    """The smoke run's small-sample tables: N = 24 with 10 and 20 labels, a row per pile, judge and
    scenario; shares in [0, 1]; the width never above the labels alone's (the estimate used is the
    narrower of the two, so even a few replications show it)."""
    lines = stdout.splitlines()
    found = {}
    for i, line in enumerate(lines):
        title = re.fullmatch(r"small samples: n = (\d+) labelled of N = (\d+)", line)
        if not title:
            continue
        assert lines[i + 1].split() == SMALL_HEADER, lines[i + 1]
        rows = []
        for row in lines[i + 3 :]:
            if not row.strip():
                break
            rows.append(dict(zip(SMALL_HEADER, row.split(), strict=True)))
        found[(int(title.group(1)), int(title.group(2)))] = rows
    assert sorted(found) == [(10, 24), (20, 24)], stdout
    for rows in found.values():
        assert [(r["pile_A"], r["rho"], r["cells"]) for r in rows] == [
            (pile, rho, cells)
            for pile in ("0.05", "0.95")
            for rho in ("0.00", "0.30")
            for cells in ("differ", "same")
        ]
        for row in rows:
            for column in ("cov_A", "cov_B", "cov_diff", "cov_labels", "alone"):
                assert 0 <= float(row[column]) <= 1, (column, row)
            assert 0 < float(row["ratio"]) <= 1.0 and 0 < float(row["ratio_diff"]) <= 1.0, row
            shown = ("power", "power_labels") if row["cells"] == "differ" else ("false_diff", "false_labels")
            assert all(0 <= float(row[column]) <= 1 for column in shown), row


def check_ppi(stdout: str) -> None:
    """Every (n, N) of a smoke run has its 18 rows (3 judges x 3 plans x 2 scenarios) with shares in [0, 1]
    and positive finite widths and ratios; each judge's kappa is measured near its target; no verdict."""
    found = tables(stdout)
    assert sorted(found) == [(20, 200), (40, 200), (80, 200)], stdout
    for rows in found.values():
        assert [(r["judge"], r["plan"], r["cells"]) for r in rows] == [
            (judge, plan, cells)
            for judge in ("low", "medium", "high")
            for plan in ("uniform", "unsure:info", "unsure:noinfo")
            for cells in ("differ", "same")
        ]
        for row in rows:
            for column in SHARES:
                assert 0 <= float(row[column]) <= 1, (column, row)
            for column in RATIOS:
                value = float(row[column])
                assert math.isfinite(value) and value > 0, (column, row)
            shown = row["picks_B"] if row["cells"] == "differ" else row["false_diff"]
            hidden = row["false_diff"] if row["cells"] == "differ" else row["picks_B"]
            assert 0 <= float(shown) <= 1 and hidden == "-", row
    for judge, target in (("low", 0.2), ("medium", 0.5), ("high", 0.8)):
        measured = re.search(
            rf"^judge {judge}: measured mean kappa (\S+)-(\S+) .*: (within|OUTSIDE)$", stdout, re.M
        )
        assert measured, stdout
        assert abs(float(measured.group(1)) - target) < 0.1 and abs(float(measured.group(2)) - target) < 0.1
    check_small_tables(stdout)
    assert "PASS" not in stdout and "FAIL" not in stdout, stdout
    assert stdout.rstrip().endswith("smoke run: targets not checked"), stdout


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/bench_ppi.py as a module (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_ppi", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_truth_is_the_model_expectation(bench: ModuleType) -> None:
    """The exact expected label (the truth every interval must cover) agrees with a large simulation, and
    cell B's calibrated latent mean gives exactly the stated +0.1."""
    rng = np.random.default_rng(1)
    for mu in (0.0, bench.gain_mu()):
        latent = mu + rng.normal(0, bench.CASE_SD, 400_000) + rng.normal(0, bench.ANSWER_SD, 400_000)
        simulated = float(((bench.to_scores(latent) - 1) / 4).mean())
        assert abs(simulated - bench.expected_label(mu)) < 0.002
    assert abs(bench.expected_label(bench.gain_mu()) - bench.expected_label(0.0) - bench.SHIFT) < 1e-9


def test_vectorised_kappa_is_weighted_kappa(bench: ModuleType) -> None:
    rng = np.random.default_rng(2)
    first = rng.integers(1, 6, (5, 60))
    second = np.clip(first + rng.integers(-2, 3, (5, 60)), 1, 5)
    ours = bench.quadratic_kappa(first, second)
    for row in range(5):
        assert ours[row] == pytest.approx(
            weighted_kappa(first[row].tolist(), second[row].tolist()), abs=1e-12
        )
