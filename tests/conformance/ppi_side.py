"""ppi_py's own prediction-powered means for conformance datasets: run with the python of `.venv-ppi`
(`make ppi-venv`), datasets as a JSON list on stdin, one result per dataset (by its id) as JSON on stdout.

Each dataset is a person's labels `Y`, the judge's scores of the same answers `Yhat`, the judge's scores of
the unlabelled answers `Yhat_unlabeled`, the interval's `alpha` and a few weights `lams` to pass explicitly.
The result holds, from ppi-python 0.2.3's public functions:
- the power-tuned point estimate (`ppi_mean_pointestimate`) and interval (`ppi_mean_ci`),
- the tuned weight lam itself, computed exactly as `ppi_mean_ci` computes it before recursing (ppi_py
  returns no lam: its private `_calc_lam_glm` on the gradients at the lam = 1 estimate, clipped),
- the point estimate and interval with that lam and with each of `lams` passed explicitly,
- the labels-only interval (`classical_mean_ci`).

Imports nothing of ragbench: it runs in its own environment, with the numpy numba wants.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import numpy as np

warnings.filterwarnings("ignore")

from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate  # noqa: E402
from ppi_py.ppi import _calc_lam_glm  # noqa: E402


def scalar(value: Any) -> float:
    """ppi_py's one-dimensional results are arrays of shape (1,) (or 0-d): the plain float."""
    return float(np.ravel(np.asarray(value, dtype=float))[0])


def interval(value: Any) -> list[float]:
    low, high = value
    return [scalar(low), scalar(high)]


def tuned_lam(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """The lam `ppi_mean_ci` tunes (its `lam is None` branch, d = 1, no weights), step by step."""
    pointest = ppi_mean_pointestimate(y, yhat, yhat_unlabeled, lam=1)
    grads = (y - pointest).reshape(-1, 1)
    grads_hat = (yhat - pointest).reshape(-1, 1)
    grads_hat_unlabeled = (yhat_unlabeled - pointest).reshape(-1, 1)
    return scalar(_calc_lam_glm(grads, grads_hat, grads_hat_unlabeled, np.eye(1), clip=True))


def result(dataset: dict[str, Any]) -> dict[str, Any]:
    y = np.asarray(dataset["Y"], dtype=float)
    yhat = np.asarray(dataset["Yhat"], dtype=float)
    yhat_unlabeled = np.asarray(dataset["Yhat_unlabeled"], dtype=float)
    alpha = float(dataset["alpha"])
    lam = tuned_lam(y, yhat, yhat_unlabeled)
    explicit = [
        {
            "lam": float(fixed),
            "estimate": scalar(ppi_mean_pointestimate(y, yhat, yhat_unlabeled, lam=float(fixed))),
            "ci": interval(ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=alpha, lam=float(fixed))),
        }
        for fixed in [*dataset["lams"], lam]
    ]
    return {
        "estimate": scalar(ppi_mean_pointestimate(y, yhat, yhat_unlabeled)),
        "ci": interval(ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=alpha)),
        "lam": lam,
        "explicit": explicit,
        "classical_ci": interval(classical_mean_ci(y, alpha=alpha)),
    }


def main() -> None:
    datasets = json.load(sys.stdin)
    json.dump({dataset["id"]: result(dataset) for dataset in datasets}, sys.stdout)


if __name__ == "__main__":
    main()
