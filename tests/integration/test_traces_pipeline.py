"""The deployed system's traces as eval cases, through a real ZenML run: an OTLP/JSON export (JSON Lines of
requests, as the collector's file exporter writes) of OpenInference RAG traces, the logged system scored
as a cell with intervals by the fake OpenAI judge without being asked anything, the scores written back as
annotations keyed by span id; and a malformed export refused before any step runs."""

import csv
import json
import time
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.otlp_traces import HOUR_NS, rag_trace, write_jsonl
from tests.projects import THREE_TOPICS, newest_run, printed, write_knowledge_base

QUESTIONS = [f"Question number {n} about loops, from user{n}@example.com?" for n in range(1, 9)]


def judge(request: dict) -> str:
    """Faithful unless the logged answer says it could not find anything."""
    user = last_user_text(request)
    bad = "could not find" in user.rsplit("<answer>", 1)[-1]
    if "faithfulness" in request["messages"][0]["content"]:
        score = 1 if bad else 5
        return json.dumps(
            {
                "reasoning": "read",
                "faithfulness": score,
                "relevance": score,
                "helpfulness": score,
                "toxicity": 1,
            }
        )
    return json.dumps({"reasoning": "compared", "score": 1 if bad else 5})


def write_traces(root: Path) -> Path:
    """Eight RAG traces of the last hours, one a day old (outside the window), one without retrieval."""
    now = time.time_ns()
    batches = [
        rag_trace(
            n,
            question,
            "I could not find that." if n == 3 else "Use the break statement.",
            [
                ("loops.md", THREE_TOPICS["loops.md"] + " Ask ops@example.org.", 0.8),
                ("files.md", THREE_TOPICS["files.md"], 0.2),
            ],
            start_ns=now - n * HOUR_NS // 4,
            tags=["prod"],
        )
        for n, question in enumerate(QUESTIONS, start=1)
    ]
    batches.append(rag_trace(20, "An old question?", "Old.", [], start_ns=now - 30 * HOUR_NS))
    batches.append(rag_trace(21, "Not retrieved?", "Chat only.", [], start_ns=now - HOUR_NS, retriever=False))
    failed = rag_trace(22, "Failed?", "Partial.", [], start_ns=now - HOUR_NS)
    failed[2]["status"] = {"code": 2, "message": "<script>alert(1)</script>"}  # user data, escaped
    batches.append(failed)
    return write_jsonl(root / "spans.jsonl", batches)


def write_config(root: Path, llm: FakeOpenAIServer, spans: str) -> None:
    settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
    (root / "config.yaml").write_text(
        f"name: traces-{root.name}".lower()[:60] + "\n"
        "knowledge_base: {kind: folder, path: kb}\noutput_dir: out\n"
        f"eval_cases: {{traces: {{path: {spans}, since: 24h, sample_size: 6, seed: 1, "
        "annotations_path: annotations/scores.jsonl, redact: [email]}}\n"
        "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\n"
        f"evaluation: {{judge: {settings}}}\ngeneration: {{sample_size: null}}\n"
        f"llm_cache_dir: {root / 'llm-cache'}\n"
        "regression: {min_traces: 6}\n"  # six traces are enough for this gate; the default asks 20
        "systems: [{name: prod-rag, traces: true, source_match: {rule: basename}}]\n"
    )


