"""A labels file the run cannot read ends it in the pre-flight, with the refusal's one sentence, before any
model, LLM or knowledge base is touched; from another folder, the config's own labels file is the one read."""

import json

import pytest

from ragbench.config import preflight
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.review.labels import LabelFileError, text_sha


def good_label(case_id: str, value=4) -> dict:
    answer = f"answer of {case_id}"
    return {
        "case_id": case_id,
        "answer_sha": text_sha(answer),
        "rubric": "correctness",
        "criterion": "correctness",
        "value": value,
        "item": {"case_id": case_id, "question": "q?", "answer": answer},
    }


def checked(config):
    """The dry run's checks of `config`, with its cells (the plan expands them before the checks)."""
    return preflight.run_preflight(config, cells=expand_grid(config), plan_only=True)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A config in `project/` naming `review_labels.jsonl`, run from `elsewhere/`; nothing after the labels
    may run: the first step of the checks after them (the query rewrite's LLM settings) raises."""
    folder, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "config.yaml").write_text(
        "name: labelled\n"
        "evaluation: {rubrics: [correctness], label_correction: {labels: review_labels.jsonl}}\n"
    )
    monkeypatch.chdir(elsewhere)

    def no_work(config):
        raise AssertionError("work started before the labels were read")

    monkeypatch.setattr(preflight, "rewriter_settings", no_work)
    return folder


def test_a_float_value_stops_the_preflight_with_one_sentence(project):
    lines = [good_label(f"c{k}") for k in range(6)] + [good_label("list-pop", 1.0)]
    (project / "review_labels.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(LabelFileError) as caught:
        checked(load_config(project / "config.yaml"))
    assert str(caught.value).startswith(
        f"labels file {project / 'review_labels.jsonl'}, line 7 (case list-pop): value 1.0 is not an integer "
        "on the 1-5 scale"
    )
    assert "validation error" not in str(caught.value)


def test_the_labels_file_is_looked_for_in_the_configs_folder(project):
    with pytest.raises(LabelFileError, match="not found") as caught:
        checked(load_config(project / "config.yaml"))
    assert str(caught.value) == f"labels file {project / 'review_labels.jsonl'}: not found"
    (project / "review_labels.jsonl").write_text(json.dumps(good_label("c1")) + "\n")
    labels = preflight.review_labels_file(load_config(project / "config.yaml"))
    assert labels is not None and [label.case_id for label in labels.current()] == ["c1"]


def test_labels_named_as_an_artifact_are_left_to_the_pipeline(project):
    (project / "config.yaml").write_text(
        "name: labelled\nevaluation: {label_correction: {labels: review_labels}}\n"
    )
    assert preflight.review_labels_file(load_config(project / "config.yaml")) is None
