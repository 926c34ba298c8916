"""The Ragas family and the judge card in a real ZenML run against the fake OpenAI server, with the real
MiniLM embedding model: every metric in the table with its cases, each case's statements and verdicts in
the per-case records and the report, answer correctness blended from its F-score and similarity with Ragas's
weights, and the judge card in the report, the terminal and the run metadata."""

import csv
import json
import re

import pytest

import run
from ragbench.scoring.ragas_family import RAGAS_FAMILY
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

ANSWER = "A failing assert statement raises AssertionError [1]."


def schema_title(request: dict, titles) -> str | None:
    """Which reply schema the request asks for (named in response_format, or given in the system message
    where the provider takes a plain JSON object)."""
    named = request["response_format"].get("json_schema", {}).get("name")
    if named is None:
        system = request["messages"][0]["content"]
        named = json.loads(system.rsplit("JSON Schema:\n", 1)[1].splitlines()[0])["title"]
    return named if named in titles else None


def responder(request: dict) -> str:
    """A judge that finds one statement in every text, supported, useful and attributed; a correctness
    judge that passes the reference itself and fails anything else (a perfect judge card)."""
    if not request.get("response_format"):
        return ANSWER
    user = last_user_text(request)
    statement = {"statement": "A failing assert raises AssertionError.", "reason": "passage 1 says so"}
    replies = {
        "Statements": {"statements": [statement["statement"]]},
        "StatementVerdicts": {"statements": [statement | {"verdict": 1}]},
        "GeneratedQuestion": {"question": "Which exception does a failing assert raise?", "noncommittal": 0},
        "Usefulness": {"reason": "it states the answer", "verdict": 1},
        "Attributions": {"classifications": [statement | {"attributed": 1}]},
        "Classification": {"TP": [statement], "FP": [], "FN": []},
    }
    if (title := schema_title(request, replies)) is not None:
        return json.dumps(replies[title])
    reference = re.search(r"<reference_answer>\n?(.*?)\n?</reference_answer>", user, re.DOTALL)
    answer = user.rsplit("<answer>", 1)[1].split("</answer>")[0].strip()
    same = reference is not None and answer == reference.group(1).strip()
    return json.dumps({"reasoning": "compared", "score": 5 if same else 1})


def test_the_ragas_family_and_the_judge_card_run_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 2, "
            "reader: [openai/reader], judge: [openai/fake-judge]}\n"
            f"generation: {{reader: {llm}}}\n"
            f"evaluation: {{judge: {llm}, rubrics: [correctness], metrics: [{', '.join(RAGAS_FAMILY)}],\n"
            "  embedding_model: sentence-transformers/all-MiniLM-L6-v2, judge_check: {cases: 3}}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
    out = tmp_path / "out" / "latest"
    with (out / "results.csv").open() as file:
        (row,) = list(csv.DictReader(file))
    for name in ("faithfulness", "context_precision", "context_recall"):
        assert float(row[name]) == pytest.approx(1.0, abs=1e-6), name
        assert row[f"{name}_cases"] == "3" and row[f"{name}_low"] and row[f"{name}_high"]
    with (out / "case_values.csv").open() as file:
        values = {(r["metric"], r["case"]): float(r["value"]) for r in csv.DictReader(file)}
    # the question generated back from the answer is the first case's own: a cosine of 1 there only
    relevancy = {case["id"]: values[("answer_relevancy", case["id"])] for case in CASES}
    assert relevancy["assert"] == pytest.approx(1.0, abs=1e-5)
    assert all(value < 0.5 for case, value in relevancy.items() if case != "assert")  # unclipped, as Ragas
    for case in (case["id"] for case in CASES):
        similarity = values[("answer_similarity", case)]
        assert 0.0 < similarity < 1.0  # the real embedding model: answer and reference are not identical
        assert values[("answer_correctness", case)] == pytest.approx(0.75 * 1.0 + 0.25 * similarity, abs=1e-6)
    records = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    verdicts = records[0]["judgement"]["details"]["faithfulness"]
    assert "A failing assert raises AssertionError." in json.dumps(verdicts)
    html = (out / "results.html").read_text()
    assert "faithfulness: what it judged" not in html  # drawn by the page's script from the data block
    assert "passage 1 says so" in html and "Judge card: openai/fake-judge on correctness" in html
    printed = capsys.readouterr().out
    assert "Judge card" in printed and "UNRELIABLE" not in printed

    from zenml.client import Client

    metadata = Client().get_pipeline_run(out.resolve().name).run_metadata
    (card,) = metadata["judge_cards"]
    assert card["reliable"] is True and card["parse_failures"] == 0