def test_logged_traces_are_scored_as_a_cell_and_annotated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    write_knowledge_base(tmp_path, THREE_TOPICS)
    write_traces(tmp_path)
    (tmp_path / "broken.jsonl").write_text('{"resourceSpans": []}\n{"resourceSpans": [oops\n')
    with FakeOpenAIServer(responder=judge) as llm:
        # a malformed export: one message, a non-zero exit, before any step (no run, nothing written)
        write_config(tmp_path, llm, "broken.jsonl")
        code, _, err = printed()
        assert code != 0 and "broken.jsonl:2: not JSON" in err
        assert not (tmp_path / "out").exists() and not (tmp_path / "annotations").exists()
        assert llm.request_count == 0

        write_config(tmp_path, llm, "spans.jsonl")
        code, _, err = printed()
        assert code == 0, err
    assert llm.request_count > 0
    # the users' addresses were masked as the traces were read: no judge call, record or page holds one
    assert "@example." not in json.dumps(llm.requests) and "[redacted]" in json.dumps(llm.requests)
    assert "@example." not in (tmp_path / "out" / "latest" / "cases.jsonl").read_text()
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        (row,) = list(csv.DictReader(file))
    # six of the eight RAG traces in the window, drawn with inclusion probability 6/8; scored as logged
    assert row["external"] == "prod-rag" and row["answers_produced"] == "6"
    assert row["faithfulness_1to5_cases"] == "6"
    assert (
        float(row["faithfulness_1to5_low"])
        <= float(row["faithfulness_1to5"])
        <= float(row["faithfulness_1to5_high"])
    )
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "Logged system prod-rag" in html and "inclusion probability 0.75" in html
    assert "Redacted as read: 16 email" in html and "@example." not in html
    assert f"{21:032x}: no retriever span" in html and "1 outside the window" in html
    assert "failed: &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html

    lines = [
        json.loads(line) for line in (tmp_path / "annotations" / "scores.jsonl").read_text().splitlines()
    ]
    sampled = {line["trace_id"] for line in lines}
    assert len(sampled) == 6 and all(line["span_id"] == line["trace_id"][24:] + "00000001" for line in lines)
    faithfulness = {
        int(line["trace_id"], 16): line["score"] for line in lines if line["name"] == "faithfulness"
    }
    assert set(faithfulness.values()) <= {1.0, 5.0} and all(
        score == (1.0 if trace == 3 else 5.0) for trace, score in faithfulness.items()
    )
    assert all(line["explanation"] == "read" for line in lines if line["name"] == "faithfulness")
    # the same annotations are the run's artifact
    artifact = newest_run().steps["trace_annotations"].outputs["trace_annotations"][0].load()
    assert len(artifact.annotations) == len(lines)


def flattering_judge(request: dict) -> str:
    """Faithfulness 5 for the right answers; 4 for the hedged wrong ones ("Perhaps ..."), a person's 1."""
    answer = last_user_text(request).rsplit("<answer>", 1)[-1]
    score = 4 if "Perhaps" in answer else 5
    scores = {"faithfulness": score, "relevance": score, "helpfulness": score, "toxicity": 1}
    return json.dumps({"reasoning": "read", **scores})


def test_a_persons_labels_of_sampled_traces_correct_the_logged_systems_numbers(tmp_path, monkeypatch):
    """The review page and label correction on trace cases, as on any run's: a person labels the logged
    answers of a uniform sample of the traces in the page's `sample` order, and the next run corrects the
    judge's faithfulness of the logged system, which the judge flattered, towards the person's."""
    from ragbench.review.labels import LabelStore
    from ragbench.review.server import ReviewSession
    from ragbench.runs import review
    from tests.integration.test_label_correction_pipeline import latest_results

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    write_knowledge_base(tmp_path, THREE_TOPICS)
    now = time.time_ns()
    wrong = {n for n in range(30) if n % 3 == 0}  # 10 of 30: faithfulness 1 to a person, 4 to the judge
    write_jsonl(
        tmp_path / "spans.jsonl",
        [
            rag_trace(
                n + 1,
                f"How do I leave loop number {n}?",
                "Perhaps use the continue statement." if n in wrong else "Use the break statement.",
                [("loops.md", THREE_TOPICS["loops.md"], 0.9)],
                start_ns=now - (n + 1) * HOUR_NS // 20,
            )
            for n in range(30)
        ],
    )
    column = "faithfulness_1to5"
    with FakeOpenAIServer(responder=flattering_judge) as llm:
        write_config(tmp_path, llm, "spans.jsonl")
        every_trace = (tmp_path / "config.yaml").read_text().replace("sample_size: 6", "sample_size: null")
        (tmp_path / "config.yaml").write_text(every_trace)
        assert printed()[0] == 0
        raw = next(row for row in latest_results(tmp_path).rows)[column]
        assert raw == pytest.approx((20 * 5 + 10 * 4) / 30, abs=1e-4)  # the table rounds to 4 places
        _, items = review.answer_items_of_run(None, "context", None)
        session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="traces", seed=0)
        queue = session.state("sample")["items"]
        faithfulness = [item for item in queue if item["key"].endswith("|faithfulness")]
        for item in faithfulness[:15]:  # the logged answers of the first 15 traces of the sample order
            session.label(item["key"], 1 if "Perhaps" in item["answer"] else 5, order="sample")
        config = (tmp_path / "config.yaml").read_text()
        correcting = "evaluation: {label_correction: {labels: labels.jsonl}, judge:"
        (tmp_path / "config.yaml").write_text(config.replace("evaluation: {judge:", correcting))
        requests = llm.request_count
        code, out, err = printed()
        assert code == 0, err + out
        assert llm.request_count == requests  # correcting asks no LLM: every verdict is cached
    table = latest_results(tmp_path)
    correction = table.label_correction.of(column)
    assert correction is not None and correction.sampled_cases == 15 and correction.cases == 30
    (estimate,) = correction.estimates.values()
    truth = (20 * 5 + 10 * 1) / 30
    assert estimate.estimate is not None and estimate.low <= truth <= estimate.high
    assert abs(estimate.estimate - truth) < abs(raw - truth)  # nearer the person's than the judge's mean


