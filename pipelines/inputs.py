"""Inputs only the client can read (a folder or file on its disk) are stored in the artifact store as the
steps' `snapshot`, so a step on another machine never looks for the client's paths. The CLI takes the
snapshots from what its run plan read (`plan_snapshots`: the knowledge base, the eval cases and the labels
are read once per run) and hands the pipeline their artifact version ids; a pipeline started without them
(from Python) reads and stores them while it compiles. A snapshot whose content the newest version already
holds is reused, and the steps after ingest are keyed on content either way: an unchanged folder changes
no cache key. A ZenML schedule compiles once, so its runs keep the snapshot taken when it was installed (a
URI is read anew by every run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ragbench.config.model import BenchmarkConfig
from ragbench.hashing import sha256_hex
from ragbench.inputs.eval_cases import EvalCase, EvalSuite, load_eval_suite_from
from ragbench.inputs.knowledge_base import Corpus, load_corpus
from ragbench.review.labels import LabelFileError, ReviewLabels, check_labels, load_labels_file
from ragbench.store import given_store

if TYPE_CHECKING:
    from ragbench.config.plan import RunPlan

KNOWLEDGE_BASE_SNAPSHOT = "knowledge_base_snapshot"
EVAL_CASES_SNAPSHOT = "eval_cases_snapshot"
REVIEW_LABELS_SNAPSHOT = "review_labels_snapshot"


def knowledge_base_snapshot(settings: BenchmarkConfig, corpus: Corpus | None = None) -> Any:
    """The stored snapshot of a knowledge base on the client's disk (`corpus`: as already read), or None
    when the steps read it themselves."""
    if not settings.knowledge_base.on_client:
        return None
    corpus = load_corpus(settings.knowledge_base) if corpus is None else corpus
    return _stored(KNOWLEDGE_BASE_SNAPSHOT, corpus)


def eval_cases_snapshot(settings: BenchmarkConfig, suite: EvalSuite | None = None) -> Any:
    """The stored snapshot of eval cases on the client's disk (`suite`: as already read), or None."""
    if not settings.eval_cases.on_client:
        return None
    return _stored(EVAL_CASES_SNAPSHOT, load_eval_suite_from(settings.eval_cases) if suite is None else suite)


def review_labels_input(
    settings: BenchmarkConfig, labels: ReviewLabels | None = None, cases: list[EvalCase] | None = None
) -> Any:
    """The labels a judge is aligned with and the numbers are corrected by: a file the review page wrote
    (stored as a snapshot, like the client's eval cases; `labels`: as already read), or a version of the
    artifact `run.py review` publishes (`name` or `name:version`, the newest by default). Checked against
    the eval `cases` (read here when not given)."""
    source = settings.evaluation.labels_source
    if source is None:
        return None
    if source.endswith(".jsonl"):
        labels = load_labels_file(source) if labels is None else labels
        _check(labels, settings, source, cases)
        return _stored(REVIEW_LABELS_SNAPSHOT, labels)
    name, _, version = source.partition(":")
    try:
        found = given_store().artifact(name, version or None)
    except KeyError:
        raise LabelFileError(
            f"evaluation labels: no artifact {source!r} (label answers with run.py review, or give the "
            "labels file, a .jsonl path)"
        ) from None
    _check(found.load(), settings, source, cases)
    return found


class StoredInput(BaseModel, frozen=True):
    """One stored version: its artifact's name and its version."""

    name: str
    version: str


class InputSnapshots(BaseModel, frozen=True):
    """The stored versions of the run's inputs (None: the steps read that input themselves, or the run has
    no labels): what the CLI hands the benchmark pipeline as its `snapshots` parameter."""

    knowledge_base: StoredInput | None = None
    eval_cases: StoredInput | None = None
    review_labels: StoredInput | None = None

    def artifacts(self) -> tuple[Any, Any, Any]:
        """The stored versions themselves (step inputs), in field order; looked up by name and version
        (listed, not got by id: in a pipeline definition ZenML gives a lazy placeholder for that)."""
        store = given_store()
        knowledge_base, eval_cases, review_labels = (
            store.artifact(stored.name, stored.version) if stored is not None else None
            for stored in (self.knowledge_base, self.eval_cases, self.review_labels)
        )
        return knowledge_base, eval_cases, review_labels


def plan_snapshots(plan: RunPlan) -> InputSnapshots:
    """The snapshots of what the run plan read (nothing is read again)."""
    settings = plan.config
    source = settings.evaluation.labels_source or ""
    stored = {
        KNOWLEDGE_BASE_SNAPSHOT: knowledge_base_snapshot(settings, plan.corpus),
        EVAL_CASES_SNAPSHOT: eval_cases_snapshot(settings, plan.eval_suite),
        REVIEW_LABELS_SNAPSHOT if source.endswith(".jsonl") else source.partition(":")[0]: (
            review_labels_input(settings, plan.review_labels, plan.cases)
        ),
    }
    return InputSnapshots(
        **{
            field: StoredInput(name=name, version=str(found.version)) if found is not None else None
            for field, (name, found) in zip(InputSnapshots.model_fields, stored.items(), strict=True)
        }
    )


def client_inputs(settings: BenchmarkConfig, snapshots: Mapping[str, Any] | None) -> tuple[Any, Any, Any]:
    """The knowledge base, eval cases and labels the pipeline's steps read: the versions `snapshots` names
    (the CLI's, taken from its plan), else read and stored now (a pipeline started from Python)."""
    if snapshots is not None:
        return InputSnapshots.model_validate(snapshots).artifacts()
    return (
        knowledge_base_snapshot(settings),
        eval_cases_snapshot(settings),
        review_labels_input(settings),
    )


def _check(
    labels: ReviewLabels, settings: BenchmarkConfig, source: str, cases: list[EvalCase] | None
) -> None:
    """Labels of another scale or eval set fail the run before any step starts."""
    cases = load_eval_suite_from(settings.eval_cases).cases if cases is None else cases
    rubrics = settings.scoring().rubrics
    where = f"labels file {source}" if source.endswith(".jsonl") else f"labels artifact {source}"
    check_labels(labels, rubrics, {case.id for case in cases}, where)


def _stored(name: str, value: BaseModel) -> Any:
    """The artifact version holding `value`: the newest one if it holds the same content, else a new one."""
    digest = sha256_hex([value.model_dump_json()])
    return given_store().keep(name, value, "snapshot_sha256", digest)
