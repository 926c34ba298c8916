"""A real ZenML pipeline run on a small knowledge base with a real embedding model."""

import csv
import json

import pytest

import run
from ragbench.config.model import load_config
from tests.projects import write_project

DOCUMENTS = {
    "cooking/bread.md": "# Bread\nBread dough rises because yeast ferments sugar into carbon dioxide gas. "
    "Knead the dough for ten minutes and bake at 220 degrees Celsius.",
    "cooking/pasta.md": "# Pasta\nBoil pasta in salted water. Fresh egg pasta cooks in about two minutes, "
    "dried pasta takes eight to twelve minutes.",
    "space/mars.txt": "Mars is the fourth planet from the Sun. Its red colour comes from iron oxide dust. "
    "Olympus Mons on Mars is the tallest volcano in the solar system.",
    "space/moon.rst": "The Moon\n========\nThe Moon orbits Earth every 27.3 days and causes ocean tides "
    "through its gravity.",
    "garden/tomatoes.html": "<html><body><h1>Tomatoes</h1><p>Tomato plants need six to eight hours of "
    "sun and deep watering twice a week.</p></body></html>",
}
CASES = [
    {"id": "yeast", "question": "Why does dough get bigger?", "expected_sources": ["cooking/bread.md"]},
    {"id": "volcano", "question": "Where is the highest volcano?", "expected_sources": ["space/mars.txt"]},
    {"id": "tides", "question": "What makes the sea rise and fall?", "expected_sources": ["space/moon.rst"]},
    {
        "id": "sun",
        "question": "How much light do tomatoes want?",
        "expected_sources": ["garden/tomatoes.html"],
    },
    {
        "id": "noodles",
        "question": "How long do I cook dried noodles?",
        "expected_sources": ["cooking/pasta.md"],
    },
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "name: small\n"
        "grid: {chunk_size: [32, 64], embedding_model: [sentence-transformers/all-MiniLM-L6-v2], "
        "top_k: 5, reader: []}\n"  # retrieval only
        "retrieval: {metrics_k: 1}\n",
    )
    return tmp_path


def step_statuses(pipeline_run) -> dict[str, str]:
    return {name: str(step.status.value) for name, step in pipeline_run.steps.items()}


def test_pipeline_runs_grid_and_writes_report_and_metadata(project):
    assert run.main(["--config", "config.yaml"]) == 0
    rows = list(csv.DictReader((project / "out" / "latest" / "results.csv").open()))
    assert [row["label"] for row in rows] == ["cs32", "cs64"]
    assert [row["chunk_size"] for row in rows] == ["32", "64"]
    for row in rows:
        assert int(row["retrieval_cases"]) == len(CASES)
        assert float(row["hit_rate@1"]) >= 0.6  # paraphrased questions, but the topics are distinct
        assert float(row["failure_rate@1"]) == pytest.approx(1 - float(row["hit_rate@1"]))
        assert row["chunks_truncated"] == "0"
    html = (project / "out" / "latest" / "results.html").read_text()
    assert rows[1]["cell"] in html and "<svg" in html
    assert not (project / "out" / "latest" / "cases.jsonl").read_text()  # retrieval only: no answers
    # but what each cell searched per case, the question as asked (no rewrite), and what it found
    searched = [json.loads(line) for line in (project / "out" / "latest" / "searched.jsonl").open()]
    cells_and_cases = {(row["cell"], case["id"]) for row in rows for case in CASES}
    assert {(s["cell"], s["case_id"]) for s in searched} == cells_and_cases
    assert all(s["query_rewrite"] == "off" and not s["rewritten"] for s in searched)
    assert all(s["searched"] == [s["question"]] and s["retrieved_sources"] for s in searched)

    from zenml.client import Client

    pipeline_run = Client().get_pipeline("rag_benchmark").last_run
    cell = rows[1]["cell"]
    evaluate = pipeline_run.steps[f"retrieve_{cell}"]
    assert evaluate.run_metadata["hit_rate@1"] == float(rows[1]["hit_rate@1"])
    assert pipeline_run.run_metadata[f"mrr__{cell}"] == float(rows[1]["mrr"])
    index_step = next(name for name in pipeline_run.steps if name.startswith("index_cs64"))
    index = pipeline_run.steps[index_step].outputs["vector_index"][0]
    assert index.run_metadata["chunk_count"] > 0
    assert index.load().faiss_index.ntotal == index.run_metadata["chunk_count"]


def test_second_run_is_cached_and_a_changed_knowledge_base_invalidates(project):
    from zenml.client import Client

    config = load_config("config.yaml")
    assert run.main(["--config", "config.yaml"]) == 0
    first = step_statuses(Client().get_pipeline("rag_benchmark").last_run)
    assert run.main(["--config", "config.yaml"]) == 0
    second = step_statuses(Client().get_pipeline("rag_benchmark").last_run)
    # inputs read anew, bookkeeping, and the gate (whose baseline is whatever the store holds)
    uncached = {
        "ingest_knowledge_base",
        "load_eval_suite",
        "resolve_references",
        "build_results_table",
        "pass_llm_operations",
        "regression_gate",
    }
    assert {name: status for name, status in second.items() if name not in uncached} == {
        name: "cached" for name in second if name not in uncached
    }
    assert {second[name] for name in uncached} == {"completed"}
    assert set(first) == set(second)

    (project / "kb" / "space" / "mars.txt").write_text(DOCUMENTS["space/mars.txt"] + " Mars has two moons.")
    assert run.main(["--config", "config.yaml"]) == 0
    third = step_statuses(Client().get_pipeline("rag_benchmark").last_run)
    chunk_steps = [name for name in third if name.startswith("chunk_")]
    assert chunk_steps and all(third[name] == "completed" for name in chunk_steps)  # the edit is seen
    assert config.output_dir == str(project / "out")  # relative to the config file