def test_a_sample_stratified_by_tag_is_weighted_by_each_strata_share_of_the_window(tmp_path, monkeypatch):
    """Four `vip` traces, all answered well, and 36 others, half answered "I could not find that.", sampled
    six and six (`allocation: equal`): the row's faithfulness is the strata's means weighted 4/40 and 36/40,
    not the sample's plain mean, with a stratified interval; the report breaks the scores down by stratum;
    and a person's labels correct it stratum by stratum, weighted the same way."""
    from tests.integration.test_label_correction_pipeline import latest_results

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    write_knowledge_base(tmp_path, THREE_TOPICS)
    now = time.time_ns()
    write_jsonl(
        tmp_path / "spans.jsonl",
        [
            rag_trace(
                n,
                f"How do I leave loop number {n}?",
                "I could not find that." if n > 4 and n % 2 else "Use the break statement.",
                [("loops.md", THREE_TOPICS["loops.md"], 0.9)],
                start_ns=now - n * HOUR_NS // 20,
                tags=["vip"] if n <= 4 else ["free"],
            )
            for n in range(1, 41)
        ],
    )
    column = "faithfulness_1to5"
    with FakeOpenAIServer(responder=judge) as llm:
        write_config(tmp_path, llm, "spans.jsonl")
        config = (
            (tmp_path / "config.yaml")
            .read_text()
            .replace("sample_size: 6,", "sample_size: 10, strata: [vip], allocation: equal,")
        )
        (tmp_path / "config.yaml").write_text(config)
        code, out, err = printed()
        assert code == 0, err + out
        table = latest_results(tmp_path)
        (row,) = table.rows
        reading = table.traffic
        assert [(s.name, s.sampled, s.usable) for s in reading.strata] == [("vip", 4, 4), ("other", 6, 36)]
        other = [
            table.case_values[row["cell"]][column][case]
            for case, stratum in reading.stratum_of.items()
            if stratum == "other"
        ]
        weighted = 0.1 * 5.0 + 0.9 * sum(other) / len(other)
        plain = sum(table.case_values[row["cell"]][column].values()) / 10
        assert row[column] == pytest.approx(weighted, abs=1e-4) and weighted != pytest.approx(plain)
        assert row[f"{column}_low"] <= row[column] <= row[f"{column}_high"]
        assert {r["case_type"] for r in table.case_type_rows} == {"vip", "other"}
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "stratified by tag (vip 4 of 4 (inclusion probability 1), other 6 of 36" in html
        assert "Scores by case type" in html

        # a person labels every sampled answer as the judge scored it: the corrected faithfulness is each
        # stratum's labels, weighted by the strata's shares like the judge's row
        from ragbench.review.labels import LabelStore
        from ragbench.review.server import ReviewSession
        from ragbench.runs import review

        _, items = review.answer_items_of_run(None, "context", None)
        session = ReviewSession(items, LabelStore(tmp_path / "labels.jsonl"), title="traces", seed=0)
        queue = [item for item in session.state("sample")["items"] if item["key"].endswith("|faithfulness")]
        for item in queue:
            session.label(item["key"], 1 if "could not find" in item["answer"] else 5, order="sample")
        correction = "label_correction: {labels: labels.jsonl, min_labels: 3}"
        correcting = config.replace("evaluation: {judge:", f"evaluation: {{{correction}, judge:")
        (tmp_path / "config.yaml").write_text(correcting)
        code, out, err = printed()
        assert code == 0, err + out
    correction = latest_results(tmp_path).label_correction.of(column)
    (estimate,) = correction.estimates.values()
    assert estimate.weighted and estimate.labels == 10
    assert estimate.estimate == pytest.approx(weighted, abs=1e-6)
    assert estimate.low <= weighted <= estimate.high
