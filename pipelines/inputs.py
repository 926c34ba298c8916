"""Inputs only the client can read (a folder or file on its disk) are loaded while the pipeline compiles on
the client and stored in the artifact store as the steps' `snapshot`, so a step on another machine never
looks for the client's paths. A snapshot whose content the newest version already holds is reused, and
the steps after ingest are keyed on content either way: an unchanged folder changes no cache key.
A ZenML schedule compiles once, so its runs keep the snapshot taken when it was installed (a URI is read
anew by every run)."""

from typing import Any

from pydantic import BaseModel

from ragbench.config.model import BenchmarkConfig
from ragbench.hashing import sha256_hex
from ragbench.inputs.eval_cases import load_eval_suite_from
from ragbench.inputs.knowledge_base import load_corpus
from ragbench.review.labels import LabelFileError, ReviewLabels, check_labels, load_labels_file
from ragbench.store import given_store

KNOWLEDGE_BASE_SNAPSHOT = "knowledge_base_snapshot"
EVAL_CASES_SNAPSHOT = "eval_cases_snapshot"
REVIEW_LABELS_SNAPSHOT = "review_labels_snapshot"


def knowledge_base_snapshot(settings: BenchmarkConfig) -> Any:
    if not settings.knowledge_base.on_client:
        return None
    return _stored(KNOWLEDGE_BASE_SNAPSHOT, load_corpus(settings.knowledge_base))


def eval_cases_snapshot(settings: BenchmarkConfig) -> Any:
    if not settings.eval_cases.on_client:
        return None
    return _stored(EVAL_CASES_SNAPSHOT, load_eval_suite_from(settings.eval_cases))


def review_labels_input(settings: BenchmarkConfig) -> Any:
    """The labels a judge is aligned with and the numbers are corrected by: a file the review page wrote
    (stored as a snapshot, like the client's eval cases), or a version of the artifact `run.py review`
    publishes (`name` or `name:version`, the newest by default)."""
    source = settings.evaluation.labels_source
    if source is None:
        return None
    if source.endswith(".jsonl"):
        labels = load_labels_file(source)
        _check(labels, settings, source)
        return _stored(REVIEW_LABELS_SNAPSHOT, labels)
    name, _, version = source.partition(":")
    try:
        found = given_store().artifact(name, version or None)
    except KeyError:
        raise LabelFileError(
            f"evaluation labels: no artifact {source!r} (label answers with run.py review, or give the "
            "labels file, a .jsonl path)"
        ) from None
    _check(found.load(), settings, source)
    return found


def _check(labels: ReviewLabels, settings: BenchmarkConfig, source: str) -> None:
    """Labels of another scale or eval set fail the run before any step starts."""
    cases = load_eval_suite_from(settings.eval_cases).cases
    rubrics = settings.scoring().rubrics
    where = f"labels file {source}" if source.endswith(".jsonl") else f"labels artifact {source}"
    check_labels(labels, rubrics, {case.id for case in cases}, where)


def _stored(name: str, value: BaseModel) -> Any:
    """The artifact version holding `value`: the newest one if it holds the same content, else a new one."""
    digest = sha256_hex([value.model_dump_json()])
    return given_store().keep(name, value, "snapshot_sha256", digest)
