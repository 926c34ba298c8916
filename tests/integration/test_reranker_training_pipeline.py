"""`run.py train-reranker` as real ZenML runs on a small project: the fake OpenAI server writes the
training questions (one of them an eval case's question, which must never reach training), a real ColBERT
model trains from the shipped MiniLM weights for a few steps, and a benchmark then reranks with
`trained:<name>` through the stored-encodings path, labelled with what it was trained on."""

import csv
import json

from zenml.client import Client

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

TOPICS = {
    "errors": "A failing assert statement raises AssertionError in the running program. Dividing a number "
    "by zero raises ZeroDivisionError at once. A missing key in a dictionary raises KeyError for the "
    "lookup. Every exception class derives from the BaseException class in the end.",
    "loops": "The break statement ends the innermost enclosing loop at once. The continue statement skips "
    "to the next iteration of the loop. An else clause of a loop runs when the loop ends without break. "
    "The range function yields the numbers a for loop counts through.",
    "files": "The with statement closes a file automatically when the block ends. Opening a file in text "
    "mode decodes its bytes with an encoding. The write method of a file returns the number of characters "
    "written. Reading a whole file at once returns a single string to the caller.",
    "functions": "A lambda expression makes a small anonymous function from one expression. Default "
    "argument values are evaluated once when the function is defined. Keyword arguments are matched to "
    "parameters by their names. A function without a return statement returns None to its caller.",
    "imports": "The import statement finds a module and binds it to a name in the namespace. A package is a "
    "module that can contain submodules in its folder. The from form imports names out of a module into "
    "the namespace. Imported modules are cached in the sys.modules dictionary of the interpreter.",
    "classes": "A class statement defines a new type with its own methods and attributes. Instances are "
    "created by calling the class like a function. The init method sets up each new instance of the "
    "class. Class attributes are shared by every instance unless an instance overrides them.",
}
DOCUMENTS = {f"{name}.md": f"# {name.title()}\n{text}" for name, text in TOPICS.items()}
LEAKED = "Which exception does a failing assert statement raise?"
CASES = [
    {
        "id": "assert",
        "question": LEAKED,
        "reference_answer": "AssertionError.",
        "expected_sources": ["errors.md"],
    },
    {
        "id": "break",
        "question": "How do I leave a loop early?",
        "reference_answer": "Use the break statement.",
        "expected_sources": ["loops.md"],
    },
]


def responder(request: dict) -> str:
    text = last_user_text(request)
    if "search box" in text:  # the training-question writer: the errors page gets the eval question back
        if "errors.md" in text or "Error" in text:
            return json.dumps({"question": LEAKED})
        topic = next((name for name in TOPICS if TOPICS[name][:40] in text), "python")
        return json.dumps({"question": f"What does the {topic} part of the language reference explain?"})
    return "The break statement [1]."  # the reader


def test_train_a_reranker_hold_out_the_eval_cases_and_benchmark_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        llm = f"api_base: {server.base_url}, max_retries: 0"
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            f"name: train-test\nllm_cache_dir: {tmp_path / 'llm-cache'}\nretrieval: {{metrics_k: 2}}\n"
            "grid: {chunk_size: [48], chunk_overlap: [0], embedding_model: [all-MiniLM-L6-v2], "
            "top_k: 4, top_n: 2, reranker: [off], reader: [openai/fake-reader], judge: []}\n"
            f"generation: {{reader: {{{llm}}}}}\n"
            "reranker_training: {name: docs, chunks: 6, min_chunk_chars: 0, validation_share: 0, "
            "epochs: 1, batch_size: 4, negatives: 1, validate_every: 2, doc_maxlen: 64, "
            f"generator: {{model: openai/fake-writer, {llm}}}}}\n",
        )
        assert run.main(["train-reranker", "--config", "config.yaml"]) == 0
        writer_calls = server.request_count
        assert writer_calls >= 5  # one question per sampled chunk

        client = Client()
        artifact = client.get_artifact_version("reranker-docs")
        trained = artifact.load()
        assert trained.held_out_cases == ["assert", "break"]
        # no validation split here (a few steps on six pages decide nothing): the last weights, said so
        assert trained.label.startswith("trained locally on ")
        assert trained.label.endswith(" from folder, never validated")
        assert trained.log["steps"] >= 1 and trained.log["kept"] == "last"
        run_view = client.get_pipeline_run(artifact.producer_pipeline_run_id)
        pairs = run_view.steps["mine_training_pairs"].outputs["training_pairs"][0].load()
        assert any(LEAKED in line for line in pairs.dropped_as_leaks)
        trained_questions = {example.question for example in pairs.training}
        assert not trained_questions & {case["question"] for case in CASES}
        assert {e.origin for e in pairs.training} == {"generator", "cloze"}
        spend = run_view.run_metadata["spend"]  # summed per role beside the plan (6 questions at most)
        assert spend["roles"]["question writer"]["calls"] == writer_calls and spend["planned"]["calls"] == 6

        # a second run makes no writer call (cached) and reuses every step
        assert run.main(["train-reranker", "--config", "config.yaml"]) == 0
        assert server.request_count == writer_calls

        assert run.main(["--config", "config.yaml", "--set", "grid.reranker=[off, trained:docs]"]) == 0
    rows = {
        row["reranker"]: row for row in csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
    }
    label = f"trained:docs@{artifact.version} ({trained.label})"
    assert set(rows) == {"off", label}
    report = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert (
        "not colbert-ir/colbertv2.0; 2 of this run&#x27;s 2 reranked case(s) were held out of training"
        in report
    )


def test_an_untrained_name_fails_before_the_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "grid: {reranker: [off, trained:nothing-yet], reader: [openai/fake-reader], judge: []}\n",
    )
    assert run.main(["--config", "config.yaml"]) == 2
    assert (
        "no trained reranker 'nothing-yet'; train it with `run.py train-reranker`" in capsys.readouterr().err
    )
