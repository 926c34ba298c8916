"""ragbench's prediction-powered mean on a uniform sample is PPI++ exactly as its reference code computes it:
the same tuned judge weight lam, point estimate and 95% interval as ppi-python 0.2.3 (`ppi_py`), to 1e-6.

ppi_py runs in its own environment (`.venv-ppi`, made by `make ppi-venv`, which `make test-slow` runs first)
through tests/conformance/ppi_side.py, once for all datasets. The datasets are seeded and cover what the
estimator meets: 1-5 judge scores normalised to 0-1, pass/fail, continuous values; 12, 40 and 150 labels
beside 50 to 1000 unlabelled answers; judges that agree with the person, that do not, one that disagrees
(lam clips to 0: the labels alone) and one whose scores vary less than the labels (lam clips to 1).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from ragbench.stats.ppi import ppi_mean, ppi_uniform

pytestmark = pytest.mark.slow  # needs .venv-ppi, which only make test-slow builds

ROOT = Path(__file__).resolve().parents[2]
PPI_PYTHON = ROOT / ".venv-ppi" / "bin" / "python"
PPI_SIDE = ROOT / "tests" / "conformance" / "ppi_side.py"
TOLERANCE = 1e-6
ALPHA = 0.05
Z = float(norm.isf(ALPHA / 2))
EXPLICIT_LAMS = [0.0, 0.3, 1.0]  # passed to both sides as given, beside the tuned one


class Dataset(NamedTuple):
    """A person's labels of n answers, the judge's scores of them and of N more answers nobody labelled."""

    labels: np.ndarray
    judge_labelled: np.ndarray
    judge_unlabelled: np.ndarray


def one_to_five(rng: np.random.Generator, size: int, agreeing: bool) -> tuple[np.ndarray, np.ndarray]:
    """1-5 scores normalised to 0-1: a judge off by at most one point, or one that scores at random."""
    truth = rng.integers(1, 6, size)
    judge = np.clip(truth + rng.integers(-1, 2, size), 1, 5) if agreeing else rng.integers(1, 6, size)
    return (truth - 1) / 4, (judge - 1) / 4


def binary(rng: np.random.Generator, size: int, flip: float, negate: bool = False) -> tuple[np.ndarray, ...]:
    """Pass/fail: the judge's verdict flipped with probability `flip` (and all of them negated: a judge
    that mostly says the opposite)."""
    truth = (rng.random(size) < 0.6).astype(float)
    judge = np.where(rng.random(size) < flip, 1 - truth, truth)
    return truth, (1 - judge if negate else judge)


def continuous(rng: np.random.Generator, size: int, slope: float, noise: float) -> tuple[np.ndarray, ...]:
    """Values in (0, 1): the judge's a line through the truth plus noise (slope 0: unrelated)."""
    truth = rng.beta(2, 3, size)
    return truth, slope * truth + rng.normal(0, noise, size)


Maker = Callable[[np.random.Generator, int], tuple[np.ndarray, ...]]
# id -> (labelled n, unlabelled N, how the labels and the judge's scores are made)
DATASETS: dict[str, tuple[int, int, Maker]] = {
    "1-5/agreeing/n40/N500": (40, 500, lambda rng, size: one_to_five(rng, size, True)),
    "1-5/random/n150/N1000": (150, 1000, lambda rng, size: one_to_five(rng, size, False)),
    "1-5/agreeing/n12/N50": (12, 50, lambda rng, size: one_to_five(rng, size, True)),
    "binary/agreeing/n12/N50": (12, 50, lambda rng, size: binary(rng, size, 0.15)),
    "binary/negative/n40/N200": (40, 200, lambda rng, size: binary(rng, size, 0.1, negate=True)),
    "binary/random/n150/N300": (150, 300, lambda rng, size: binary(rng, size, 0.5)),
    "continuous/agreeing/n150/N1000": (150, 1000, lambda rng, size: continuous(rng, size, 1.0, 0.1)),
    "continuous/random/n12/N300": (12, 300, lambda rng, size: continuous(rng, size, 0.0, 0.2)),
    "continuous/flat/n40/N50": (40, 50, lambda rng, size: continuous(rng, size, 0.4, 0.02)),
}
CLIPPED_TO = {"binary/negative/n40/N200": 0.0, "continuous/flat/n40/N50": 1.0}


