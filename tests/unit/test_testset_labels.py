import json
from pathlib import Path

import pytest

from ragbench.stats.inference import cohen_kappa
from ragbench.testset.labels import (
    COMBINED,
    CandidateLabel,
    LabelError,
    agreement_html,
    agreement_text,
    load_labels,
    measure_filters,
)

QUESTIONS = {f"c{i}": f"Question {i}?" for i in range(1, 10)}


def label(
    candidate_id: str, keep: bool, question: str | None = None, reason: str = "checked"
) -> CandidateLabel:
    question = QUESTIONS[candidate_id] if question is None else question
    return CandidateLabel(id=candidate_id, question=question, human_keep=keep, reason=reason)


# The person: c1-c3 good, c4-c6 bad; c7 has no label; c8's label was written for another question.
LABELS = {
    **{c: label(c, True) for c in ("c1", "c2", "c3")},
    **{c: label(c, False) for c in ("c4", "c5", "c6")},
    "c8": label("c8", True, question="An older question?"),
}
DECISIONS = {
    "ratings": {
        "c1": True,
        "c2": True,
        "c3": False,
        "c4": True,
        "c5": False,
        "c6": False,
        "c7": True,
        "c8": True,
    },
    "roundtrip": {
        "c1": True,
        "c2": True,
        "c3": True,
        "c4": False,
        "c5": False,
        "c6": True,
        "c7": False,
        "c8": True,
    },
}


def test_precision_recall_kappa_by_hand():
    rows = {row.filter: row for row in measure_filters(DECISIONS, LABELS, QUESTIONS)}
    assert list(rows) == ["ratings", "roundtrip", COMBINED]

    # ratings on c1-c6: kept good c1 c2 = 2, kept bad c4 = 1, rejected good c3 = 1, rejected bad c5 c6 = 2
    # precision = 2 / (2 + 1) = 2/3; recall = 2 / (2 + 1) = 2/3
    # p_o = (2 + 2) / 6 = 2/3; kept 3/6, good 3/6: p_e = 1/2 * 1/2 + 1/2 * 1/2 = 1/2
    # kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3
    ratings = rows["ratings"]
    assert (ratings.true_keep, ratings.false_keep, ratings.false_reject, ratings.true_reject) == (2, 1, 1, 2)
    assert ratings.labelled == 6
    assert ratings.precision == pytest.approx(2 / 3)
    assert ratings.recall == pytest.approx(2 / 3)
    assert ratings.kappa == pytest.approx(1 / 3)

    # roundtrip: kept good c1 c2 c3 = 3, kept bad c6 = 1, rejected good 0, rejected bad c4 c5 = 2
    # precision = 3/4; recall = 3/3 = 1; p_o = 5/6; kept 4/6, good 3/6:
    # p_e = 4/6 * 3/6 + 2/6 * 3/6 = 1/2; kappa = (5/6 - 1/2) / (1/2) = 2/3
    roundtrip = rows["roundtrip"]
    assert (roundtrip.true_keep, roundtrip.false_keep, roundtrip.false_reject, roundtrip.true_reject) == (
        3,
        1,
        0,
        2,
    )
    assert roundtrip.precision == pytest.approx(3 / 4)
    assert roundtrip.recall == pytest.approx(1.0)
    assert roundtrip.kappa == pytest.approx(2 / 3)

    # combined (kept by both): c1 c2 kept; c3 c4 c5 c6 rejected
    # kept good 2, kept bad 0, rejected good c3 = 1, rejected bad 3: precision 2/2 = 1, recall 2/3
    # p_o = 5/6; kept 2/6, good 3/6: p_e = 2/6 * 3/6 + 4/6 * 3/6 = 1/2; kappa = (5/6 - 1/2) / (1/2) = 2/3
    combined = rows[COMBINED]
    assert (combined.true_keep, combined.false_keep, combined.false_reject, combined.true_reject) == (
        2,
        0,
        1,
        3,
    )
    assert combined.precision == pytest.approx(1.0)
    assert combined.recall == pytest.approx(2 / 3)
    assert combined.kappa == pytest.approx(2 / 3)


def test_unlabelled_and_stale_labels_are_counted_and_left_out():
    for row in measure_filters(DECISIONS, LABELS, QUESTIONS):
        assert row.unlabelled == 1  # c7
        assert row.stale_labels == 1  # c8: its label was written for another question
        assert row.labelled == 6
        assert {item["id"] for item in row.disagreements} <= {f"c{i}" for i in range(1, 7)}


def test_question_match_ignores_whitespace_and_case_only():
    labels = {"c1": label("c1", True, question="  question   1? ")}
    (row, _) = measure_filters({"f": {"c1": True}}, labels, QUESTIONS)
    assert (row.labelled, row.stale_labels) == (1, 0)
    labels = {"c1": label("c1", True, question="Question 1 changed?")}
    (row, _) = measure_filters({"f": {"c1": True}}, labels, QUESTIONS)
    assert (row.labelled, row.stale_labels) == (0, 1)
    # a candidate without a question (generator failure) cannot be checked against its label
    (row, _) = measure_filters({"f": {"c1": False}}, {"c1": label("c1", True)}, {"c1": None})
    assert (row.labelled, row.stale_labels) == (0, 1)


