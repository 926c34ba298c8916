"""An axis registered from outside the core (here, from this test, with no edit to ragbench) runs through a
real ZenML pipeline like a built-in one: the dry run plans a cell per value, each value gets its own retrieve
step (its stage key) while the chunk set and the BM25 index are shared, results.csv has its column and its
labels, the report names each cell by it, and a second run reuses every step."""

import csv

import pytest

import run
from ragbench.grid.axes import AXES, Axis
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

TOY = Axis(
    name="toy_variant",
    stage="retrieve",
    # trivial but real: the retrieve step is keyed by it and reads it back from its cell's spec
    consumer="steps.retrieve (the value is part of the retrieve key)",
    tag="tv-",
    label="variant ",
    off="off",
    off_text="off",
    default=["off"],
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "retrieval: {metrics_k: 1}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, reader: [], judge: [], "
        "toy_variant: [red, blue]}\n",  # retrieval only, with no embedding: nothing to load
    )
    AXES.register(TOY)
    yield tmp_path
    AXES.unregister(TOY.name)


def test_a_registered_axis_is_planned_run_keyed_reported_and_reused(project, capsys):
    assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "variant red" in plan and "variant blue" in plan

    assert run.main(["--config", "config.yaml"]) == 0
    with (project / "out" / "latest" / "results.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(row["toy_variant"], row["label"]) for row in rows] == [
        ("red", "variant red"),
        ("blue", "variant blue"),
    ]
    assert [row["cell"].split("_")[:4] for row in rows] == [["cs64", "o6", "bm25", "k3"]] * 2
    assert all("_tv_" in row["cell"] and row["retrieval_cases"] == str(len(CASES)) for row in rows)
    assert rows[0]["hit_rate@1"] == rows[1]["hit_rate@1"]  # the toy changes the key, not the search
    html = (project / "out" / "latest" / "results.html").read_text()
    assert "variant red" in html and "variant blue" in html

    from zenml.client import Client

    steps = Client().list_pipeline_runs(sort_by="desc:created", size=1).items[0].steps
    retrieve = sorted(name for name in steps if name.startswith("retrieve_"))
    assert len(retrieve) == 2 and any("tv_red" in name for name in retrieve)
    assert len([name for name in steps if name.startswith(("chunk_", "bm25_"))]) == 2  # shared by both

    assert run.main(["--config", "config.yaml"]) == 0
    steps = Client().list_pipeline_runs(sort_by="desc:created", size=1).items[0].steps
    assert all(steps[name].status.value == "cached" for name in retrieve)
