"""The full grid (index x rerank x reader, keyword tests, judge) as a real ZenML run on a small corpus.

The first test points reader and judge at the loopback fake OpenAI server, so every branch (a wrong
answer, an unparseable verdict) is deterministic; the second runs the real local GGUF models.
"""

import json
import re

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

DOCUMENTS = {
    "errors.md": "# Errors\nA failing assert statement raises AssertionError. Dividing by zero raises "
    "ZeroDivisionError.",
    "loops.md": "# Loops\nThe break statement ends the innermost loop at once. The continue statement "
    "skips to the next iteration.",
    "files.md": "# Files\nThe with statement closes a file automatically when the block ends.",
}
CASES = [
    {
        "id": "assert",
        "question": "Which exception does a failing assert raise?",
        "reference_answer": "AssertionError.",
        "expected_sources": ["errors.md"],
        "good_words": ["AssertionError"],
        "bad_words": ["ValueError"],
    },
    {
        "id": "break",
        "question": "How do I leave a loop early?",
        "reference_answer": "Use the break statement.",
        "expected_sources": ["loops.md"],
        "good_words": ["break"],
        "bad_first_words": ["Sorry"],
    },
    {
        "id": "with",
        "question": "What closes a file for me automatically?",
        "reference_answer": "The with statement.",
        "expected_sources": ["files.md"],
        "good_words": ["with"],
    },
]
READER_REPLIES = {
    "Which exception": "It raises ValueError [1].",  # wrong: caught by bad_words and good_words
    "How do I leave": "Use break [1].",
    "What closes": "The with statement [1].",
}


def write_e2e_project(tmp_path, extra_yaml: str) -> None:
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n" + extra_yaml,
    )


def fake_responder(request: dict) -> str:
    """Keyed on the first user message, so a re-ask gets the same verdict as the first ask."""
    text = next(message["content"] for message in request["messages"] if message["role"] == "user")
    if not request.get("response_format") and "faithfulness" not in json.dumps(request["messages"]):
        question = last_user_text(request).rsplit("Question:", 1)[1]
        return next(reply for prefix, reply in READER_REPLIES.items() if prefix in question)
    if "faithfulness" in json.dumps(request["messages"]):
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    if "ValueError" in text:
        return json.dumps({"reasoning": "contradicts the reference", "score": 1})
    if "break" in text:
        return json.dumps({"reasoning": "out of range on purpose", "score": 9})  # never valid
    return json.dumps({"reasoning": "matches", "score": 5})


def test_grid_with_fake_llms_counts_every_failure_and_traces_cases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=fake_responder) as server:
        llm = f"api_base: {server.base_url}, max_retries: 0, json_retries: 1"
        write_e2e_project(
            tmp_path,
            "grid: {chunk_size: [64], embedding_model: [sentence-transformers/all-MiniLM-L6-v2], top_k: 3, "
            "top_n: 2, reranker: [off, true], reader: [openai/fake-reader], judge: [openai/fake-judge]}\n"
            f"generation: {{reader: {{{llm}}}}}\n"
            f"evaluation: {{judge: {{{llm}}}, judge_check: null}}\n",  # calls counted: no card
        )
        assert run.main(["--config", "config.yaml"]) == 0
        requests_after_first_run = server.request_count
        assert run.main(["--config", "config.yaml", "--no-cache"]) == 0  # ZenML recomputes, LLM cache answers
        assert (
            server.request_count == requests_after_first_run + 2 * 2
        )  # only the never-valid verdicts retried

    import csv

    rows = {
        row["reranker"]: row for row in csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
    }
    assert set(rows) == {"off", "colbert-standin (UNTRAINED)"}
    off, on = rows["off"], rows["colbert-standin (UNTRAINED)"]
    assert on["label"] == "rerank colbert-standin (UNTRAINED)" and off["label"] == "rerank off"
    assert off["reader"] == "openai/fake-reader" and off["judge"] == "openai/fake-judge"
    assert off["e2e_cases"] == "3" and off["answers_produced"] == "3"
    assert float(off["fail_bad_answers"]) == 1.0  # the only case with bad words answered ValueError
    assert float(off["fail_good_answers"]) == pytest.approx(1 / 3)
    assert float(off["fail_bad_first_words"]) == 0.0
    assert off["judge_parse_failures"] == "1"  # the score-9 verdict, re-asked once, still invalid
    assert off["correctness_0to1_cases"] == "2"
    assert float(off["correctness_0to1"]) == pytest.approx((0 + 1) / 2)  # excluded, not zeroed
    assert float(off["faithfulness_1to5"]) == 5.0
    assert off["judge_json_reasks"] == "1" and off["judge_retries"] == "0" and off["reader_retries"] == "0"
    assert int(off["judge_prompt_tokens"]) > 0 and int(off["reader_prompt_tokens"]) > 0
    assert off["reader_cost_usd"] == off["judge_cost_usd"] == ""  # unpriced fake models: unknown cost

    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    assert len(records) == 6
    wrong = next(r for r in records if r["case_id"] == "assert" and r["reranker"] == "off")
    assert wrong["answer"] == "It raises ValueError [1]."
    assert {f["suite"] for f in wrong["keyword_failures"]} == {"bad_answers", "good_answers"}
    assert wrong["contexts"][0]["source"] == "errors.md"
    assert [c["retrieval_rank"] for c in wrong["contexts"]] == [1, 2]  # top_n 2, retrieval order
    for record in records:
        if record["reranker"] != "off":  # reranked: the reranker's score, the first-stage one kept
            assert all(c["retrieval_rank"] in (1, 2, 3) and c["retrieval_score"] for c in record["contexts"])
    assert wrong["judgement"]["scores"]["correctness"] == 1
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "UNTRAINED STAND-IN" in html
    assert "grading each answer as a whole" not in html  # the fake judge tells its criteria apart
    assert "Keyword test failures" in html and "It raises ValueError [1]." in html
    assert "contradicts the reference" in html  # the wrong answer's verdict, with the judge's reason
    assert "sk-test-DUMMY" not in html + json.dumps(records)


@pytest.mark.slow
def test_grid_with_the_real_local_reader_and_judge(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_e2e_project(
        tmp_path,
        "grid: {chunk_size: [64], embedding_model: [sentence-transformers/all-MiniLM-L6-v2], top_k: 3, "
        "top_n: 2, reader: [local/qwen2.5-coder-0.5b-instruct], judge: [local/qwen2.5-coder-1.5b-instruct]}\n"
        "generation: {sample_size: 2, reader: {max_tokens: 80}}\n"
        "evaluation: {judge: {max_tokens: 200}, rubrics: [correctness]}\n",
    )
    assert run.main(["--config", "config.yaml"]) == 0
    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    assert len(records) == 2
    for record in records:
        assert record["error"] is None and record["answer"].strip()
        assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
        judgement = record["judgement"]
        assert judgement["scores"].get("correctness") is not None or judgement["errors"].get("correctness")
        assert re.search(
            r"\w", judgement["reasoning"].get("correctness") or judgement["errors"]["correctness"]
        )
