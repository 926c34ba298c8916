"""The review page's parts without a browser: labels and their file, judge-person agreement, the queue's
orders, the session's blinding, and the HTTP server's guards (loopback only, own Host, JSON posts)."""

import json
import math
import urllib.error
import urllib.request

import numpy as np
import pytest
from pydantic import ValidationError
from sklearn.metrics import cohen_kappa_score

from ragbench.inputs.eval_cases import EvalCase
from ragbench.review.agreement import TARGET_HALF_WIDTH, agreement, kappa_change
from ragbench.review.labels import (
    CANDIDATE_RUBRIC,
    Label,
    LabelFileError,
    LabelStore,
    load_labels_file,
    text_sha,
)
from ragbench.review.queue import ReviewItem, candidate_item, ordered
from ragbench.review.server import ReviewServer, ReviewSession
from ragbench.scoring.rubrics import JudgeInput


def make_item(
    case_id: str,
    answer: str,
    verdicts: dict[str, int] | None = None,
    *,
    scale: str = "1-5",
    keyword_failures: list[str] | None = None,
) -> ReviewItem:
    return ReviewItem(
        rubric="correctness",
        criterion="correctness",
        criterion_label="Is the answer correct?",
        scale=scale,
        input=JudgeInput(
            case_id=case_id,
            question=f"question of {case_id}?",
            answer=answer,
            reference_answer="the reference",
            contexts=[f"passage of {case_id}"],
        ),
        sources=[f"{case_id}.md"],
        verdicts=verdicts if verdicts is not None else {"judge-a": 3},
        reasoning={name: f"{name} thinks so" for name in (verdicts or {"judge-a": 3})},
        keyword_failures=keyword_failures or [],
    )


def label_of(item: ReviewItem, value: int, note: str = "") -> Label:
    return Label(
        kind=item.kind,
        case_id=item.input.case_id,
        answer_sha=item.answer_sha,
        rubric=item.rubric,
        criterion=item.criterion,
        scale=item.scale,
        value=value,
        note=note,
        item=item.input,
        judge_verdicts=item.verdicts,
    )


# --- labels -----------------------------------------------------------------------------------------


def test_a_label_on_the_scale_with_the_answers_hash_is_accepted():
    item = make_item("c1", "Paris is the capital.")
    label = label_of(item, 4)
    assert label.answer_sha == text_sha("Paris is the capital.")
    assert label.key == ("c1", text_sha("Paris is the capital."), "correctness", "correctness")


@pytest.mark.parametrize("value", [0, 6, -1])
def test_a_value_off_the_1_to_5_scale_is_refused(value):
    with pytest.raises(ValidationError, match="not on the 1-5 scale"):
        label_of(make_item("c1", "an answer"), value)


@pytest.mark.parametrize("value", [2, -1, 5])
def test_a_value_off_the_pass_fail_scale_is_refused(value):
    with pytest.raises(ValidationError, match="not on the pass_fail scale"):
        label_of(make_item("c1", "an answer", scale="pass_fail"), value)


def test_pass_and_fail_are_both_on_the_pass_fail_scale():
    item = make_item("c1", "an answer", {"judge-a": 1}, scale="pass_fail")
    assert [label_of(item, value).value for value in (0, 1)] == [0, 1]


def test_a_label_whose_hash_is_not_of_its_answer_is_refused():
    item = make_item("c1", "the answer the person saw")
    with pytest.raises(ValidationError, match="is not the hash of the labelled answer"):
        Label(
            case_id="c1",
            answer_sha=text_sha("another answer"),
            rubric="correctness",
            criterion="correctness",
            value=3,
            item=item.input,
        )


def test_a_candidates_label_is_keyed_by_its_question():
    case = EvalCase(id="gen-1", question="What colour is the sky?", reference_answer="Blue.")
    item = candidate_item(case, "The sky is blue.", "sky.md", {"dedupe": True, "groundedness": False}, {})
    assert item.kind == "candidate" and item.rubric == CANDIDATE_RUBRIC and item.scale == "pass_fail"
    assert item.answer_sha == text_sha("What colour is the sky?")
    assert item.verdicts == {"dedupe": 1, "groundedness": 0}
    assert label_of(item, 0).kind == "candidate"
    with pytest.raises(ValidationError, match="is not the hash of the labelled question"):
        Label(
            kind="candidate",
            case_id="gen-1",
            answer_sha=text_sha("Blue."),  # the reference answer's hash: not what keys a candidate
            rubric=CANDIDATE_RUBRIC,
            criterion=CANDIDATE_RUBRIC,
            scale="pass_fail",
            value=1,
            item=item.input,
        )


