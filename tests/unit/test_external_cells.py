"""External systems in the grid model, the dry run, pre-flight and the results table (no ZenML, no model)."""

import pytest

import run
from ragbench.analysis.notes import external_note
from ragbench.config.dry_run import plan_rows
from ragbench.config.expand import expand_grid
from ragbench.config.model import ConfigError, load_config
from ragbench.generation.answers import ExternalAnswers, external_contexts
from ragbench.generation.external import ExternalContext, ExternalReply, ExternalResult
from ragbench.generation.systems import ExternalSystem
from ragbench.grid.cell import CellSpec, cell_label, distinct_at, varying_axes
from ragbench.inputs.eval_cases import EvalCase
from ragbench.retrieval.retrievers import row_step_ids
from tests.projects import write_project

SYSTEMS = (
    "systems:\n"
    "  - {name: prod-rag,\n"
    "     http: {url: 'http://127.0.0.1:9/ask', headers_env: {Authorization: PROD_RAG_AUTH}}}\n"
    "  - {name: py-rag, python: 'tests.fake_rag_system:answer'}\n"
)
CASES = [{"id": "a", "question": "What is a?", "reference_answer": "A.", "expected_sources": ["a.md"]}]


def config_with(tmp_path, text: str):
    write_project(tmp_path, {"a.md": "# A\nA is the first letter."}, CASES, text)
    return load_config(tmp_path / "config.yaml")


def test_each_system_is_one_cell_per_judge_beside_the_grid(tmp_path):
    config = config_with(
        tmp_path, "grid: {chunk_size: [64], embedding_model: [m], judge: [openai/j1, openai/j2]}\n" + SYSTEMS
    )
    cells = expand_grid(config)
    external = [cell for cell in cells if cell.external is not None]
    assert len(cells) == 2 + 4 and {cell.external for cell in external} == {"prod-rag", "py-rag"}
    prod = next(cell for cell in external if cell.external == "prod-rag")
    assert prod.identity() == {"external": "prod-rag", "judge": prod.judge.result_fields()}
    assert prod.last_stage == "judge" and prod.chunk_size is None
    assert row_step_ids(prod) == [prod.step_id("answer"), prod.step_id("judge")]
    # its answers are one step per system whatever the judges; it has no chunk, index or retrieve work
    assert [key.external for key in distinct_at(cells, "answer")].count("prod-rag") == 1
    assert all(
        key.external is None for stage in ("chunk", "index", "retrieve") for key in distinct_at(cells, stage)
    )
    columns = prod.axis_columns()
    assert columns["external"] == "prod-rag" and columns["retriever"] == "" and columns["reranker"] == ""
    varying = varying_axes(cells)
    assert cell_label(columns, varying) == "external prod-rag · judge openai/j1"
    grid_cell = next(cell for cell in cells if cell.external is None)
    assert grid_cell.axis_columns()["external"] == "" and "external" not in cell_label(
        grid_cell.axis_columns(), varying
    )


def test_a_cells_id_is_its_name_not_its_version_or_endpoint(tmp_path):
    """The gate lines up cells across runs by id: a new deploy (version, url) is the same cell."""
    first = config_with(tmp_path, "grid: {judge: []}\n" + SYSTEMS.replace("127.0.0.1:9", "127.0.0.1:10"))
    second = config_with(
        tmp_path, "grid: {judge: []}\n" + SYSTEMS.replace("prod-rag,", "prod-rag, version: v2,")
    )
    ids = [{cell.id for cell in expand_grid(config) if cell.external} for config in (first, second)]
    assert ids[0] == ids[1] and len(ids[0]) == 2


def test_systems_alone_and_the_config_errors(tmp_path):
    alone = config_with(tmp_path, "benchmark_grid: false\ngrid: {judge: []}\n" + SYSTEMS)
    assert [cell.external for cell in expand_grid(alone)] == ["prod-rag", "py-rag"]
    with pytest.raises(ConfigError, match="nothing to benchmark"):
        config_with(tmp_path, "benchmark_grid: false\n")
    with pytest.raises(ConfigError, match="unique"):
        config_with(tmp_path, SYSTEMS + SYSTEMS.split("\n", 1)[1])
    with pytest.raises(ConfigError, match="headers_env"):
        config_with(
            tmp_path, "systems: [{name: x, http: {url: 'http://h/ask', headers: {Authorization: abc}}}]\n"
        )


def test_dry_run_counts_the_systems_calls_and_its_judges(tmp_path):
    config = config_with(tmp_path, "benchmark_grid: false\ngrid: {judge: [openai/j1]}\n" + SYSTEMS)
    cases = [EvalCase.model_validate(case) for case in CASES]
    rows = plan_rows(config, cases, set(), cells=expand_grid(config))
    assert [row["cell"] for row in rows] == ["external prod-rag", "external py-rag"]
    assert all(row["external_calls"] == 1 and row["status"] == "new" for row in rows)
    assert all(row["llm_calls"] == 2 for row in rows)  # correctness and context, one case


def test_preflight_refuses_a_missing_header_secret_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROD_RAG_AUTH", raising=False)
    config_with(tmp_path, "benchmark_grid: false\ngrid: {judge: []}\n" + SYSTEMS)
    assert run.main(["--config", "config.yaml"]) == 2
    assert "PROD_RAG_AUTH not set" in capsys.readouterr().err
    monkeypatch.setenv("PROD_RAG_AUTH", "Bearer x-123456789")
    config_with(
        tmp_path, "benchmark_grid: false\ngrid: {judge: []}\n" + SYSTEMS.replace("tests.fake", "nope.fake")
    )
    assert run.main(["--config", "config.yaml"]) == 2
    assert "'nope.fake_rag_system' is not importable" in capsys.readouterr().err


