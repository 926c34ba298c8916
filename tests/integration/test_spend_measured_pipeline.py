"""Spend as measured in real ZenML runs, reader and judge on the loopback fake OpenAI server (which counts
every request it gets and fails the ones it is told to).

One cell answers 4 cases and a judge grades them on one rubric: 8 first attempts. The server fails the first
2 requests of each run (the reader retries them). The first run has no history: it plans 8 calls and
spends 10, 2 of them retries, which its metadata and summary say per role. The second run (new reader
and judge names, so new steps and new LLM-cache keys on the same prompts) plans with the first run's
retry rate (25%) and token share: its dry run's expected calls and tokens agree with what it then spends
within 15%.
"""

import contextlib
import io
import json
import re

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import newest_run, write_project

DOCUMENTS = {f"{topic}.md": f"# {topic}\nThe {topic} statement is a Python keyword." for topic in "abcd"}
CASES = [
    {
        "id": f"case-{topic}",
        "question": f"What is {topic}?",
        "reference_answer": f"{topic} is a keyword.",
        "expected_sources": [f"{topic}.md"],
    }
    for topic in "abcd"
]


def responder(request: dict) -> str:
    if not request.get("response_format"):  # the reader
        return "It is a Python keyword [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


def printed(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run.main(["--config", "config.yaml", *arguments])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        base = server.base_url
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, "
            f"top_n: 1, reader: [{{model: openai/reader, api_base: {base}}}], "
            f"judge: [{{model: openai/judge, api_base: {base}}}]}}\n"
            "generation: {sample_size: 4, reader: {max_retries: 3, concurrency: 1}}\n"
            "evaluation: {judge: {max_retries: 0, concurrency: 1}, rubrics: [correctness], "
            "judge_check: null, keyword_tests: false}\n"
            "retrieval: {metrics_k: 1}\nregression: {baseline: none}\n"
            "llm_cache_dir: llm-cache\n",
        )
        yield server


def within(expected: int, spent: int, tolerance: float = 0.15) -> bool:
    return abs(expected - spent) <= tolerance * spent


def test_the_dry_run_expects_the_retries_and_tokens_the_run_then_spends(project):
    project.inject("server_error", "server_error")
    code, out, err = printed()
    assert code == 0, out + err
    assert project.request_count == 10  # 8 first attempts and the 2 retries
    first = newest_run().run_metadata["spend"]
    assert first["planned"]["calls"] == 8 and first["planned"]["retry_rate"] == 0.0
    assert (first["total"]["calls"], first["total"]["retries"]) == (10, 2)
    assert (first["roles"]["reader"]["calls"], first["roles"]["reader"]["retries"]) == (6, 2)
    assert first["roles"]["judge"]["calls"] == 4
    assert first["total"]["tokens"] > 0 and first["total"]["seconds"] > 0
    assert "Planned: 8 calls" in out and "Spent on it: 10 calls (2 retries)" in out  # the summary's notes

    # new names: new steps, and new LLM-cache keys (the judge reads the same answers) on the same prompts
    renamed = [
        f"--set=grid.{role}=[{{model: openai/{role}2, api_base: {project.base_url}}}]"
        for role in ("reader", "judge")
    ]
    code, out, _ = printed("--dry-run", *renamed)
    assert code == 0 and "Retries: 25.0% of calls expected (the retry rate of run" in out
    expected = re.search(r"Expected: (\d+) calls, up to (\d+) tokens, about (\d+) expected", out)
    assert expected is not None, out
    calls, _, tokens = map(int, expected.groups())
    assert calls == 10  # 8 first attempts x 1.25

    project.inject("server_error", "server_error")
    code, out, err = printed(*renamed)
    assert code == 0, out + err
    assert project.request_count == 10 + 10
    second = newest_run().run_metadata["spend"]
    assert second["planned"]["calls"] == calls and second["planned"]["expected_tokens"] == tokens
    spent = second["total"]
    assert spent["retries"] == 2  # the injected retries: expected by the plan, counted by the run
    assert within(calls, spent["calls"]) and within(tokens, spent["tokens"])