def test_the_store_appends_and_a_new_store_on_the_file_reloads_the_newest_label_per_key(tmp_path):
    path = tmp_path / "labels" / "review.jsonl"  # the folder is made on the first label
    first, second = make_item("c1", "answer one"), make_item("c2", "answer two")
    store = LabelStore(path)
    assert store.labels.labels == []
    store.add(label_of(first, 2, "too short"))
    store.add(label_of(second, 5))
    stamped = store.add(label_of(first, 4, "on second thought"))
    assert stamped.labelled_at  # stamped when stored
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3  # appended, never rewritten
    assert [json.loads(line)["value"] for line in lines] == [2, 5, 4]

    reloaded = LabelStore(path)
    assert len(reloaded.labels.labels) == 3
    current = {label.case_id: label for label in reloaded.labels.current()}
    assert set(current) == {"c1", "c2"}
    assert (current["c1"].value, current["c1"].note) == (4, "on second thought")
    assert current["c2"].value == 5
    assert len(reloaded.labels.of("correctness", "correctness")) == 2
    assert reloaded.labels.of("correctness", "correctness", kind="candidate") == []
    assert reloaded.labels.jsonl().count("\n") == 2  # the current labels only
    assert reloaded.labels.digest == store.labels.digest

    # a changed answer is another key: asked again, the old label kept for the old answer
    changed = make_item("c1", "answer one, rewritten")
    reloaded.add(label_of(changed, 1))
    assert len(LabelStore(path).labels.current()) == 3


def test_an_unreadable_labels_file_names_its_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(label_of(make_item("c1", "an answer"), 3).model_dump_json() + "\n{not json\n")
    with pytest.raises(LabelFileError, match=r"line 2: the line is not JSON"):
        LabelStore(path)
    with pytest.raises(LabelFileError, match="not found"):
        load_labels_file(tmp_path / "missing.jsonl")


# --- agreement ----------------------------------------------------------------------------------------

# a person against a judge on twenty 1-5 answers: mostly near, some far
PAIRS_1_5 = [
    (1, 1), (2, 1), (2, 2), (3, 3), (3, 4), (4, 4), (4, 5), (5, 5), (5, 4), (1, 2),
    (2, 3), (3, 3), (4, 2), (5, 5), (1, 1), (3, 2), (4, 4), (5, 3), (2, 2), (3, 5),
]  # fmt: skip
PAIRS_PASS_FAIL = [(1, 1), (1, 0), (0, 0), (1, 1), (0, 1), (1, 1), (0, 0), (1, 1), (0, 0), (1, 0), (1, 1)]


def test_perfect_agreement_has_kappa_one():
    pairs = [(value, value) for value in (1, 2, 3, 4, 5)] * 3
    result = agreement(pairs, rubric="correctness", criterion="correctness", judge="judge-a")
    assert result.kappa == pytest.approx(1.0)
    assert result.exact == 1.0
    assert result.labels == 15
    assert result.confusion == (np.eye(5, dtype=int) * 3).tolist()
    assert result.kappa_low == pytest.approx(1.0) and result.kappa_high == pytest.approx(1.0)
    assert result.labels_needed == 0
    pass_fail = agreement([(1, 1), (0, 0)] * 4, rubric="r", criterion="c", judge="j", scale="pass_fail")
    assert pass_fail.kappa == pytest.approx(1.0)