def dataset(name: str) -> Dataset:
    n, big_n, make = DATASETS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    truth, judge = make(rng, n + big_n)
    return Dataset(truth[:n], judge[:n], judge[n:])


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    """ppi_py's results for every dataset, in one process (importing ppi_py loads numba)."""
    if not PPI_PYTHON.is_file():
        pytest.fail(f"{PPI_PYTHON} is missing: run `make ppi-venv` (make test-slow runs it)")
    payload = []
    for name in DATASETS:
        data = dataset(name)
        payload.append(
            {
                "id": name,
                "Y": data.labels.tolist(),
                "Yhat": data.judge_labelled.tolist(),
                "Yhat_unlabeled": data.judge_unlabelled.tolist(),
                "alpha": ALPHA,
                "lams": EXPLICIT_LAMS,
            }
        )
    done = subprocess.run(
        [str(PPI_PYTHON), str(PPI_SIDE)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= TOLERANCE


@pytest.mark.parametrize("name", DATASETS)
def test_same_tuned_lam_estimate_and_interval_as_ppi_py(name: str, reference: dict[str, Any]) -> None:
    theirs = reference[name]
    fitted = ppi_uniform(*dataset(name))
    estimate, error, lam = fitted.estimate, fitted.standard_error, fitted.lam
    assert close(lam, theirs["lam"]), (lam, theirs["lam"])
    assert close(estimate, theirs["estimate"]), (estimate, theirs["estimate"])
    low, high = theirs["ci"]
    assert close(estimate - Z * error, low) and close(estimate + Z * error, high), (error, low, high)
    if name in CLIPPED_TO:
        assert lam == theirs["lam"] == CLIPPED_TO[name]


@pytest.mark.parametrize("name", DATASETS)
def test_same_estimate_and_interval_with_lam_passed(name: str, reference: dict[str, Any]) -> None:
    """Each explicit lam (0: the labels alone, 1: plain PPI, and ppi_py's own tuned one) gives the same."""
    data = dataset(name)
    for theirs in reference[name]["explicit"]:
        fitted = ppi_uniform(*data, lam=theirs["lam"])
        estimate, error, lam = fitted.estimate, fitted.standard_error, fitted.lam
        assert lam == theirs["lam"]
        assert close(estimate, theirs["estimate"]), (lam, estimate, theirs["estimate"])
        low, high = theirs["ci"]
        assert close(estimate - Z * error, low) and close(estimate + Z * error, high), (lam, estimate, error)


@pytest.mark.parametrize("name", DATASETS)
def test_public_ppi_mean_on_a_labelled_subset(name: str, reference: dict[str, Any]) -> None:
    """`ppi_mean` over all answers, the unlabelled ones NaN, shuffled: the judge's scores of the answers
    left unlabelled are ppi_py's Yhat_unlabeled. Its estimate and tuned lam are ppi_py's. Its interval is
    deliberately not ppi_py's normal one (bench/bench_ppi.py measured that short of 95 % at 20 labels) but
    the textbook interval of a regression estimator, re-derived here from ppi_py's standard error: the
    correction's variance (ppi_py's minus its imputed part) and a tuned lam's delta-method variance times the
    gap it multiplies, scaled by n / (n - 1), t with n - 2 degrees of freedom. The labels-only side is
    `classical_mean_ci` with the unbiased (ddof 1) variance and t with n - 1."""
    theirs = reference[name]
    data = dataset(name)
    judge = np.concatenate([data.judge_labelled, data.judge_unlabelled])
    labels = np.concatenate([data.labels, np.full(data.judge_unlabelled.size, np.nan)])
    order = np.random.default_rng(7).permutation(judge.size)
    result = ppi_mean(judge[order], labels[order], confidence=1 - ALPHA)
    assert result.estimate is not None and result.low is not None and result.high is not None
    fitted = result.corrected_fit  # PPI++ with its tuned lam, whether or not it is the estimate used
    assert fitted is not None and close(fitted.estimate, theirs["estimate"])
    tuned_lam = theirs["lam"] if result.judge_used else 0.0
    assert result.judge_weight is not None and close(result.judge_weight, tuned_lam)
    n, lam = data.labels.size, theirs["lam"]
    their_error = (theirs["ci"][1] - theirs["ci"][0]) / (2 * Z)
    imputed = lam**2 * float(np.var(data.judge_unlabelled)) / data.judge_unlabelled.size
    residuals = data.labels - lam * data.judge_labelled
    gap = float(data.judge_unlabelled.mean() - data.judge_labelled.mean())
    judge_centred = data.judge_labelled - data.judge_labelled.mean()
    slope_variance = (
        float(
            ((residuals - residuals.mean()) * judge_centred)
            @ ((residuals - residuals.mean()) * judge_centred)
        )
        / float(judge_centred @ judge_centred) ** 2
    )
    error = np.sqrt(imputed + (their_error**2 - imputed + slope_variance * gap**2) * n / (n - 1))
    assert fitted.degrees_of_freedom == n - 2
    assert close(fitted.standard_error, error), (fitted.standard_error, error, their_error)
    quantile = float(student_t.isf(ALPHA / 2, n - 2))
    low, high = fitted.interval_at(ALPHA)
    assert close(low, fitted.estimate - quantile * error) and close(high, fitted.estimate + quantile * error)
    # the estimate used is the narrower of PPI++ and the labels alone
    labels_width = result.labels_high - result.labels_low
    assert result.judge_used == (high - low < labels_width)
    used = (low, high) if result.judge_used else (result.labels_low, result.labels_high)
    assert close(result.low, used[0]) and close(result.high, used[1])
    assert result.labels_low is not None and result.labels_high is not None and result.labels_mean is not None
    classical_low, classical_high = theirs["classical_ci"]
    assert close(result.labels_mean, (classical_low + classical_high) / 2)
    unbiased = float(student_t.isf(ALPHA / 2, n - 1)) / Z * np.sqrt(n / (n - 1))
    assert close(result.labels_high - result.labels_low, (classical_high - classical_low) * unbiased)
    assert (result.labels, result.answers, result.weighted) == (n, judge.size, False)


def test_the_datasets_cover_both_clips_and_a_useful_judge(reference: dict[str, Any]) -> None:
    """The fixed data exercise what they claim to: lam clipped at 0 and at 1, and strictly inside."""
    lams = {name: reference[name]["lam"] for name in DATASETS}
    assert {lams[name] for name in CLIPPED_TO} == {0.0, 1.0}
    assert lams["1-5/agreeing/n40/N500"] > 0.5 and lams["continuous/agreeing/n150/N1000"] > 0.5
    assert all(0 < lam < 1 for name, lam in lams.items() if name not in CLIPPED_TO and "agreeing" in name)
