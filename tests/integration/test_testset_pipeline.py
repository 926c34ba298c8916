"""`run.py testset` end to end on a small folder knowledge base, with the generator and the critic served by
the loopback fake server: the eval set becomes a versioned ZenML artifact and JSONL files, a benchmark
runs on it by artifact name, and its report says which eval set it used and breaks scores down by type."""

import json

import pytest
from zenml.client import Client

import run
from tests.projects import TESTSET_PAGES, serving_fake_openai, write_knowledge_base, write_testset_config

TOPICS = {"assert": "errors", "break": "loops", "with statement": "files"}


def responder(request: dict) -> str:
    """Generator: a question about the passage's topic; critics: 5, except groundedness of the loops
    question; reader: a refusal for the unanswerable question; judge: valid verdicts."""
    messages = request["messages"]
    system, user = messages[0]["content"], messages[1]["content"]
    topic = next((t for t in TOPICS if t in user), "break")
    if system.startswith("You write test questions"):
        if "does NOT answer" in user:
            return json.dumps({"question": f"How fast is the {topic} statement on a large input?"})
        return json.dumps(
            {"question": f"What does the {topic} statement do in Python?", "answer": f"{topic} works."}
        )
    if system.startswith("You check test questions"):
        low = "Grade the proposed answer" in system and "break statement do" in user
        return json.dumps({"reasoning": "scripted", "rating": 2 if low else 5})
    if not request.get("response_format"):  # the reader (the benchmark's, and the roundtrip filter's)
        question = user.rsplit("Question:", 1)[-1]
        asked = next((t for t in TOPICS if t in question), "break")
        return (
            "The context does not say."
            if "How fast" in question
            else f"The {asked} statement: {asked} works [1]."
        )
    if "faithfulness" in json.dumps(messages):
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 5, "helpfulness": 5, "toxicity": 1}
        )
    return json.dumps({"reasoning": "matches", "score": 5})


@pytest.fixture
def project(tmp_path, monkeypatch):
    write_knowledge_base(tmp_path, TESTSET_PAGES)
    with serving_fake_openai(tmp_path, monkeypatch, responder) as server:
        write_testset_config(
            tmp_path,
            server.base_url,
            name="gen",
            testset="unanswerable_share: 0.34, evolutions: {simple: 1.0}, filters: [critics, roundtrip]",
        )
        yield tmp_path, server


