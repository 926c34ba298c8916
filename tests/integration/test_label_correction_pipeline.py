"""Labels that correct the numbers, through real ZenML runs against the loopback fake OpenAI server.

Two readers answer 40 cases; reader A is right on 32, reader B on 26. The fake judge is right about A but
flatters B's wrong answers ("Perhaps ...") by 2 points (3 instead of 1), so the judge's raw means put B
first. A person labels, on the review page's `sample` order (a uniform random sample of cases, both
readers' answers of a case together), the cases the plan asks for; the next run corrects the judged means
with those labels (prediction-powered) and its verdict names A, while the judge's own verdict, kept beside
it, named B. Labels given in a non-random order are left out of the estimate and the report says so. The
config names its labels file relative to itself and the corrected runs start from another folder; a file
with a value of 1.0 stops the run before any work, with one sentence naming the line and the case.
"""

import json
from pathlib import Path

import run
from ragbench.review.labels import LabelStore, text_sha
from ragbench.review.server import ReviewSession
from ragbench.runs import review
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

CASES = 40
RIGHT_A = {k for k in range(CASES) if k % 5 != 0}  # 32 of 40
RIGHT_B = {k for k in range(CASES) if k % 20 not in (1, 2, 3, 6, 7, 11, 13)}  # 26 of 40


def fact(k: int) -> str:
    return f"Item {k} is stored in bin B{k * 7 % 97}."


def answer_of(model: str, question: str) -> str:
    k = int(question.split("item ", 1)[1].split(" ", 1)[0])
    right = RIGHT_A if "reader-a" in model else RIGHT_B
    if k in right:
        return fact(k)
    wrong = f"Item {k} is stored in bin Z{k}."
    return f"Perhaps {wrong[0].lower()}{wrong[1:]}" if "reader-b" in model else wrong


def person(answer: str) -> int:
    """A person's correctness: right 5, wrong 1, whatever the wording."""
    return 1 if " bin Z" in answer else 5


def responder(request: dict) -> str:
    user = last_user_text(request)
    if not request.get("response_format"):
        question = user.rsplit("Question:", 1)[1].strip().splitlines()[0]
        return answer_of(request["model"], question)
    graded = user.rsplit("<answer>", 1)[1].split("</answer>", 1)[0].strip()
    score = 3 if graded.startswith("Perhaps") else person(graded)  # B's wrong answers flattered by 2
    return json.dumps({"reasoning": "compared with the reference", "score": score})


def write(tmp_path: Path, server: FakeOpenAIServer, correction: str = "") -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    documents = {f"items{part}.md": "\n".join(fact(k) for k in range(part, CASES, 4)) for part in range(4)}
    cases = [
        {
            "id": f"item-{k:02d}",
            "question": f"Where is item {k} stored?",
            "reference_answer": fact(k),
            "expected_sources": [f"items{k % 4}.md"],
        }
        for k in range(CASES)
    ]
    write_project(
        tmp_path,
        documents,
        cases,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
        "reader: [openai/reader-a, openai/reader-b], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, judge_check: null, keyword_tests: false, rubrics: [correctness]"
        f"{correction}}}\n",
    )


def label_cases(session: ReviewSession, order: str, cases: int) -> None:
    """Label every answer of the first `cases` cases of the page's `order`, as the person would."""
    done: list[str] = []
    for item in session.state(order)["items"]:
        case = item["key"].split("|", 1)[0]
        if case not in done:
            if len(done) == cases:
                break
            done.append(case)
        session.label(item["key"], person(item["answer"]), order=order)


def latest_results(tmp_path: Path):
    """The results table of the run `out/latest` points at."""
    from zenml.client import Client

    run_name = (tmp_path / "out" / "latest").resolve().name
    return Client().get_pipeline_run(run_name).steps["build_results_table"].outputs["results"][0].load()


def verdict_of(table, column: str):
    return next(v for v in table.verdicts if v.column == column)