def test_kappa_on_a_1_to_5_scale_is_sklearns_quadratic_weighted_kappa():
    result = agreement(PAIRS_1_5, rubric="correctness", criterion="correctness", judge="judge-a")
    person, judge = zip(*PAIRS_1_5, strict=True)
    expected = cohen_kappa_score(person, judge, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert result.kappa == pytest.approx(expected, abs=1e-12)
    assert result.exact == pytest.approx(sum(p == j for p, j in PAIRS_1_5) / len(PAIRS_1_5))
    # not the unweighted kappa: a near miss counts as partial agreement
    assert result.kappa > cohen_kappa_score(person, judge) + 0.1
    confusion = np.array(result.confusion)
    assert confusion.sum() == len(PAIRS_1_5)
    assert confusion[4, 2] == 1  # the person's 5 against the judge's 3: row person, column judge
    assert "weighted kappa" in result.sentence()


def test_kappa_on_pass_fail_is_sklearns_unweighted_kappa():
    result = agreement(PAIRS_PASS_FAIL, rubric="r", criterion="c", judge="j", scale="pass_fail")
    person, judge = zip(*PAIRS_PASS_FAIL, strict=True)
    assert result.kappa == pytest.approx(cohen_kappa_score(person, judge), abs=1e-12)
    assert result.categories == [0, 1]
    assert "weighted" not in result.sentence()


@pytest.mark.parametrize(
    ("pairs", "scale"), [(PAIRS_1_5, "1-5"), (PAIRS_PASS_FAIL, "pass_fail"), (PAIRS_1_5[:6], "1-5")]
)
def test_the_interval_contains_the_point_estimate(pairs, scale):
    result = agreement(pairs, rubric="r", criterion="c", judge="j", scale=scale)
    assert result.kappa_low is not None and result.kappa_high is not None
    assert result.kappa_low <= result.kappa <= result.kappa_high
    assert result.confidence == 0.95


def test_the_page_is_given_the_interval_as_the_sentence_writes_it():
    result = agreement(PAIRS_1_5, rubric="r", criterion="c", judge="j")
    assert result.interval() == f"[{result.kappa_low:.2f}, {result.kappa_high:.2f}]"
    assert f" {result.interval()}, exact " in result.sentence()


def test_the_interval_is_reproducible_with_a_seed():
    first = agreement(PAIRS_1_5, rubric="r", criterion="c", judge="j", seed=3)
    again = agreement(PAIRS_1_5, rubric="r", criterion="c", judge="j", seed=3)
    assert (first.kappa_low, first.kappa_high) == (again.kappa_low, again.kappa_high)


def test_no_more_labels_are_needed_once_the_interval_is_narrow():
    rng = np.random.default_rng(1)
    person = rng.integers(1, 6, 200)
    judge = np.clip(person + rng.choice([-1, 0, 0, 0, 0, 0, 1], 200), 1, 5)
    result = agreement(
        list(zip(person.tolist(), judge.tolist(), strict=True)), rubric="r", criterion="c", judge="j"
    )
    assert 0 < result.kappa < 1
    assert (result.kappa_high - result.kappa_low) / 2 <= TARGET_HALF_WIDTH
    assert result.labels_needed == 0
    assert "interval within +/-0.1" in result.sentence()


def test_few_noisy_labels_need_more():
    pairs = [(1, 5), (2, 2), (5, 1), (3, 4), (4, 2), (2, 5), (3, 3)]
    result = agreement(pairs, rubric="r", criterion="c", judge="j")
    half = (result.kappa_high - result.kappa_low) / 2
    assert half > TARGET_HALF_WIDTH
    assert result.labels_needed > 0
    assert result.labels_needed == math.ceil(len(pairs) * (half / TARGET_HALF_WIDTH) ** 2) - len(pairs)
    assert f"about {result.labels_needed} more labels" in result.sentence()


def test_too_few_labels_give_no_kappa_or_no_interval():
    none = agreement([], rubric="r", criterion="c", judge="j")
    assert (none.labels, none.kappa, none.exact, none.labels_needed) == (0, None, None, None)
    one = agreement([(3, 4)], rubric="r", criterion="c", judge="j")
    assert one.kappa is None and "kappa not defined yet" in one.sentence()
    four = agreement([(1, 1), (2, 3), (4, 4), (5, 4)], rubric="r", criterion="c", judge="j")
    assert four.kappa is not None
    assert (four.kappa_low, four.kappa_high, four.labels_needed) == (None, None, None)
    assert "(no interval)" in four.sentence()


# --- the queue's orders -------------------------------------------------------------------------------


def many_items(count: int = 30) -> list[ReviewItem]:
    return [make_item(f"case-{i:02d}", f"answer {i}", {"a": 3, "b": 3}) for i in range(count)]


def test_judges_that_disagree_come_first_under_disagreement():
    items = many_items(10)
    split = make_item("split", "judges disagree on me", {"a": 1, "b": 5})
    near = make_item("near", "judges nearly agree on me", {"a": 3, "b": 4})
    queue = ordered([*items[:5], near, split, *items[5:]], "disagreement")
    assert [item.input.case_id for item in queue[:2]] == ["split", "near"]
    for seed in range(5):
        assert ordered([*items, near, split], "disagreement", seed=seed)[0] is split


def test_a_judge_whose_samples_disagree_or_a_keyword_test_against_the_judge_come_early():
    items = many_items(10)
    wavering = make_item("wavering", "a judge wavers on me", {"a": 3})
    wavering.samples = {"a": [3, 1, 5]}
    flagged = make_item("flagged", "a keyword test fails me", {"a": 5}, keyword_failures=["must: Paris"])
    queue = ordered([*items, flagged, wavering], "disagreement")
    assert [item.input.case_id for item in queue[:2]] == ["wavering", "flagged"]


def test_verdicts_nearest_the_middle_come_first_under_uncertain():
    sure = make_item("sure", "a clear answer", {"a": 5})
    unsure = make_item("unsure", "a middling answer", {"a": 3})
    leaning = make_item("leaning", "a fair answer", {"a": 4})
    queue = ordered([sure, leaning, unsure], "uncertain")
    assert [item.input.case_id for item in queue] == ["unsure", "leaning", "sure"]


def test_random_order_is_seeded():
    items = many_items(30)
    keys = [item.key for item in ordered(items, "random", seed=7)]
    assert sorted(keys) == sorted(item.key for item in items)  # every item once
    assert [item.key for item in ordered(items, "random", seed=7)] == keys
    assert [item.key for item in ordered(list(reversed(items)), "random", seed=7)] == keys  # not input order
    assert [item.key for item in ordered(items, "random", seed=8)] != keys
    assert keys != [item.key for item in items]


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="unknown order"):
        ordered(many_items(2), "newest")  # type: ignore[arg-type]


