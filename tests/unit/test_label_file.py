"""A labels file that cannot mix silently: a label's value is an integer on the scale it names (1.0, 0.5,
"3" or true is refused, never coerced), and every refusal is one sentence naming the file, the line, the
case and the field, without pydantic's validation dump."""

import json
from pathlib import Path

import pytest

from ragbench.review.labels import LabelFileError, ReviewLabels, check_labels, load_labels_file, text_sha
from ragbench.scoring.rubrics import select_rubrics

ANSWER = "pop() removes and returns the last item."
DUMP_MARKS = (
    "validation error",
    "For further information visit",
    "input_type=",
    "input_value=",
    "errors.pydantic",
)


def raw_label(case_id: str = "list-pop", **changes) -> dict:
    """A label as the review page writes it, with `changes` applied (a value None removes the field)."""
    label = {
        "kind": "answer",
        "case_id": case_id,
        "answer_sha": text_sha(ANSWER if case_id == "list-pop" else f"answer of {case_id}"),
        "rubric": "correctness",
        "criterion": "correctness",
        "scale": "1-5",
        "value": 4,
        "item": {
            "case_id": case_id,
            "question": "What does pop() do?",
            "answer": ANSWER if case_id == "list-pop" else f"answer of {case_id}",
        },
    }
    label.update(changes)
    return {key: value for key, value in label.items() if value is not None}


def write_labels(folder: Path, *labels: dict | str) -> Path:
    """`review_labels.jsonl` with six good labels of other cases first, so the label under test is line 7."""
    path = folder / "review_labels.jsonl"
    good = [raw_label(f"case-{k}") for k in range(6)]
    lines = [json.dumps(label) if isinstance(label, dict) else label for label in [*good, *labels]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(LabelFileError) as caught:
        load_labels_file(path)
    message = str(caught.value)
    assert not any(mark in message for mark in DUMP_MARKS), message
    assert "\n" not in message, message  # one sentence
    return message


@pytest.mark.parametrize(
    ("value", "shown"), [(1.0, "1.0"), (0.5, "0.5"), ("3", '"3"'), (True, "true"), (4.0, "4.0")]
)
def test_a_value_that_is_not_an_integer_is_refused_naming_the_file_line_case_and_field(
    tmp_path, value, shown
):
    path = write_labels(tmp_path, raw_label(value=value))
    message = refusal(path)
    assert message.startswith(
        f"labels file {path}, line 7 (case list-pop): value {shown} is not an integer on the 1-5 scale"
    ), message


def test_a_float_on_the_pass_fail_scale_is_refused_too(tmp_path):
    path = write_labels(tmp_path, raw_label(scale="pass_fail", value=1.0))
    message = refusal(path)
    assert message.startswith(
        f"labels file {path}, line 7 (case list-pop): value 1.0 is not an integer on the pass_fail scale"
    ), message


def test_an_integer_off_its_scale_is_refused(tmp_path):
    path = write_labels(tmp_path, raw_label(value=7))
    message = refusal(path)
    assert message.startswith(f"labels file {path}, line 7 (case list-pop): value 7 is not on the 1-5 scale")


def test_a_wrong_scale_name_is_refused(tmp_path):
    path = write_labels(tmp_path, raw_label(scale="0-1", value=1))
    message = refusal(path)
    assert message == (
        f'labels file {path}, line 7 (case list-pop): scale "0-1" is not a scale name: '
        'give "1-5" or "pass_fail"'
    )


def test_an_edited_answer_or_hash_is_refused(tmp_path):
    path = write_labels(tmp_path, raw_label(answer_sha="0123456789abcdef"))
    message = refusal(path)
    assert message.startswith(
        f"labels file {path}, line 7 (case list-pop): answer_sha 0123456789abcdef is not the hash of the "
        "labelled answer"
    ), message
    edited = raw_label()
    edited["item"]["answer"] = "pop() removes the first item."
    assert "answer or its hash was edited" in refusal(write_labels(tmp_path, edited))


def test_a_missing_field_is_refused(tmp_path):
    path = write_labels(tmp_path, raw_label(criterion=None))
    assert refusal(path) == f"labels file {path}, line 7 (case list-pop): field criterion is missing"
    no_answer = raw_label()
    del no_answer["item"]["answer"]
    assert refusal(write_labels(tmp_path, no_answer)).endswith(
        "(case list-pop): field item.answer is missing"
    )


def test_an_unknown_field_is_refused(tmp_path):
    path = write_labels(tmp_path, raw_label(verdict=4))
    assert (
        refusal(path)
        == f"labels file {path}, line 7 (case list-pop): field verdict is not a field of a label"
    )


def test_a_line_that_is_not_json_or_not_an_object_is_refused(tmp_path):
    path = write_labels(tmp_path, '{"case_id": "list-pop", ')
    assert refusal(path).startswith(f"labels file {path}, line 7: the line is not JSON (")
    assert refusal(write_labels(tmp_path, "[1, 2]")) == (
        f"labels file {path}, line 7: the line is not a JSON object but [1, 2]"
    )


def test_the_first_bad_line_is_refused_whether_its_label_or_its_json_is_wrong(tmp_path):
    """The file is read through the one JSON Lines reader (`ragbench.inputs.tables.jsonl_records`) one line
    at a time, so a bad label before a line that is not JSON is the one named."""
    path = write_labels(tmp_path, raw_label(verdict=4), '{"case_id": ')
    assert (
        refusal(path)
        == f"labels file {path}, line 7 (case list-pop): field verdict is not a field of a label"
    )
    path = write_labels(tmp_path, '{"case_id": ', raw_label(verdict=4))
    assert refusal(path).startswith(f"labels file {path}, line 7: the line is not JSON (")


def test_a_missing_file_is_refused_naming_it(tmp_path):
    assert refusal(tmp_path / "nope.jsonl") == f"labels file {tmp_path / 'nope.jsonl'}: not found"


def test_integer_values_on_their_scale_load_with_their_lines(tmp_path):
    path = write_labels(tmp_path, "", raw_label(value=5), raw_label("pass", scale="pass_fail", value=0))
    labels = load_labels_file(path)
    assert [label.value for label in labels.current()][-2:] == [5, 0]
    lines = {label.case_id: line for line, label in labels.current_lines()}
    assert (lines["case-0"], lines["list-pop"], lines["pass"]) == (1, 8, 9)  # blank line 7 skipped
    assert ReviewLabels(labels=labels.labels).current_lines()[0][0] is None  # not read from a file


def test_a_scale_mismatch_with_the_rubric_names_the_line_and_the_case(tmp_path):
    rubrics = select_rubrics(["correctness"], [])
    path = write_labels(tmp_path, raw_label(scale="pass_fail", value=1))
    labels = load_labels_file(path)
    with pytest.raises(LabelFileError) as caught:
        check_labels(labels, rubrics, {"list-pop"}, f"labels file {path}")
    message = str(caught.value)
    assert message.startswith(
        f"labels file {path}, line 7 (case list-pop): scale pass_fail of correctness/correctness is not the "
        "rubric's, which grades it 1-5"
    ), message
    assert "validation error" not in message


def test_labels_of_another_eval_set_name_a_line_and_a_case(tmp_path):
    rubrics = select_rubrics(["correctness"], [])
    path = write_labels(tmp_path, raw_label())
    with pytest.raises(LabelFileError) as caught:
        check_labels(load_labels_file(path), rubrics, {"other-case"}, f"labels file {path}")
    assert str(caught.value).startswith(
        f"labels file {path}, line 1 (case case-0): case_id case-0 is not a case of this eval set"
    )
    assert "the labels are of another eval set" in str(caught.value)