def test_sampled_labels_correct_a_judge_that_flatters_one_reader(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    column = "correctness_0to1"
    labels_file = tmp_path / "labels.jsonl"
    with FakeOpenAIServer(responder=responder) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        raw = latest_results(tmp_path)
        names = {row["cell"]: row["label"] for row in raw.rows}
        means = {names[row["cell"]]: row[column] for row in raw.rows}
        assert means["openai/reader-b"] > means["openai/reader-a"]  # the flattered reader looks best
        assert names[verdict_of(raw, column).best] == "openai/reader-b"

        _, items = review.answer_items_of_run(None, None, None)
        session = ReviewSession(items, LabelStore(labels_file), title="sample", seed=0)
        # labels in a non-random order first: they grade the judge, never pass as a sample
        label_cases(session, "disagreement", 3)
        label_cases(session, "sample", 12)  # a first batch: the report plans how many more are needed
        # the labels file named relative to the config, which later runs find from another folder
        write(tmp_path, server, correction=", label_correction: {labels: labels.jsonl, target_width: 0.3}")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        config = str(tmp_path / "config.yaml")
        before = server.request_count
        # a label whose value is a 0-1 "right" (1.0) stops the run before any work, naming line and case
        bad = [json.loads(line) for line in labels_file.read_text().splitlines()[:2]]
        bad[1]["value"] = 1.0
        (tmp_path / "bad_labels.jsonl").write_text("".join(json.dumps(label) + "\n" for label in bad))
        (tmp_path / "bad.yaml").write_text(
            (tmp_path / "config.yaml").read_text().replace("labels.jsonl", "bad_labels.jsonl")
        )
        capsys.readouterr()
        assert run.main(["--config", str(tmp_path / "bad.yaml")]) == 2
        stopped = capsys.readouterr()
        assert (
            f"labels file {tmp_path / 'bad_labels.jsonl'}, line 2 (case {bad[1]['case_id']}): value 1.0 "
            "is not an integer on the 1-5 scale"
        ) in stopped.err + stopped.out
        assert "validation error" not in stopped.err + stopped.out
        assert server.request_count == before
        assert run.main(["--config", config]) in (0, 1)  # the gate may see the verdict change
        assert server.request_count == before  # correcting asks no LLM: every answer and verdict is cached
        first = latest_results(tmp_path)
        corrected = first.label_correction.of(column)
        assert corrected is not None and not corrected.weighted and corrected.sampled_cases >= 12
        assert any("non-random order" in note for note in first.label_correction.notes)
        planned = max(n for n in corrected.labels_needed.values() if n is not None)
        assert planned >= corrected.sampled_cases

        label_cases(session, "sample", min(CASES, planned))  # label as many as the plan asked for
        assert run.main(["--config", config]) in (0, 1)
        table = latest_results(tmp_path)
        printed = capsys.readouterr().out
        assert "Label correction (the judge's numbers corrected by a person's labels" in printed
        sampled = table.label_correction.of(column).sampled_cases
        assert f"label(s) used, on {sampled} of {CASES} cases" in printed
        html = (tmp_path / "out" / "latest" / "results.html").read_text()

        # the first case's labels become labels of an answer this run does not contain (an edited answer):
        # the sample ends there, and the terminal names the case and what to do; the page asks it next
        first = session.state("sample")["items"][0]["key"].split("|", 1)[0]
        lines = labels_file.read_text().splitlines()
        stale = [json.loads(line) for line in lines]
        for given in stale:
            if given["case_id"] == first:
                given["item"]["answer"] = f"an answer edited since {given['answer_sha']}"
                given["answer_sha"] = text_sha(given["item"]["answer"])
        labels_file.write_text("".join(json.dumps(given) + "\n" for given in stale))
        assert run.main(["--config", config]) in (0, 1)
        stale_run = capsys.readouterr().out
        assert (
            f"The sample ends at case {first}: its label is of an answer this run does not contain; label it "
            "again on the review page (it is asked next) to use the "
        ) in stale_run
        assert "every call failed, or nothing to score" not in stale_run
        from zenml.client import Client

        metadata = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name).run_metadata
        use = metadata["label_correction"][f"{column}_corrected"]
        assert use["sample_ended_at"] == first and use["labels_used"] == 0 and use["labelled_after_end"] > 0
        page = ReviewSession(items, LabelStore(labels_file), title="sample", seed=0).state("sample")
        assert page["items"][page["next"]]["key"].startswith(f"{first}|")
        labels_file.write_text("".join(line + "\n" for line in lines))  # the labels as they were
    names = {row["cell"]: row["label"] for row in table.rows}
    verdict = verdict_of(table, column)
    assert verdict.corrected and names[verdict.best] == "openai/reader-a"
    (judge_only,) = table.judge_only_verdicts
    assert names[judge_only.best] == "openai/reader-b"
    comparison = verdict.comparison_of(verdict.runner_up)
    assert comparison.test == "prediction_powered"
    assert (comparison.verdict == "tied") == (comparison.adjusted_low <= 0 <= comparison.adjusted_high)
    estimates = table.label_correction.of(column).estimates
    truth = {"openai/reader-a": len(RIGHT_A) / CASES, "openai/reader-b": len(RIGHT_B) / CASES}
    for cell, estimate in estimates.items():
        assert estimate.low <= truth[names[cell]] <= estimate.high  # the person's mean on every case
        assert estimate.effective_labels > estimate.labels  # the judge's verdicts are worth something
    row = next(row for row in table.rows if names[row["cell"]] == "openai/reader-b")
    assert row[f"{column}_corrected"] < row[column]  # corrected down from the flattering judge's mean
    assert "Label-corrected numbers" in html and "(label-corrected)" in html
    assert "label-corrected" in printed