# --- the session: blinding ----------------------------------------------------------------------------


@pytest.fixture
def items() -> list[ReviewItem]:
    return [
        make_item("split", "judges disagree on me", {"judge-a": 1, "judge-b": 5}),
        *(make_item(f"case-{i}", f"answer {i}", {"judge-a": 2 + i % 3}) for i in range(5)),
    ]


def test_verdicts_are_hidden_until_the_person_labels_the_item(tmp_path, items):
    session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="a review", seed=1)
    state = session.state("disagreement")
    assert state["title"] == "a review"
    assert state["orders"] == ["disagreement", "uncertain", "random", "sample", "sample_uncertain"]
    assert len(state["items"]) == len(items)
    for shown in state["items"]:
        assert shown["label"] is None
        assert not {"verdicts", "reasoning", "keyword_failures"} & set(shown)
    assert "judge-a" not in json.dumps(state["items"])  # not even the judges' names
    assert state["agreement"] == []

    split = items[0]
    revealed = session.label(split.key, 2, "  partly right  ")
    assert revealed["verdicts"] == {"judge-a": 1, "judge-b": 5}
    assert revealed["reasoning"]["judge-b"] == "judge-b thinks so"
    assert revealed["label"] == {"value": 2, "note": "partly right"}
    assert {row["judge"] for row in revealed["agreement"]} == {"judge-a", "judge-b"}
    assert {row["interval"] for row in revealed["agreement"]} == {""}  # one label: no interval to write

    after = {shown["key"]: shown for shown in session.state("random")["items"]}
    assert after[split.key]["verdicts"] == {"judge-a": 1, "judge-b": 5}
    assert after[split.key]["label"] == {"value": 2, "note": "partly right"}
    for item in items[1:]:
        assert after[item.key]["label"] is None and "verdicts" not in after[item.key]

    # a new session on the same file (a restart) shows the label and reveals its verdicts
    again = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="a review", seed=1)
    shown = {shown["key"]: shown for shown in again.state("disagreement")["items"]}
    assert shown[split.key]["verdicts"] == {"judge-a": 1, "judge-b": 5}
    assert [row["labels"] for row in again.state("disagreement")["agreement"]] == [1, 1]


