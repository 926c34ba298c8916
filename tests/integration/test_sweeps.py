"""Sweeps: a pipeline started from Python makes every output; adding a value to an axis recomputes only
the new cells (steps counted in ZenML, LLM calls counted at the loopback server); hostile text from a
document and from an answer comes out escaped in the report."""

import json

import pytest
from zenml.client import Client

from pipelines import rag_benchmark
from ragbench.config.model import load_config
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import fake_llm_config, write_knowledge_base

PLANTED = "<script>alert('planted')</script>"
DOCUMENTS = {
    "errors.md": f"# Errors\nA failing assert statement raises AssertionError. {PLANTED}",
    "loops.md": "# Loops\nThe break statement ends the innermost loop at once.",
    "files.md": "# Files\nThe with statement closes a file automatically when the block ends.",
}
CASES = [
    {
        "id": "assert",
        "question": "Which exception does a failing assert raise?",
        "good_words": ["AssertionError"],
    },
    {"id": "break", "question": "How do I leave a loop early?", "good_words": ["break"]},
    {"id": "with", "question": "What closes a file for me?", "good_words": ["with"]},
]
REFERENCES = ["AssertionError.", "Use break.", "The with statement."]
for case, source, reference in zip(CASES, DOCUMENTS, REFERENCES, strict=True):
    case |= {"expected_sources": [source], "reference_answer": reference}
ALWAYS_RUN = {  # read inputs, assemble, pass operational settings, gate
    "ingest_knowledge_base",
    "load_eval_suite",
    "resolve_references",
    "build_results_table",
    "pass_llm_operations",
    "regression_gate",
}


def responder(request: dict) -> str:
    """Every verdict valid, so nothing is re-asked and every call is cached: counts are exact."""
    if not request.get("response_format"):
        return (
            f"It is AssertionError [1]. {PLANTED}" if "assert" in last_user_text(request) else "Use it [1]."
        )
    if "faithfulness" in json.dumps(request["messages"]):
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    return json.dumps({"reasoning": "matches", "score": 5})


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        write_knowledge_base(tmp_path, DOCUMENTS, CASES)
        fake_llm_config(tmp_path, server.base_url, name=f"sweep-{tmp_path.name}", grid="top_k: 3, top_n: 2")
        yield tmp_path, server


def run_grid(server: FakeOpenAIServer, *overrides: str):
    """Run the pipeline from Python (no run.py); return the run, its new steps and the LLM calls it made."""
    before = server.request_count
    config = load_config("config.yaml", list(overrides))
    pipeline_run = rag_benchmark(config=config.model_dump(mode="json"))
    pipeline_run = Client().get_pipeline_run(pipeline_run.id)
    ran = sorted(
        name
        for name, step in pipeline_run.steps.items()
        if step.status.value == "completed" and name not in ALWAYS_RUN
    )
    return pipeline_run, ran, server.request_count - before


def outputs(pipeline_run):
    results = pipeline_run.steps["build_results_table"]
    return results.outputs["results"][0].load(), results.outputs["case_records"][0].load()


def test_python_run_makes_every_output_and_escapes_planted_html(project):
    _, server = project
    pipeline_run, ran, calls = run_grid(server)
    assert [name.split("_")[0] for name in ran] == ["answer", "chunk", "index", "judge", "retrieve"]
    assert calls == 3 + 3 * 2  # 3 answers; 3 correctness + 3 context verdicts
    table, records = outputs(pipeline_run)
    assert len(table.rows) == 1 and table.rows[0]["correctness_0to1"] == 1.0
    assert len(records.records) == 3
    planted = next(r for r in records.records if r.case_id == "assert")
    assert PLANTED in planted.answer.answer and PLANTED in planted.answer.contexts[0].text
    assert PLANTED not in table.report_html and "<script>alert" not in table.report_html
    # shown as text: the answers and passages travel as escaped JSON, inserted with textContent
    assert "\\u003cscript\\u003ealert('planted')" in table.report_html
    # the report is also the run's visualization in the dashboard
    artifact = pipeline_run.steps["build_results_table"].outputs["results"][0]
    visualizations = [v.uri for v in artifact.visualizations]
    assert any(uri.endswith("report.html") for uri in visualizations)
    assert any(uri.endswith("results.csv") for uri in visualizations)
    # headline metrics are flat run metadata that ZenML's own filters can query
    key = f"correctness_0to1__{table.rows[0]['cell']}"
    assert pipeline_run.run_metadata[key] == 1.0
    found = Client().list_pipeline_runs(run_metadata=[f"{key}:gte:0.5"])
    assert pipeline_run.id in [r.id for r in found.items]


@pytest.mark.parametrize(
    ("override", "new_steps", "new_calls"),
    [
        # a second judge grades the same answers: one judge step, its own 6 verdicts, no new answers
        (
            "grid.judge=[openai/fake-judge, openai/fake-judge-2]",
            ["judge"],
            6,
        ),
        # a second top_n: new answers (other passages) and new context verdicts; correctness prompts
        # hold the same question, reference and answer, so the LLM cache answers them
        ("grid.top_n=[2, 1]", ["answer", "judge"], 3 + 3),
        # a second prompt template: new answers, the same answer text, so no new verdicts
        (
            "prompts={short: {system: 'Answer briefly or say {refusal}', "
            "user: '{passages} Q: {question}'}}\ngrid.prompt=[default, short]",
            ["answer", "judge"],
            3,
        ),
        # the same model name from another provider is another cell: new answers, same verdicts
        ("grid.reader=[openai/fake-reader, hosted_vllm/fake-reader]", ["answer", "judge"], 3),
        # another retrieval depth: only a new retrieval step; answers use top_n of the same ranking
        ("grid.top_k=[3, 2]", ["answer", "judge", "retrieve"], 0),
    ],
)
def test_adding_an_axis_value_recomputes_only_the_new_cells(project, override, new_steps, new_calls):
    _, server = project
    run_grid(server)
    pipeline_run, ran, calls = run_grid(server, *override.split("\n"))
    assert sorted(name.split("_")[0] for name in ran) == new_steps, ran
    assert calls == new_calls
    table, _ = outputs(pipeline_run)
    assert len(table.rows) == 2
    assert len({row["cell"] for row in table.rows}) == 2
    assert sum(row["reused"] for row in table.rows) == 1  # the old cell came from the cache, and says so


def test_dry_run_plans_new_and_reused_cells_without_calling_anything(project, capsys, monkeypatch):
    import run

    _, server = project
    run_grid(server)
    calls = server.request_count
    monkeypatch.delenv("OPENAI_API_KEY")  # planning needs no key
    judges = "grid.judge=[openai/fake-judge, openai/judge-2]"
    assert run.main(["--config", "config.yaml", "--dry-run", "--set", judges]) == 0
    out = capsys.readouterr().out
    assert server.request_count == calls
    rows = [line for line in out.splitlines() if line.startswith("judge ")]
    assert [row.split()[2] for row in rows] == ["reused", "new"]  # labels: "judge <model>", then status
    assert "2 cells: 1 new, 1 reused" in out
    assert "New LLM calls: 6" in out  # the new judge's 3 correctness + 3 context verdicts
