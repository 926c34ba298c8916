"""The person in the loop through real ZenML runs against the loopback fake OpenAI server: a run's answers
become review items, a person's labels are published as the `review_labels` artifact (by `run.py review`
itself, stopped with Ctrl-C), and a second run aligns its judge with them: the labels are few-shot examples
that never show the case being graded, the judge is named aligned, and its agreement before and after
(held out) is in the results, the report and the run's metadata."""

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import run
from ragbench.config.model import load_config
from ragbench.review.labels import LabelStore, load_labels_file
from ragbench.review.server import ReviewSession
from ragbench.runs import review
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

REPO = Path(__file__).resolve().parents[2]

GOOD = "The answer is in the documents [1]."
BAD = "I am not sure, maybe restart the computer."


class LenientJudge:
    """Gives every answer 5, unless a person's graded example of the same kind of answer is in the
    prompt: then it copies the person's score. Records any prompt that shows the graded case itself."""

    def __init__(self) -> None:
        self.leaks: list[str] = []
        self.aligned_calls = 0

    def __call__(self, request: dict) -> str:
        user = last_user_text(request)
        if not request.get("response_format"):
            return BAD if "bad" in request["model"] else GOOD
        graded_question = user.rsplit("Question:\n", 1)[1].split("\n", 1)[0]
        graded_answer = user.rsplit("<answer>", 1)[1].split("</answer>", 1)[0].strip()
        if "A person's grading" not in user:
            return json.dumps({"reasoning": "looks fine", "score": 5})
        self.aligned_calls += 1
        examples = user.split("Now the answer to grade.")[0]
        for block in examples.split("Example ")[1:]:
            question = block.split("Question:\n", 1)[1].split("\n", 1)[0]
            if question == graded_question:
                self.leaks.append(question)
            answer = block.split("<answer>", 1)[1].split("</answer>", 1)[0].strip()
            if answer == graded_answer:
                score = int(re.search(r'"score": (\d)', block).group(1))
                return json.dumps({"reasoning": "as the person graded it", "score": score})
        return json.dumps({"reasoning": "looks fine", "score": 5})


def write(tmp_path: Path, server: FakeOpenAIServer, alignment: str = "") -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
        "reader: [openai/reader-good, openai/reader-bad], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, judge_check: null, rubrics: [correctness]{alignment}}}\n",
    )


def label_through_the_cli(tmp_path: Path, labels_file: Path) -> str:
    """`run.py review` serves the newest run's answers; each is labelled as a person would (right 5,
    wrong 1) over HTTP; Ctrl-C publishes the labels. Returns what it printed."""
    command = ["review", "--config", "config.yaml", "--port", "0", "--labels", str(labels_file)]
    process = subprocess.Popen(
        [sys.executable, str(REPO / "run.py"), *command],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        printed = []
        for line in process.stdout:
            printed.append(line)
            if line.startswith("review page: "):
                break
        url = re.search(r"http://127\.0\.0\.1:\d+/", "".join(printed)).group(0)
        state = json.load(urllib.request.urlopen(url + "api/state?order=random", timeout=60))
        assert len(state["items"]) == 6 and all(item["label"] is None for item in state["items"])
        assert all("verdicts" not in item for item in state["items"])  # blinded until labelled
        for item in state["items"]:
            body = json.dumps({"key": item["key"], "value": 5 if item["answer"] == GOOD else 1}).encode()
            request = urllib.request.Request(
                url + "api/label", body, {"Content-Type": "application/json"}, method="POST"
            )
            revealed = json.load(urllib.request.urlopen(request, timeout=60))
            assert revealed["verdicts"] == {"openai/fake-judge": 5}
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, "".join(printed) + rest
    return "".join(printed) + rest


def test_labels_from_the_page_align_the_judge_in_the_next_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    judge = LenientJudge()
    with FakeOpenAIServer(responder=judge) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        labels_file = tmp_path / "labels.jsonl"
        printed = label_through_the_cli(tmp_path, labels_file)
        assert "labels published as the artifact review_labels:" in printed
        assert "weighted kappa 0.00" in printed  # the lenient judge said 5 to everything
        assert len(load_labels_file(labels_file).current()) == 6

        # the same answers keep their labels; a session on them finds every item labelled
        _, items = review.answer_items_of_run(None, None, load_config("config.yaml").name)
        session = ReviewSession(items, LabelStore(labels_file), title="again")
        assert all(item["label"] is not None for item in session.state("disagreement")["items"])

        write(tmp_path, server, alignment=", judge_alignment: {labels: review_labels, examples: 2}")
        capsys.readouterr()
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        # the judges' steps ran before, but an aligned judge asks anew: 3 calls per cell, none reused
        assert "2 cells: 2 new, 0 reused" in plan and "New LLM calls: 6" in plan
        assert "Judge alignment (review_labels)" in plan
        before = server.request_count
        # an aligned judge is another judge: the gate sees the wrong reader's correctness fall from 1 to 0
        # against the run graded by the lenient judge (as after any change of a rubric's prompt)
        assert run.main(["--config", "config.yaml"]) == 1
        # the aligned judge grades 6 answers; the alignment step asks the 6 labelled answers before
        # (cached from the first run) and after (the same prompts as the aligned judge's: cached)
        assert server.request_count - before == 6
        assert judge.aligned_calls == 6 and judge.leaks == []

    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        text = file.read()
    assert "openai/fake-judge aligned (2 examples)" in text
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "against your labels" in html and "held out" in html
    assert "correctness_0to1" in (tmp_path / "out" / "latest" / "gate.html").read_text()

    from zenml.client import Client

    metadata = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name).run_metadata
    (measured,) = metadata["judge_alignment"]
    assert measured["before"]["kappa"] == 0.0 and measured["before"]["labels"] == 6
    assert measured["after"]["kappa"] == 1.0 and measured["after"]["exact"] == 1.0
    assert measured["after"]["judge"] == "openai/fake-judge aligned (2 examples)"
