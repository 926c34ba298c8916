"""Each test session gets its own ZenML store, set before zenml is imported anywhere; every test gets the
marker of the tier its folder names. Under pytest-xdist (`make test` runs two workers) each worker is a
session of its own: it imports this file, so it gets its own store and temp folder, and its share of the
cores for the threaded libraries."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="ragbench-tests-"))
os.environ["ZENML_CONFIG_PATH"] = str(_SESSION_DIR / "zenml")
os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("ZENML_LOGGING_VERBOSITY", "WARN")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# No machine here reaches the Hub; without these, datasets/transformers spend ~20 s per call retrying.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# xdist sets the worker count before a worker imports this file. Without a share each, every worker's
# torch, FAISS (OpenMP) and llama.cpp would start a thread per core, so two workers on two cores would run
# four busy threads; the subprocesses a test starts inherit the share.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, len(os.sched_getaffinity(0)) // _WORKERS))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAGBENCH_LOCAL_N_THREADS"):
        os.environ.setdefault(_variable, _SHARE)

REPO_ROOT = Path(__file__).resolve().parent.parent

if not getattr(sys.modules["__main__"], "__file__", None):
    # An xdist worker's main module is execnet's bootstrap, which has no file, and ZenML derives its source
    # root from that file (to resolve steps and flavors): every pipeline would fail with "Unable to determine
    # source root". Give it the root run.py gives it, the repository's.
    from zenml.utils.source_utils import set_custom_source_root

    set_custom_source_root(str(REPO_ROOT))

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# The folder a test file sits in is its tier: `make test-fast` runs tests/unit, `make test` every tier but
# docker. A test
# file outside them, or a unit test that says it needs more, stops the session before any test runs.
TIERS = {
    "unit": "core logic on small inputs: no pipeline, no model file, no server or subprocess",
    "integration": "runs real models, a real FAISS index or a real ZenML pipeline on small data",
    "system": "the product as a user meets it: the command line in fresh processes, servers (PostgreSQL, "
    "Chromium, crontab), the docs build, the reference implementations in their own environments, benches",
    "docker": "the pipeline in containers under ZenML's local_docker orchestrator: `make test-docker` only",
}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.relative_to(TESTS).parts[0]
        if tier not in TIERS:
            raise pytest.UsageError(
                f"{item.path} sits in no tier: move it under tests/{{{','.join(TIERS)}}}/"
            )
        if tier == "unit" and item.get_closest_marker("integration"):
            raise pytest.UsageError(f"{item.nodeid} is marked integration: move it to tests/integration/")
        item.add_marker(getattr(pytest.mark, tier))