def test_disagreements_name_decision_and_reason():
    ratings = measure_filters(DECISIONS, LABELS, QUESTIONS)[0]
    assert ratings.disagreements == [
        {
            "id": "c3",
            "question": "Question 3?",
            "decision": "rejected",
            "human_keep": True,
            "reason": "checked",
        },
        {"id": "c4", "question": "Question 4?", "decision": "kept", "human_keep": False, "reason": "checked"},
    ]


def test_combined_counts_only_filters_that_decided():
    decisions = {"a": {"c1": True, "c2": True}, "b": {"c1": False}}
    labels = {"c1": label("c1", False), "c2": label("c2", True)}
    combined = measure_filters(decisions, labels, QUESTIONS)[-1]
    # c1: b rejected it -> rejected; c2: only a decided, kept it -> kept
    assert (combined.true_keep, combined.false_keep, combined.false_reject, combined.true_reject) == (
        1,
        0,
        0,
        1,
    )
    assert combined.kappa == pytest.approx(1.0)


def test_undefined_values_are_none():
    labels = {c: label(c, True) for c in ("c1", "c2", "c3")}
    # everything kept and every case good: kappa is 0/0 (chance already agrees fully)
    (row, _) = measure_filters({"f": dict.fromkeys(labels, True)}, labels, QUESTIONS)
    assert (row.precision, row.recall, row.kappa) == (1.0, 1.0, None)
    # nothing kept: no precision; the filter never varies, so p_o = p_e and kappa is 0
    (row, _) = measure_filters({"f": dict.fromkeys(labels, False)}, labels, QUESTIONS)
    assert (row.precision, row.recall, row.kappa) == (None, 0.0, 0.0)
    bad = {c: label(c, False) for c in ("c1", "c2")}
    (row, _) = measure_filters({"f": {"c1": True, "c2": False}}, bad, QUESTIONS)
    assert (row.precision, row.recall, row.kappa) == (0.0, None, 0.0)
    (row, _) = measure_filters({"f": {"c7": True}}, LABELS, QUESTIONS)
    assert (row.labelled, row.precision, row.recall, row.kappa) == (0, None, None, None)
    assert measure_filters({}, LABELS, QUESTIONS) == []


def test_a_filter_named_combined_is_refused():
    with pytest.raises(ValueError, match="combined"):
        measure_filters({COMBINED: {"c1": True}}, LABELS, QUESTIONS)


def test_cohen_kappa_matches_sklearn():
    from sklearn.metrics import cohen_kappa_score

    first = [True, True, False, True, False, False, True, False, False, True]
    second = [True, False, False, True, False, True, True, True, False, True]
    expected = cohen_kappa_score(first, second)
    assert cohen_kappa(list(zip(first, second, strict=True))) == pytest.approx(expected)
    assert cohen_kappa([]) is None
    assert cohen_kappa([(True, True)]) is None
    assert cohen_kappa([(True, False), (True, False)]) == 0.0  # p_o = 0, p_e = 0


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------

ENTRIES = [
    {"id": "c1", "question": "Question 1?", "human_keep": True, "reason": "answerable and useful"},
    {"id": "c2", "question": "Question 2?", "human_keep": False, "reason": "asks about the passage itself"},
]


def write_jsonl(path, entries):
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    return path


def test_yaml_and_jsonl_both_load(tmp_path):
    yaml_file = tmp_path / "labels.yaml"
    yaml_file.write_text(
        "- id: c1\n  question: Question 1?\n  human_keep: true\n  reason: answerable and useful\n"
        "- id: c2\n  question: Question 2?\n  human_keep: false\n  reason: asks about the passage itself\n",
        encoding="utf-8",
    )
    jsonl_file = write_jsonl(tmp_path / "labels.jsonl", ENTRIES)
    from_yaml, from_jsonl = load_labels(yaml_file), load_labels(jsonl_file)
    assert from_yaml == from_jsonl
    assert list(from_yaml) == ["c1", "c2"]
    assert from_yaml["c2"] == CandidateLabel(**ENTRIES[1])
    wrapped = tmp_path / "wrapped.yml"
    wrapped.write_text(json.dumps({"labels": ENTRIES}), encoding="utf-8")
    assert load_labels(wrapped) == from_yaml


def test_duplicate_id_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [*ENTRIES, {**ENTRIES[0], "reason": "again"}])
    with pytest.raises(
        LabelError, match=r"labels\.jsonl: line 3: duplicate label for candidate id 'c1' \(first"
    ):
        load_labels(path)


