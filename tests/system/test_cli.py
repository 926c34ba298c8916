"""Bad input is refused before any model loads or any pipeline starts."""

import pytest

import ragbench.models.provision
import run


@pytest.fixture
def no_expensive_work(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("expensive work started despite invalid input")

    monkeypatch.setattr(ragbench.models.provision, "_build_entry", forbidden)  # no model is provisioned


def run_cli(tmp_path, capsys, yaml_text, *extra):
    (tmp_path / "config.yaml").write_text(yaml_text)
    code = run.main(["--config", str(tmp_path / "config.yaml"), *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("yaml_text", "extra", "message"),
    [
        ("grid:\n  chunk_sizez: [1]\n", [], "grid.chunk_sizez: unknown key"),
        ("name: x\n", ["--set", "grid.chunk_overlap=200"], "must be smaller than chunk size"),
        ("grid:\n  chunk_size: []\n", [], "grid.chunk_size"),
        ("grid:\n  embedding_model: []\n", [], "grid.embedding_model"),
        ("grid:\n  top_n: []\n", [], "grid.top_n"),
        (
            "regression: {thresholds: {hit_rate@5: 0.1}}\n",
            [],
            "hit_rate@5 is not a tracked metric; tracked metrics (with retrieval.metrics_k 5): correct",
        ),
        ("name: x\n", ["--set", "regression.thresholds={mrr_at_5: 0.1}"], "mrr_at_5 is not a tracked metric"),
        ("grid:\n  top_k: lots\n", [], "grid.top_k"),
        ("knowledge_base: {kind: folder, path: /nonexistent/kb}\n", [], "folder not found: /nonexistent/kb"),
        ("eval_cases: /nonexistent/cases.yaml\n", [], "eval case file not found"),
        ("grid: {embedding_model: [no-such-model-anywhere]}\n", [], "no-such-model-anywhere"),
        (
            "orchestration: {docker: {parent_imag: x}}\n",
            [],
            "orchestration.docker: unknown field(s) parent_imag",
        ),
        ("orchestration: {docker: {skip_build: maybe}}\n", [], "orchestration.docker: skip_build"),
        ("evaluation: {custom_rubrics: [{name: cites}]}\n", [], "custom_rubrics.0.criteria"),
        (
            "evaluation: {custom_rubrics: [{name: cites, criteria: x, inputs: [answer, context]}]}\n",
            [],
            "custom_rubrics.0.inputs.1",
        ),
        (
            "evaluation: {custom_rubrics: [{name: cites, criteria: x, anchors: {6: great}}]}\n",
            [],
            "anchor(s) 6 are not on the 1-5 scale",
        ),
        ("evaluation: {custom_rubrics: [{name: mrr, criteria: x}]}\n", [], "'mrr' names a results column"),
        (
            "evaluation: {custom_suites: [{name: hosts, assert: not-regex, value: '(unclosed'}]}\n",
            [],
            "invalid regex",
        ),
        ("evaluation: {custom_suites: [{name: hosts, assert: matches, value: x}]}\n", [], "unknown assert"),
        (
            "evaluation: {custom_suites: [{name: good_answers, assert: contains, value: x}]}\n",
            [],
            "good_answers belong to built-in metrics",
        ),
        ("evaluation: {pairwise: {baseline: {judge: x}}}\n", [], "judge is not an axis an answer depends on"),
        ("evaluation: {pairwise: {baseline: openai/nobody}}\n", [], "no answer set of the grid has it"),
        (
            "orchestration: {environment: {OPENAI_API_KEY: sk-x}}\n",
            [],
            "OPENAI_API_KEY look like credentials",
        ),
        (
            "orchestration: {docker: {environment: {PGPASSWORD: x}}}\n",
            [],
            "orchestration.docker.environment: PGPASSWORD look like credentials",
        ),
    ],
)
def test_invalid_input_exits_2_with_a_clear_message(
    tmp_path, capsys, no_expensive_work, yaml_text, extra, message
):
    code, err = run_cli(tmp_path, capsys, yaml_text, *extra)
    assert code == 2
    assert message in err


def test_empty_knowledge_base_and_unknown_expected_source_are_refused(tmp_path, capsys, no_expensive_work):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "empty.md").write_text("")
    code, err = run_cli(tmp_path, capsys, f"knowledge_base: {{kind: folder, path: {tmp_path / 'kb'}}}\n")
    assert code == 2
    assert "no usable text" in err
    (tmp_path / "kb" / "doc.md").write_text("Some text.")
    (tmp_path / "cases.yaml").write_text("- {id: a, question: 'q?', expected_sources: [missing.md]}\n")
    code, err = run_cli(
        tmp_path,
        capsys,
        f"knowledge_base: {{kind: folder, path: {tmp_path / 'kb'}}}\neval_cases: {tmp_path / 'cases.yaml'}\n",
    )
    assert code == 2
    assert "missing.md" in err
    assert not (tmp_path / "output").exists()


def test_malformed_eval_case_file_is_refused(tmp_path, capsys, no_expensive_work):
    (tmp_path / "cases.yaml").write_text("- {id: a, question: q?, oops\n")
    code, err = run_cli(tmp_path, capsys, f"eval_cases: {tmp_path / 'cases.yaml'}\n")
    assert code == 2
    assert "not valid YAML" in err


def test_table_eval_set_is_checked_against_the_knowledge_base(tmp_path, capsys, no_expensive_work):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("Some text.")
    (tmp_path / "eval.csv").write_text("question,answer,source_doc\nWhat?,This.,a.md\nWhy?,That.,b.md\n")
    code, err = run_cli(
        tmp_path,
        capsys,
        f"knowledge_base: {{kind: folder, path: {tmp_path / 'kb'}}}\n"
        f"eval_cases: {{path: {tmp_path / 'eval.csv'}, columns: {{expected_sources: source_doc}}}}\n",
    )
    assert code == 2
    assert "eval.csv: expected sources not in the knowledge base: b.md" in err


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("testset: {critic: openai/gpt-4o}\n", "needs environment variable(s) OPENAI_API_KEY"),
        ("testset: {evolutions: {simple: 0.7}}\n", "add up to 0.7"),
        ("knowledge_base: {kind: folder, path: /nonexistent/kb}\n", "folder not found: /nonexistent/kb"),
        ("testset: {chunk_size: 64, chunk_overlap: 64}\n", "must be smaller than chunk size"),
    ],
)
def test_testset_refuses_bad_input_before_any_work(
    tmp_path, capsys, monkeypatch, no_expensive_work, yaml_text, message
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml_text)
    assert run.main(["testset", "--config", str(tmp_path / "config.yaml")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "output").exists()