def test_the_session_refuses_unknown_items_bad_values_and_an_empty_queue(tmp_path, items):
    store = LabelStore(tmp_path / "labels.jsonl")
    session = ReviewSession(items, store, title="t")
    with pytest.raises(KeyError):
        session.label("no|such|item|here", 3)
    with pytest.raises(ValueError, match="not on the 1-5 scale"):
        session.label(items[0].key, 7)
    assert not store.path.exists()  # nothing written
    with pytest.raises(ValueError, match="nothing to review"):
        ReviewSession([], store, title="t")


def test_the_sessions_agreement_counts_every_label_per_judge(tmp_path, items):
    session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="t")
    given = {item.key: 1 + i % 5 for i, item in enumerate(items)}
    for key, value in given.items():
        session.label(key, value)
    rows = {row.judge: row for row in session.agreement()}
    assert rows["judge-a"].labels == len(items) and rows["judge-b"].labels == 1
    pairs = [(given[item.key], item.verdicts["judge-a"]) for item in items]
    assert rows["judge-a"].kappa == pytest.approx(
        agreement(pairs, rubric="correctness", criterion="correctness", judge="judge-a").kappa
    )


# --- the HTTP server ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def running_server(tmp_path_factory):
    """One server for the module (its shutdown waits out a 0.5 s poll); each test gives it a new session."""
    placeholder = [make_item("placeholder", "an answer")]
    store = LabelStore(tmp_path_factory.mktemp("review") / "labels.jsonl")
    served = ReviewServer(ReviewSession(placeholder, store, title="placeholder"), port=0)
    try:
        served.start()
        yield served
    finally:
        served.shutdown()
        served.server_close()


@pytest.fixture
def server(running_server, tmp_path, items):
    running_server.session = ReviewSession(
        items, LabelStore(tmp_path / "labels.jsonl"), title="served", seed=2
    )
    return running_server


def request(
    server: ReviewServer, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(server.url + path.lstrip("/"), data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def post_label(server: ReviewServer, value, key: str | None = None, **extra) -> tuple[int, dict]:
    key = key if key is not None else next(iter(server.session.items))
    body = json.dumps({"key": key, "value": value, "note": "a note", **extra}).encode()
    status, _, answer = request(server, "/api/label", body, {"Content-Type": "application/json"})
    return status, json.loads(answer)


def labels_written(server: ReviewServer) -> int:
    path = server.session.store.path
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_server_binds_to_127_0_0_1_and_shuts_down(tmp_path, items):
    session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="t")
    served = ReviewServer(session, port=0)
    try:
        thread = served.start()
        host, port = served.server_address[:2]
        assert host == "127.0.0.1" and port != 0
        assert served.url == f"http://127.0.0.1:{port}/"
        assert request(served, "/")[0] == 200
    finally:
        served.shutdown()
        served.server_close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(served.url, timeout=5)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_the_server_refuses_a_host_that_is_not_loopback(tmp_path, items, host):
    session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="t")
    with pytest.raises(ValueError, match="loopback"):
        ReviewServer(session, host=host, port=0)


