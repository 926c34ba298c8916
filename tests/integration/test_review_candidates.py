"""`run.py review --testset` on a real testset run against the loopback fake OpenAI server: the generated
set's kept and rejected candidates become review items (the filters' decisions blinded until labelled), a
person's keep/reject labels are exported in the `testset.labels` format, and a second `run.py testset`
measures the filters against them (a kept candidate the person rejected is the combined filter's false keep,
with the person's reason on the page)."""

import json

import pytest
from zenml.client import Client

import run
from ragbench.review.labels import CANDIDATE_RUBRIC, LabelStore, load_labels_file
from ragbench.review.server import ReviewServer, ReviewSession
from ragbench.runs import review
from ragbench.runs.names import TESTSET_PIPELINE
from ragbench.testset.labels import load_labels
from tests.integration import test_testset_pipeline as testset_pipeline
from tests.projects import TESTSET_PAGES

NAME = "reviewed-set"  # the eval set's artifact: versions of its own, whatever else ran in this session
NOTE = "quotes an example flag"
project = testset_pipeline.project  # the fixture: a folder knowledge base, the fake server, config.yaml


def test_candidates_reviewed_on_the_page_measure_the_filters(project, capsys, monkeypatch):
    root, _server = project
    # the fake critic rates the loops question's answer 2 on groundedness: 2 kept (one unanswerable), 1 out
    assert run.main(["testset", "--config", "config.yaml", "--set", f"testset.name={NAME}"]) == 0
    folder = root / "out" / "testsets" / f"{NAME}-v1"
    kept = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    rejected = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    assert len(kept) == 2 and len(rejected) == 1
    answered = next(case for case in kept if case["expected_behaviour"] == "answers")
    declined = next(case for case in kept if case["expected_behaviour"] == "declines")
    out = rejected[0]
    assert out["provenance"]["rejected_because"] == ["groundedness 2 < 4"]

    # the newest completed testset run: one item per kept and rejected candidate
    run_name, items = review.candidate_items_of_run(None)
    assert run_name == Client().get_pipeline(TESTSET_PIPELINE).last_run.name
    by_id = {item.input.case_id: item for item in items}
    assert len(items) == len(by_id) == 3 and set(by_id) == {answered["id"], declined["id"], out["id"]}
    for case, filters in ((answered, 1), (declined, 1), (out, 0)):
        item = by_id[case["id"]]
        assert (item.kind, item.rubric, item.criterion, item.scale) == (
            "candidate",
            CANDIDATE_RUBRIC,
            CANDIDATE_RUBRIC,
            "pass_fail",
        )
        assert item.input.question == case["question"]
        assert item.input.reference_answer == case["reference_answer"]
        assert item.input.answer == (case["reference_answer"] or "")
        chunk = case["provenance"]["source_chunks"][0]
        assert item.sources == [chunk["source"]] and chunk["source"] in TESTSET_PAGES
        assert item.input.contexts == [chunk["text"]] and chunk["text"] in TESTSET_PAGES[chunk["source"]]
        assert item.verdicts == {"filters": filters}
    assert answered["reference_answer"] and declined["reference_answer"] is None
    assert by_id[out["id"]].reasoning == {"filters": "rejected: groundedness 2 < 4"}
    assert by_id[answered["id"]].reasoning == {"filters": "kept"}

    # the page: nothing revealed before a verdict; the person overrules the filters twice
    labels_file = root / "review" / "review_labels.jsonl"
    store = LabelStore(labels_file)
    session = ReviewSession(items, store, title=f"review of {run_name}")
    state = session.state("disagreement")
    assert {shown["key"] for shown in state["items"]} == {item.key for item in items}
    for shown in state["items"]:
        assert shown["label"] is None and shown["kind"] == "candidate"
        assert not {"verdicts", "reasoning", "keyword_failures"} & set(shown)
        assert shown["passages"][0]["text"] == by_id[shown["key"].split("|")[0]].input.contexts[0]
    assert session.agreement() == []

    key = {case_id: item.key for case_id, item in by_id.items()}
    assert session.label(key[answered["id"]], 1)["verdicts"] == {"filters": 1}  # first keep it ...
    revealed = session.label(key[answered["id"]], 0, f"  {NOTE} ")  # ... then think again: newest wins
    assert revealed["verdicts"] == {"filters": 1} and revealed["label"] == {"value": 0, "note": NOTE}
    assert revealed["reasoning"] == {"filters": "kept"}
    session.label(key[declined["id"]], 1)
    revealed = session.label(key[out["id"]], 1)  # the person would keep what groundedness rejected
    assert revealed["reasoning"] == {"filters": "rejected: groundedness 2 < 4"}
    (filters,) = revealed["agreement"]
    assert (filters["judge"], filters["labels"], filters["exact"]) == ("filters", 3, pytest.approx(1 / 3))
    state = session.state("random")
    assert all(shown["label"] is not None and "verdicts" in shown for shown in state["items"])
    assert len(load_labels_file(labels_file).labels) == 4  # every verdict appended, the newest counts

    exported = review.write_text(
        root / "testset_labels.jsonl", review.testset_labels_jsonl(store.labels, items)
    )
    labels = load_labels(exported)
    assert set(labels) == {answered["id"], declined["id"], out["id"]}
    assert {case_id: label.question for case_id, label in labels.items()} == {
        case["id"]: case["question"] for case in (answered, declined, out)
    }
    assert {case_id: (label.human_keep, label.reason) for case_id, label in labels.items()} == {
        answered["id"]: (False, NOTE),
        declined["id"]: (True, "kept on review"),  # no note: a default reason
        out["id"]: (True, "kept on review"),
    }

    # `run.py review --testset` (stopped at once: the labels are already in its file) exports the same
    def ctrl_c(self: ReviewServer, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ReviewServer, "serve_forever", ctrl_c)
    capsys.readouterr()
    command = ["review", "--testset", "--config", "config.yaml", "--port", "0", "--labels", str(labels_file)]
    assert run.main(command) == 0
    printed = capsys.readouterr().out
    beside = labels_file.with_name("testset_labels.jsonl")
    assert f"candidate labels for testset.labels: {beside}" in printed
    assert "filters on keep: kappa -0.50" in printed and "exact 33% on 3 labels" in printed
    assert load_labels(beside) == labels
    assert "labels published as the artifact review_labels:" in printed

    # the filters against the person's labels, in the terminal, the summary, the artifact and the page
    command = ["testset", "--config", "config.yaml", "--set", f"testset.name={NAME}"]
    assert run.main([*command, "--set", f"testset.labels={exported}"]) == 0
    printed = capsys.readouterr().out
    assert "kept bad" in printed and "precision" in printed
    summary = json.loads((root / "out" / "testsets" / f"{NAME}-v2" / "summary.json").read_text())
    by_filter = {row["filter"]: row for row in summary["filter_agreement"]}
    assert list(by_filter) == ["critics", "roundtrip", "combined"]
    counts = (
        "labelled",
        "true_keep",
        "false_keep",
        "false_reject",
        "true_reject",
        "unlabelled",
        "stale_labels",
    )
    assert {name: tuple(row[c] for c in counts) for name, row in by_filter.items()} == {
        "critics": (3, 1, 1, 1, 0, 0, 0),
        "roundtrip": (3, 2, 1, 0, 0, 0, 0),  # the fake reader agrees with every proposed answer
        "combined": (3, 1, 1, 1, 0, 0, 0),
    }
    combined = by_filter["combined"]
    assert combined["precision"] == combined["recall"] == 0.5
    assert sorted(
        (d["id"], d["decision"], d["human_keep"], d["reason"]) for d in combined["disagreements"]
    ) == sorted([(answered["id"], "kept", False, NOTE), (out["id"], "rejected", True, "kept on review")])
    artifact = Client().get_artifact_version(NAME)
    assert (
        artifact.version == "2" and artifact.run_metadata["filter_agreement"] == summary["filter_agreement"]
    )
    page = (root / "out" / "testsets" / f"{NAME}-v2" / "eval_set.html").read_text()
    assert "Eval-set filters vs human labels" in page and NOTE in page
