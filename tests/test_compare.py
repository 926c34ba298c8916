"""Runs over time: `run.py compare` flags metrics that moved the wrong way, `promote` names a champion."""

import pytest

import run
from ragbench.compare import RunRecord, compare_runs
from tests.projects import write_project

DOCUMENTS = {
    "bread.md": "# Bread\nBread dough rises because yeast ferments sugar into carbon dioxide gas.",
    "mars.md": "# Mars\nMars is the fourth planet. Olympus Mons on Mars is the tallest volcano there is.",
    "moon.md": "# Moon\nThe Moon orbits Earth every 27.3 days and causes ocean tides through its gravity.",
    "pasta.md": "# Pasta\nDried pasta cooks in eight to twelve minutes in salted boiling water.",
}
CASES = [
    {"id": "yeast", "question": "Why does dough get bigger?", "expected_sources": ["bread.md"]},
    {"id": "volcano", "question": "Where is the highest volcano?", "expected_sources": ["mars.md"]},
    {"id": "tides", "question": "What makes the sea rise and fall?", "expected_sources": ["moon.md"]},
    {"id": "noodles", "question": "How long do dried noodles cook?", "expected_sources": ["pasta.md"]},
]


def record(name: str, values: dict, fingerprint: str = "e1") -> RunRecord:
    metadata = {
        "metric_directions": {"mrr": "higher", "latency_p95_s": "lower"},
        "eval_fingerprint": fingerprint,
    }
    metadata |= {f"{metric}__{cell}": value for (metric, cell), value in values.items()}
    return RunRecord.from_metadata(name, "now", metadata)


def test_each_metric_regresses_in_its_own_direction_past_its_threshold():
    before = record("a", {("mrr", "c1"): 0.8, ("latency_p95_s", "c1"): 2.0, ("mrr", "gone"): 0.5})
    after = record("b", {("mrr", "c1"): 0.7, ("latency_p95_s", "c1"): 2.5, ("mrr", "new"): 0.9})
    comparison = compare_runs(after, before, thresholds={"latency_p95_s": 1.0}, default_threshold=0.05)
    assert [(r["metric"], r["cell"]) for r in comparison.regressions] == [("mrr", "c1")]  # latency within 1 s
    assert comparison.added_cells == ["new"] and comparison.removed_cells == ["gone"]
    slower = record("c", {("mrr", "c1"): 0.9, ("latency_p95_s", "c1"): 3.5})
    assert [r["metric"] for r in compare_runs(slower, before, {"latency_p95_s": 1.0}, 0.0).regressions] == [
        "latency_p95_s"
    ]
    assert not compare_runs(before, before, {}, 0.0).regressions


def test_the_leaderboard_page_escapes_what_it_shows():
    planted = "<script>alert(1)</script>"
    before = record(planted, {("mrr", planted): 0.9})
    page = compare_runs(record("b", {("mrr", planted): 0.1}), before, {}, 0.0).html()
    assert planted not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.integration
def test_an_edited_document_is_a_regression_and_an_unchanged_rerun_is_not(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "name: compare-test\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 4,"
        " reader: []}\n"
        "retrieval: {metrics_k: 1}\n",
    )
    compare = ["compare", "--config", "config.yaml"]
    assert run.main(compare) == 2  # no runs yet: bad input
    assert run.main(["--config", "config.yaml"]) == 0
    from zenml.client import Client

    first = Client().get_pipeline("rag_benchmark").last_run.name
    assert run.main(compare) == 2  # one run: nothing to compare with
    # the volcano paragraph moves to the moon page: retrieval for that question gets worse
    (tmp_path / "kb" / "mars.md").write_text("# Mars\nMars is the fourth planet from the Sun.")
    (tmp_path / "kb" / "moon.md").write_text(DOCUMENTS["moon.md"] + " Olympus Mons is a volcano.")
    assert run.main(["--config", "config.yaml"]) == 0
    capsys.readouterr()
    assert run.main(compare) == 1
    out = capsys.readouterr().out
    assert "REGRESSION mrr in cs64" in out and "REGRESSION hit_rate_at_1 in cs64" in out
    assert list((tmp_path / "out" / "compare").glob("*.html")) and list(
        (tmp_path / "out" / "compare").glob("*.json")
    )
    assert run.main(["--config", "config.yaml"]) == 0  # unchanged
    assert run.main(compare) == 0
    # the champion: the first run; against it the latest is a regression; promoting moves the tag
    assert run.main([*compare, "--against", "champion"]) == 2  # none yet
    assert run.main(["promote", first]) == 0
    assert run.main([*compare, "--against", "champion"]) == 1
    latest = Client().get_pipeline("rag_benchmark").last_run.name
    assert run.main(["promote", latest]) == 0
    champions = Client().list_pipeline_runs(tags=["equals:champion"]).items
    assert [r.name for r in champions] == [latest]
    assert run.main([*compare, "--against", "no-such-run"]) == 2
    assert run.main(["promote", "no-such-run"]) == 2