def test_the_page_and_its_script_are_served_with_a_strict_policy(server):
    status, headers, page = request(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<script src="/review.js"></script>' in page
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, script = request(server, "/review.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"textContent" in script and b"innerHTML" not in script
    assert request(server, "/nothing-here")[0] == 404


def test_the_state_is_served_blind(server):
    status, _, body = request(server, "/api/state?order=random")
    state = json.loads(body)
    assert status == 200 and state["order"] == "random" and len(state["items"]) == 6
    assert all("verdicts" not in item for item in state["items"])
    assert json.loads(request(server, "/api/state")[2])["order"] == "disagreement"
    assert request(server, "/api/state?order=newest")[0] == 400


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1", "127.0.0.1:1"])
def test_a_request_naming_another_host_is_forbidden(server, host):
    port = server.server_address[1]
    headers = {"Host": host.format(port=port)}
    status, _, body = request(server, "/api/state", headers=headers)
    assert status == 403 and b"Host" in body
    status, _, _ = request(
        server,
        "/api/label",
        json.dumps({"key": next(iter(server.session.items)), "value": 3}).encode(),
        headers | {"Content-Type": "application/json"},
    )
    assert status == 403
    assert labels_written(server) == 0


def test_localhost_with_the_port_is_this_servers_host(server):
    headers = {"Host": f"localhost:{server.server_address[1]}"}
    assert request(server, "/api/state", headers=headers)[0] == 200


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_a_label_not_posted_as_json_is_refused(server, content_type):
    body = json.dumps({"key": next(iter(server.session.items)), "value": 3}).encode()
    status, _, answer = request(server, "/api/label", body, {"Content-Type": content_type})
    assert status == 415 and "JSON" in json.loads(answer)["error"]
    assert labels_written(server) == 0


def test_a_post_elsewhere_is_not_found(server):
    status, _, _ = request(server, "/api/state", b"{}", {"Content-Type": "application/json"})
    assert status == 404


@pytest.mark.parametrize("value", [0, 6, 9, "3", 3.5, True, None])
def test_a_bad_value_is_a_bad_request(server, value):
    status, answer = post_label(server, value)
    assert status == 400 and answer["error"]
    assert labels_written(server) == 0


def test_an_unknown_key_or_a_missing_field_is_a_bad_request(server):
    status, answer = post_label(server, 3, key="no|such|item|here")
    assert status == 400 and "no|such|item|here" in answer["error"]
    body = json.dumps({"value": 3}).encode()
    assert request(server, "/api/label", body, {"Content-Type": "application/json"})[0] == 400
    assert request(server, "/api/label", b"{not json", {"Content-Type": "application/json"})[0] == 400
    assert labels_written(server) == 0


def test_a_good_label_is_stored_and_answered_with_the_verdicts(server, items):
    split = items[0]
    status, answer = post_label(server, 4, key=split.key)
    assert status == 200
    assert answer["verdicts"] == {"judge-a": 1, "judge-b": 5}
    assert answer["label"] == {"value": 4, "note": "a note"}
    assert {row["judge"]: row["labels"] for row in answer["agreement"]} == {"judge-a": 1, "judge-b": 1}
    assert labels_written(server) == 1
    stored = json.loads(server.session.store.path.read_text())
    assert (stored["case_id"], stored["value"], stored["note"]) == ("split", 4, "a note")
    assert stored["judge_verdicts"] == {"judge-a": 1, "judge-b": 5}
    state = json.loads(request(server, "/api/state")[2])
    shown = {item["key"]: item for item in state["items"]}
    assert shown[split.key]["verdicts"] == {"judge-a": 1, "judge-b": 5}
    assert sum("verdicts" in item for item in state["items"]) == 1
    # a charset on the content type is still JSON
    status, _, _ = request(
        server,
        "/api/label",
        json.dumps({"key": items[1].key, "value": 2}).encode(),
        {"Content-Type": "application/json; charset=utf-8"},
    )
    assert status == 200 and labels_written(server) == 2


@pytest.mark.parametrize("body", [b"[3]", b'"3"', b"3"])
def test_a_body_that_is_not_a_json_object_is_a_bad_request(server, body):
    status, _, _ = request(server, "/api/label", body, {"Content-Type": "application/json"})
    assert status == 400


def test_a_null_note_is_no_note(server, items):
    status, answer = post_label(server, 3, key=items[0].key, note=None)
    assert status == 200
    assert answer["label"]["note"] == ""


def test_the_testset_labels_export_holds_only_the_reviewed_candidates(tmp_path):
    """A regenerated set may give an id another question: the labels of the older question stay in the
    labels file but not in the export, which holds one label per id."""
    from ragbench.review.labels import LabelStore
    from ragbench.runs.review import testset_labels_jsonl

    old, new = (
        candidate_item(EvalCase(id="gen-1", question=q, reference_answer="Blue."), "p", "s.md", {}, {})
        for q in ("What colour is the sky?", "Which colour has the sky at noon?")
    )
    session = ReviewSession([old, new], LabelStore(tmp_path / "labels.jsonl"), title="sets")
    session.label(old.key, 1)
    session.label(new.key, 0, "asks the same twice")
    (line,) = testset_labels_jsonl(session.store.labels, [new]).splitlines()
    assert json.loads(line) == {
        "id": "gen-1",
        "question": "Which colour has the sky at noon?",
        "human_keep": False,
        "reason": "asks the same twice",
    }


def test_human_correctness_labels_get_the_same_figures():
    """The eval-case file's `human_correctness` labels are measured like the page's: kappa with its
    bootstrap interval and the labels still needed, in the run's judge reliability lines."""
    from ragbench.analysis.judge_reliability import human_agreement

    pairs = [(5, 5), (4, 5), (1, 2), (2, 1), (5, 4), (3, 3), (1, 1), (5, 5)]
    (found,) = human_agreement({"judge-a": pairs})
    expected = agreement(pairs, rubric="correctness", criterion="correctness", judge="judge-a")
    assert found.kappa == pytest.approx(expected.kappa)
    assert (found.kappa_low, found.kappa_high) == (expected.kappa_low, expected.kappa_high)
    assert found.kappa_low < found.kappa <= found.kappa_high and found.labels_needed > 0
    from ragbench.analysis.judge_reliability import JudgeReliability

    (line,) = JudgeReliability(keyword=None, judge_pairs=[], human=[found]).lines()
    assert f"[{found.kappa_low:.2f}, {found.kappa_high:.2f}]" in line and "more labels for +/-0.1" in line


def test_an_aligned_rubric_shows_disagreements_first_and_never_the_graded_case():
    from ragbench.review.alignment import aligned_rubric
    from ragbench.review.labels import ReviewLabels
    from ragbench.scoring.rubrics import CORRECTNESS

    # judge-a said 5 to every answer; the person disagrees most on "c", then "b", agrees on "a"
    people = {"a": 5, "b": 3, "c": 1}
    labels = ReviewLabels(
        labels=[
            label_of(make_item(case, f"answer {case}", {"judge-a": 5}), score)
            for case, score in people.items()
        ]
    )
    aligned = aligned_rubric(CORRECTNESS, labels, "judge-a", examples=2)
    assert [e.case_id for e in aligned.examples] == ["c", "b", "a"]
    assert aligned != CORRECTNESS and aligned.examples[0].scores == {"correctness": 1}
    graded = make_item("c", "another answer of c").input
    prompt = aligned.messages(graded)[1]["content"]
    assert "question of b?" in prompt and "question of a?" in prompt
    assert prompt.count("question of c?") == 1  # the graded question only: its own example is left out
    assert '"score": 3' in prompt and prompt.index("question of b?") < prompt.index(
        "Now the answer to grade."
    )
    assert aligned_rubric(CORRECTNESS, labels, "judge-a", examples=0) == CORRECTNESS


def test_the_kappa_change_is_paired_over_the_same_labels():
    from ragbench.review.agreement import kappa_change

    person = [1, 2, 3, 4, 5] * 6
    lenient = [5] * 30  # says 5 to everything: kappa 0
    same = kappa_change(person, lenient, lenient, seed=1)
    assert (same.difference, same.low, same.high) == (0.0, 0.0, 0.0)
    better = kappa_change(person, lenient, [max(1, p - (i % 2)) for i, p in enumerate(person)], seed=1)
    assert better.difference > 0.5 and 0 < better.low <= better.difference <= better.high
    assert "kappa change +" in better.text() and kappa_change([1, 2], [1, 2], [2, 1]).difference is None


def test_the_agreement_intervals_keep_their_values_for_a_seed():
    """Recorded before the bootstrap moved to `ragbench.stats.inference.percentile_bootstrap`: the same
    seed still gives the same kappa intervals, so a review page's numbers do not move."""
    person = [5, 4, 4, 3, 5, 2, 1, 4, 3, 5, 4, 2]
    judge = [5, 4, 3, 3, 4, 2, 2, 4, 3, 5, 5, 1]
    other = [4, 4, 3, 2, 4, 2, 1, 5, 3, 4, 5, 1]
    weighted = agreement(
        list(zip(person, judge, strict=True)), rubric="r", criterion="c", judge="j", seed=3, resamples=500
    )
    assert (weighted.kappa_low, weighted.kappa_high, weighted.labels_needed) == pytest.approx(
        (0.6666666666666666, 0.9428791727140784, 11), rel=1e-12
    )
    pass_fail = [(1, 1), (0, 0), (1, 0), (1, 1), (0, 0), (1, 1), (0, 1)]
    plain = agreement(pass_fail, rubric="r", criterion="c", judge="j", scale="pass_fail", seed=1)
    assert (plain.kappa_low, plain.kappa_high) == pytest.approx((-0.27331649831649724, 1.0), rel=1e-12)
    change = kappa_change(person, judge, other, seed=7, resamples=800)
    assert (change.difference, change.low, change.high) == pytest.approx(
        (-0.05889724310776945, -0.2624092741935485, 0.04630713593419738), rel=1e-12
    )