def test_preflight_says_a_system_without_a_version_is_asked_anew_every_run(tmp_path, caplog):
    from ragbench.config.preflight import check_systems

    config = config_with(tmp_path, "benchmark_grid: false\ngrid: {judge: []}\n" + SYSTEMS)
    with caplog.at_level("WARNING"):
        check_systems(config, {"PROD_RAG_AUTH": "Bearer x"}, plan_only=False)
    unversioned = [r.getMessage() for r in caplog.records if "no version or version_env" in r.getMessage()]
    assert len(unversioned) == 2 and all("asked anew by every run" in m for m in unversioned)
    caplog.clear()
    versioned = config_with(
        tmp_path, "benchmark_grid: false\ngrid: {judge: []}\n" + SYSTEMS.replace("}}}", "}}, version: v1}")
    )
    with caplog.at_level("WARNING"):
        check_systems(versioned, {"PROD_RAG_AUTH": "Bearer x"}, plan_only=False)
    assert sum("no version" in r.getMessage() for r in caplog.records) == 1  # py-rag still has none


def test_contexts_keep_the_systems_order_and_the_note_says_what_was_measured():
    reply = ExternalReply(
        answer="A.", contexts=[ExternalContext(text="one", source="x/a.md"), ExternalContext(text="two")]
    )
    chunks = external_contexts(ExternalResult(question="q", reply=reply))
    assert [(c.retrieval_rank, c.source, c.text) for c in chunks] == [(1, "x/a.md", "one"), (2, "", "two")]
    assert external_contexts(ExternalResult(question="q", reply=None, error="failed")) == []
    answers = ExternalAnswers(
        name="bare",
        kind="http",
        endpoint="http://h/ask",
        version="abc",
        cases_asked=4,
        calls_made=1,
        failures=0,
        retries=2,
        returned_contexts=False,
        retrieval=None,
    )
    note = external_note(answers)
    assert "version abc" in note and "1 not from the cache" in note and "answer-only metrics" in note
    assert "without sources" in external_note(answers.model_copy(update={"returned_contexts": True}))


def test_a_systems_cell_spec_round_trips():
    cell = CellSpec(external="prod-rag")
    assert CellSpec.model_validate(cell.identity()) == cell and cell.last_stage == "answer"
    assert ExternalSystem(name="n", python="m:f").endpoint == "m:f"


def test_the_shipped_nightly_example_plans_without_calling_anything():
    from ragbench.config.model import DEFAULT_CONFIG_PATH
    from ragbench.inputs.eval_cases import load_eval_suite_from

    config = load_config(DEFAULT_CONFIG_PATH.parent / "external_nightly.yaml")
    cases = load_eval_suite_from(config.eval_cases).cases
    (row,) = plan_rows(config, cases, set(), cells=expand_grid(config))
    assert row["cell"] == "external prod-rag" and row["external_calls"] == len(cases)
    system = config.systems[0]
    assert system.source_match.source_id("https://docs.example.com/topics/assert.html") == "assert"
    assert system.environment_names() == ["PROD_RAG_AUTHORIZATION", "DEPLOY_SHA"]


def test_a_system_that_answered_nothing_makes_the_run_incomplete():
    from ragbench.analysis.results import CellResults
    from ragbench.generation.answers import AnswerSet
    from ragbench.generation.reader import ReaderAnswer
    from ragbench.grid.cell import CellSpec

    spec = CellSpec(external="prod-rag")
    failed = ReaderAnswer(case_id="a", question="q", answer=None, error="retries_exhausted: HTTP 503")
    answers = AnswerSet(spec=spec.upto("answer"), reranker=None, answers=[failed])
    results = CellResults(
        cells=[spec], retrievals={}, answer_sets={answers.spec.id: answers}, judged={}, keyword={}
    )
    (message,) = results.incomplete({spec.id: "external prod-rag"}).values()
    assert message == (
        "every call to the system failed in cell external prod-rag; last error: retries_exhausted: HTTP 503"
    )


def test_pairwise_against_a_system_compares_every_other_answer_set_with_it(tmp_path):
    from ragbench.grid.cell import pairwise_pairs

    config = config_with(
        tmp_path,
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r1, openai/r2], judge: [openai/j]}\n"
        "evaluation: {pairwise: {baseline: {external: prod-rag}}}\n" + SYSTEMS,
    )
    cells = expand_grid(config)
    pairs = pairwise_pairs(cells, {"external": "prod-rag"})
    assert {baseline.external for _, baseline in pairs} == {"prod-rag"}
    assert sorted(str(candidate.external or candidate.reader.model) for candidate, _ in pairs) == [
        "openai/r1",
        "openai/r2",
        "py-rag",
    ]
    cases = [EvalCase.model_validate(case) for case in CASES]
    rows = {row["cell"]: row for row in plan_rows(config, cases, set(), cells=expand_grid(config))}
    # per candidate: its answers' judge calls (correctness, context) and 2 pairwise calls on the one case
    assert rows["external py-rag"]["llm_calls"] == 2 + 2
    assert rows["external prod-rag"]["llm_calls"] == 2
    with pytest.raises(ValueError, match="no system of that name"):
        pairwise_pairs(cells, {"external": "nope"})
    with pytest.raises(ValueError, match="named alone"):
        pairwise_pairs(cells, {"external": "prod-rag", "reader": "openai/r1"})
