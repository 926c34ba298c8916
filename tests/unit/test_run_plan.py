"""The run plan reads each client input once: the checks read the knowledge base, the eval cases and the
labels file, and the snapshots the pipeline is handed are made from what they read; the grid is expanded
once; the dry run's text is rendered from the plan."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import pipelines.inputs
from cli.benchmark import plan_text
from ragbench import store
from ragbench.config import plan, preflight
from ragbench.config.model import load_config
from tests.projects import write_project
from tests.unit.test_labels_preflight import good_label

CASES = [
    {"id": f"c{k}", "question": f"What is {k}?", "reference_answer": f"{k}.", "expected_sources": ["a.md"]}
    for k in range(3)
]


@dataclass
class KeepingStore:
    """Keeps every value it is given, as version 1 of its name."""

    kept: dict[str, Any] = field(default_factory=dict)

    def keep(self, name: str, value: Any, digest_key: str, digest: str, metadata: Any = None) -> Any:
        self.kept[name] = value
        return SimpleNamespace(version="1", id=f"{name}-id")

    def artifact(self, name: str, version: str | None = None) -> Any:
        raise KeyError(name)

    def runs(self, pipeline: str | None, tags: Sequence[str] = (), size: int = 50) -> list[Any]:
        return []


@pytest.fixture
def reads(tmp_path, monkeypatch) -> Counter:
    """A project with a labels file; each read and expansion counted by the function's name."""
    import json

    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        CASES,
        "grid: {chunk_size: [64], top_k: [5], top_n: [1], reader: [openai/r], judge: [openai/j]}\n"
        "evaluation: {rubrics: [correctness], judge_check: null, "
        "label_correction: {labels: review_labels.jsonl}}\n",
    )
    labels = "\n".join(json.dumps(good_label(case["id"])) for case in CASES)
    (tmp_path / "review_labels.jsonl").write_text(labels + "\n")
    counted: Counter = Counter()
    for module, name in [
        (plan, "expand_grid"),
        (preflight, "load_corpus"),
        (preflight, "load_eval_suite_from"),
        (preflight, "load_labels_file"),
        (pipelines.inputs, "load_corpus"),
        (pipelines.inputs, "load_eval_suite_from"),
        (pipelines.inputs, "load_labels_file"),
    ]:
        function = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, _f=function, _n=name, **k: (counted.update([_n]), _f(*a, **k))[1]
        )
    replaced = store.use_store(KeepingStore())
    yield counted
    store.use_store(replaced)


def test_the_plan_reads_each_input_once_and_the_snapshots_are_made_from_what_it_read(tmp_path, reads):
    config = load_config(tmp_path / "config.yaml")
    run_plan = plan.make_run_plan(config, plan_only=True)
    snapshots = pipelines.inputs.plan_snapshots(run_plan)
    assert reads == {"expand_grid": 1, "load_corpus": 1, "load_eval_suite_from": 1, "load_labels_file": 1}
    kept = store.given_store().kept
    assert kept[pipelines.inputs.KNOWLEDGE_BASE_SNAPSHOT] is run_plan.corpus
    assert kept[pipelines.inputs.EVAL_CASES_SNAPSHOT] is run_plan.eval_suite
    assert kept[pipelines.inputs.REVIEW_LABELS_SNAPSHOT] is run_plan.review_labels
    assert snapshots.review_labels == pipelines.inputs.StoredInput(
        name=pipelines.inputs.REVIEW_LABELS_SNAPSHOT, version="1"
    )
    # the pipeline, compiled in this process, takes the plan's cells: no second expansion
    assert plan.planned_cells(config) is run_plan.cells and reads["expand_grid"] == 1
    text = plan_text(run_plan)
    cells = len(run_plan.cells)
    assert text.startswith("cell ") and f"\n{cells} cells: {cells} new, 0 reused" in text
    assert "\nLabel correction (" in text


def test_only_the_plan_expands_the_grid_in_the_core():
    """The dry run's and the checks' functions take the plan's cells (a required parameter): a second
    expansion per command cannot come back by a default; the core expands the grid in the plan alone."""
    import ragbench

    root = Path(ragbench.__file__).parent
    expanding = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "expand_grid(" in path.read_text() and path.name != "expand.py"
    )
    assert expanding == ["config/plan.py"]