def test_testset_then_a_benchmark_on_it(project, capsys):
    root, server = project
    assert run.main(["testset", "--config", "config.yaml", "--dry-run"]) == 0
    assert server.request_count == 0  # a dry run calls nothing
    assert "generator" in capsys.readouterr().out

    assert run.main(["testset", "--config", "config.yaml"]) == 0
    out = capsys.readouterr().out
    assert "gen-eval-set version 1" in out
    folder = root / "out" / "testsets" / "gen-eval-set-v1"
    kept = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    rejected = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    summary = json.loads((folder / "summary.json").read_text())
    assert "Rejected (1)" in (folder / "eval_set.html").read_text()
    assert summary["chunks_sampled"] == 3 and summary["kept"] == len(kept) == 2
    assert [case["provenance"]["rejected_because"] for case in rejected] == [["groundedness 2 < 4"]]
    assert {case["expected_behaviour"] for case in kept} == {"answers", "declines"}
    models = {request["model"] for request in server.requests}
    assert models == {"fake-generator", "fake-critic"}

    artifact = Client().get_artifact_version("gen-eval-set")
    assert artifact.version == "1" and artifact.run_metadata["kept"] == 2
    assert artifact.run_metadata["rejected_by"] == {"groundedness": 1}
    assert [case.id for case in artifact.load().cases] == [case["id"] for case in kept]

    assert run.main(["--config", "config.yaml"]) == 0
    report = (root / "out" / "latest" / "results.html").read_text()
    assert "artifact gen-eval-set version 1" in report
    assert "Scores by case type" in report and "unanswerable" in report
    rows = (root / "out" / "latest" / "results.csv").read_text()
    assert "fail_declines" in rows
    pipeline_run = Client().get_pipeline("rag_benchmark").last_run
    assert pipeline_run.run_metadata["eval_set"] == "artifact gen-eval-set version 1"

    # a second generation is a new version; the benchmark can still name the first
    assert run.main(["testset", "--config", "config.yaml", "--set", "testset.seed=1"]) == 0
    assert Client().get_artifact_version("gen-eval-set").version == "2"
    assert run.main(["--config", "config.yaml", "--set", "eval_cases.version=1"]) == 0

    # a testset run has no metrics to be a baseline with: never a champion; nor a run of another config
    from ragbench.runs.names import TESTSET_PIPELINE

    testset_run = Client().get_pipeline(TESTSET_PIPELINE).last_run
    capsys.readouterr()
    assert run.main(["promote", testset_run.name]) == 2
    assert "not a benchmark run" in capsys.readouterr().err
    benchmark_run = Client().get_pipeline("rag_benchmark").last_run
    (root / "other.yaml").write_text((root / "config.yaml").read_text().replace("name: ", "name: other-", 1))
    assert run.main(["promote", benchmark_run.name, "--config", "other.yaml"]) == 2
    assert "not of 'other-" in capsys.readouterr().err
    assert run.main(["promote", benchmark_run.name, "--config", "config.yaml"]) == 0

    # a person's verdicts on the first set's candidates measure each filter: all three are good cases
    labels = [
        {"id": case["id"], "question": case["question"], "human_keep": True, "reason": "right and askable"}
        for case in kept + rejected
    ]
    (root / "labels.jsonl").write_text("\n".join(json.dumps(label) for label in labels))
    assert run.main(["testset", "--config", "config.yaml", "--set", "testset.labels=labels.jsonl"]) == 0
    assert "precision" in capsys.readouterr().out
    measured = Client().get_artifact_version("gen-eval-set").run_metadata["filter_agreement"]
    by_filter = {row["filter"]: row for row in measured}
    assert by_filter["roundtrip"]["labelled"] == 3 and by_filter["roundtrip"]["recall"] == 1.0
    assert by_filter["critics"]["precision"] == 1.0 and by_filter["critics"]["recall"] == pytest.approx(2 / 3)
    assert by_filter["combined"]["false_reject"] == 1
    page = (root / "out" / "testsets" / "gen-eval-set-v3" / "eval_set.html").read_text()
    assert "right and askable" in page  # the critics' disagreement, with the person's reason


def test_unknown_artifact_and_a_provider_outage_fail_clearly(project, capsys):
    root, server = project
    assert run.main(["--config", "config.yaml", "--set", "eval_cases.artifact=missing-set"]) == 2
    assert "no artifact 'missing-set'" in capsys.readouterr().err
    assert server.request_count == 0  # refused before any work

    server.all_fail = True
    assert run.main(["testset", "--config", "config.yaml", "--set", "testset.name=outage"]) == 2
    assert "3 generator and 0 critic call(s) failed" in capsys.readouterr().err
    assert (root / "out" / "testsets" / "outage-v1-INCOMPLETE" / "summary.json").is_file()
    assert not (root / "out" / "testsets" / "outage-v1").exists()
    # a benchmark never trusts the incomplete version
    assert run.main(["--config", "config.yaml", "--set", "eval_cases.artifact=outage"]) == 2
    assert "is incomplete" in capsys.readouterr().err

    server.all_fail = False
    before = server.request_count
    assert run.main(["testset", "--config", "config.yaml", "--set", "testset.name=outage"]) == 0
    generator_calls = [r for r in server.requests[before:] if r["model"] == "fake-generator"]
    assert len(generator_calls) == 3
    assert run.main(["--config", "config.yaml", "--set", "eval_cases.artifact=outage"]) == 0