def test_missing_reason_is_refused(tmp_path):
    path = tmp_path / "labels.yaml"
    path.write_text("- id: c1\n  question: Q?\n  human_keep: true\n", encoding="utf-8")
    with pytest.raises(
        LabelError, match=r"labels\.yaml: label #1 \(id 'c1'\) is invalid: reason: Field required"
    ):
        load_labels(path)
    path.write_text("- id: c1\n  question: Q?\n  human_keep: true\n  reason: '  '\n", encoding="utf-8")
    with pytest.raises(LabelError, match="reason: must not be empty"):
        load_labels(path)


def test_wrong_types_are_refused(tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [ENTRIES[0], {**ENTRIES[1], "human_keep": "no"}])
    with pytest.raises(
        LabelError, match=r"line 2 \(id 'c2'\) is invalid: human_keep: Input should be a valid bool"
    ):
        load_labels(path)
    path = write_jsonl(tmp_path / "labels.jsonl", [{**ENTRIES[0], "id": 7}])
    with pytest.raises(LabelError, match=r"line 1 is invalid: id: Input should be a valid string"):
        load_labels(path)
    path = write_jsonl(tmp_path / "labels.jsonl", [{**ENTRIES[0], "keep": True}])
    with pytest.raises(LabelError, match="keep: unknown field"):
        load_labels(path)
    path = write_jsonl(tmp_path / "labels.jsonl", [["c1", True]])
    with pytest.raises(LabelError, match="line 1: expected a mapping"):
        load_labels(path)


def test_unreadable_files_are_refused(tmp_path):
    with pytest.raises(LabelError, match="unsupported labels format"):
        load_labels(tmp_path / "labels.csv")
    with pytest.raises(LabelError, match="not found"):
        load_labels(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(ENTRIES[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(LabelError, match=r"broken.jsonl:2: invalid JSON"):
        load_labels(broken)
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("id: c1\n", encoding="utf-8")
    with pytest.raises(LabelError, match="expected a list of labels"):
        load_labels(mapping)
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(LabelError, match="no labels found"):
        load_labels(empty)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("- reason: caf\xe9\n".encode("latin-1"))
    with pytest.raises(LabelError, match="not UTF-8"):
        load_labels(latin)
    assert issubclass(LabelError, ValueError)


# --------------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------------


def test_text_table():
    text = agreement_text(measure_filters(DECISIONS, LABELS, QUESTIONS))
    lines = text.splitlines()
    assert lines[0].split() == [
        "filter", "labelled", "kept", "good", "kept", "bad", "rejected", "good", "rejected", "bad",
        "precision", "recall", "kappa", "unlabelled", "stale", "labels",
    ]  # fmt: skip
    assert lines[2].split() == ["ratings", "6", "2", "1", "1", "2", "0.67", "0.67", "0.33", "1", "1"]
    assert lines[4].split()[0] == COMBINED
    assert "1 label(s) no longer match" in lines[-1]
    assert agreement_text([]) == "(no filter decisions to measure)"


def test_html_escapes_every_string():
    labels = {
        "c1": label("c1", True, question="<b>Question 1?</b>", reason="<script>alert('x')</script>"),
        "c2": label("c2", False),
    }
    questions = {"c1": "<b>Question 1?</b>", "c2": "Question 2?"}
    html = agreement_html(measure_filters({"<i>f</i>": {"c1": False, "c2": False}}, labels, questions))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;Question 1?&lt;/b&gt;" in html
    assert "<i>" not in html and "&lt;i&gt;f&lt;/i&gt;: 1 disagreement(s)" in html
    assert html.startswith("<h2>")
    assert "Precision: of the labelled cases" in html
    assert "<table>" in html


SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "eval_cases" / "testset_labels.yaml"


def test_the_shipped_labels_measure_a_filter_as_computed_by_hand():
    """The person's verdicts on 44 candidates of the default knowledge base: 21 good, 23 not. A filter that
    keeps everything has precision 21/44, recall 1 and kappa 0 (chance agreement); one that decides as the
    person did has 1, 1, 1; one that keeps nothing has no precision, recall 0 and kappa 0."""
    labels = load_labels(SHIPPED)
    assert len(labels) == 44 and sum(label.human_keep for label in labels.values()) == 21
    questions = {cid: label.question for cid, label in labels.items()}
    decisions = {
        "keep all": dict.fromkeys(labels, True),
        "as the person": {cid: label.human_keep for cid, label in labels.items()},
        "keep none": dict.fromkeys(labels, False),
    }
    rows = {row.filter: row for row in measure_filters(decisions, labels, questions)}
    assert (rows["keep all"].precision, rows["keep all"].recall, rows["keep all"].kappa) == (
        21 / 44,
        1.0,
        0.0,
    )
    assert (rows["as the person"].precision, rows["as the person"].recall) == (1.0, 1.0)
    assert rows["as the person"].kappa == pytest.approx(1.0)
    assert (rows["keep none"].precision, rows["keep none"].recall, rows["keep none"].kappa) == (
        None,
        0.0,
        0.0,
    )
    assert rows["combined"].true_keep == 0 and rows["combined"].labelled == 44
