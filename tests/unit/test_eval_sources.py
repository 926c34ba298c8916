"""Eval cases from tables: the cookbook's eval-set layout, as a local file and as a dataset folder."""

import json
from pathlib import Path

import pytest

from ragbench.config.model import BenchmarkConfig, ConfigError, load_config
from ragbench.inputs.eval_cases import EvalCaseError, EvalCasesConfig, cases_from_rows, load_eval_source

# The column layout of the cookbook's m-ric/huggingface_doc_qa_eval (plus a column ragbench ignores).
COOKBOOK_ROWS = [
    {
        "context": "ctx one",
        "question": "What does the pipeline() function return?",
        "answer": "A pipeline object for the task.",
        "source_doc": "huggingface/transformers/blob/main/docs/pipelines.md",
        "standalone_score": 5,
    },
    {
        "context": "ctx two",
        "question": "Which flag turns on 8-bit loading?",
        "answer": "load_in_8bit=True",
        "source_doc": "huggingface/transformers/blob/main/docs/quantization.md",
        "standalone_score": 4,
    },
]
COOKBOOK_COLUMNS = {"reference_answer": "answer", "expected_sources": "source_doc"}


def check_cookbook_cases(cases) -> None:
    assert [case.id for case in cases] == ["case-1", "case-2"]
    assert cases[0].question == "What does the pipeline() function return?"
    assert cases[0].reference_answer == "A pipeline object for the task."
    assert cases[1].expected_sources == ["huggingface/transformers/blob/main/docs/quantization.md"]
    assert cases[0].good_words == []


def write_jsonl(path, rows) -> None:
    path.write_text("\n".join(json.dumps(row) for row in rows))


def test_mapped_columns_from_a_local_table_file(tmp_path):
    write_jsonl(tmp_path / "eval.jsonl", COOKBOOK_ROWS)
    cases = load_eval_source(EvalCasesConfig(path=str(tmp_path / "eval.jsonl"), columns=COOKBOOK_COLUMNS))
    check_cookbook_cases(cases)


def test_dataset_folder_goes_through_the_same_loader_as_a_hub_name(tmp_path):
    # `datasets.load_dataset(<folder>)` is the call a Hub name takes too; offline, a folder stands in.
    folder = tmp_path / "huggingface_doc_qa_eval"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", COOKBOOK_ROWS)
    source = EvalCasesConfig(dataset=str(folder), split="train", columns=COOKBOOK_COLUMNS, limit=1)
    cases = load_eval_source(source)
    assert [case.id for case in cases] == ["case-1"]
    assert cases[0].expected_sources == ["huggingface/transformers/blob/main/docs/pipelines.md"]


def test_csv_uses_same_named_columns_and_keeps_ids(tmp_path):
    (tmp_path / "eval.csv").write_text(
        "id,question,reference_answer,expected_sources\nq1,What is x?,x is 1.,a.md\nq2,What is y?,,b.md\n"
    )
    cases = load_eval_source(EvalCasesConfig(path=str(tmp_path / "eval.csv")))
    assert [(c.id, c.reference_answer, c.expected_sources) for c in cases] == [
        ("q1", "x is 1.", ["a.md"]),
        ("q2", None, ["b.md"]),  # an empty cell is no reference answer, not an empty string
    ]


def test_table_errors_name_the_columns_that_exist(tmp_path):
    with pytest.raises(EvalCaseError, match=r"\['solution'\] not found; available: \['answer'"):
        cases_from_rows(COOKBOOK_ROWS, {"reference_answer": "solution"}, "eval.jsonl")
    with pytest.raises(EvalCaseError, match="no 'question' column"):
        cases_from_rows([{"prompt": "q?"}], {}, "eval.jsonl")
    with pytest.raises(EvalCaseError, match="no eval cases"):
        cases_from_rows([], {}, "eval.jsonl")
    with pytest.raises(EvalCaseError, match="cannot load dataset"):
        load_eval_source(EvalCasesConfig(dataset=str(tmp_path / "nowhere")))


def test_eval_cases_config_shorthand_and_validation():
    assert BenchmarkConfig.model_validate({"eval_cases": "cases.yaml"}).eval_cases == EvalCasesConfig(
        path="cases.yaml"
    )
    with pytest.raises(ValueError, match="exactly one of path, dataset, artifact or traces"):
        EvalCasesConfig(path="a.yaml", dataset="m-ric/huggingface_doc_qa_eval")
    with pytest.raises(ValueError, match="unknown field"):
        EvalCasesConfig(dataset="x", columns={"answer": "answer"})


COOKBOOK_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "hf_docs.yaml"


def test_cookbook_config_validates():
    config = load_config(COOKBOOK_CONFIG)
    assert config.knowledge_base.dataset == "m-ric/huggingface_doc"
    assert config.eval_cases.dataset == "m-ric/huggingface_doc_qa_eval"
    assert config.eval_cases.columns == COOKBOOK_COLUMNS
    with pytest.raises(ConfigError, match="eval_cases"):
        load_config(COOKBOOK_CONFIG, ["eval_cases.columns={answer: answer}"])
