"""Spend as measured in real ZenML runs on the loopback fake OpenAI server (which counts every request it
gets and fails the ones it is told to): the default benchmark, a race and a testset run, each run twice, the
server failing the first 2 requests of each run. The second run (new model names, so new steps and new
LLM-cache keys on the same prompts) plans from the first: its dry run's expected calls and tokens agree with
what it then spends within 15%, its retries included.

The benchmark: one cell answers 4 cases and a judge grades them on one rubric, 8 first attempts. The first
run has no history: it plans 8 calls and spends 10, 2 of them retries, which its metadata and summary say
per role. The second run plans with the first run's retry rate (25%) and shares of its plan.
"""

import json
import re
from pathlib import Path

import pytest

from ragbench.runs.names import TESTSET_PIPELINE
from tests.fake_openai_server import last_user_text
from tests.projects import (
    TESTSET_PAGES,
    newest_run,
    printed,
    right_keyword_reply,
    serving_fake_openai,
    write_knowledge_base,
    write_one_cell_project,
    write_project,
    write_testset_config,
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    with serving_fake_openai(tmp_path, monkeypatch, right_keyword_reply) as server:
        write_one_cell_project(tmp_path, server.base_url)
        yield server


def within(expected: int, spent: int, tolerance: float = 0.15) -> bool:
    return abs(expected - spent) <= tolerance * spent


def expected_calls_and_tokens(dry_run: str) -> tuple[int, int]:
    """The calls and tokens a dry run expects from the config's previous run (not the bounds)."""
    expected = re.search(
        r"Expected: \d+ calls \(about (\d+) expected\), up to \d+ tokens \(about (\d+) expected\)", dry_run
    )
    assert expected is not None, dry_run
    calls, tokens = map(int, expected.groups())
    return calls, tokens


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
    # the same config again reuses every step; with --no-cache it recomputes them, and plans them all
    assert "1 new, 0 reused" not in printed("--dry-run")[1]
    assert "1 cells: 1 new, 0 reused" in printed("--dry-run", "--no-cache")[1]

    # new names: new steps, and new LLM-cache keys (the judge reads the same answers) on the same prompts
    renamed = [
        f"--set=grid.{role}=[{{model: openai/{role}2, api_base: {project.base_url}}}]"
        for role in ("reader", "judge")
    ]
    code, out, _ = printed("--dry-run", *renamed)
    assert code == 0 and "Retries: 25.0% of calls expected (the retry rate of run" in out
    calls, tokens = expected_calls_and_tokens(out)
    assert calls == 10  # 8 first attempts, all sent by the first run, x 1.25

    project.inject("server_error", "server_error")
    code, out, err = printed(*renamed)
    assert code == 0, out + err
    assert project.request_count == 10 + 10
    second = newest_run().run_metadata["spend"]
    assert second["planned"]["expected_calls"] == calls and second["planned"]["expected_tokens"] == tokens
    spent = second["total"]
    assert spent["retries"] == 2  # the injected retries: expected by the plan, counted by the run
    assert within(calls, spent["calls"]) and within(tokens, spent["tokens"])


# The race: a good reader and a bad one on 18 cases in rounds of 6. The first round's paired test cannot
# stop the bad one yet; the second does, so the race sends 2 of the 3 rounds the plan counts.
TOPICS = [f"topic{number:02d}" for number in range(18)]
GOOD, BAD = "A correct answer.", "A wrong answer."


def race_reply(request: dict) -> str:
    if not request.get("response_format"):  # the reader
        return GOOD if "good" in request["model"] else BAD
    answer = last_user_text(request).rsplit("<answer>", 1)[1]
    return json.dumps({"reasoning": "checked", "score": 5 if GOOD in answer else 1})


@pytest.fixture
def race_project(tmp_path, monkeypatch):
    with serving_fake_openai(tmp_path, monkeypatch, race_reply) as server:
        llm = f"{{api_base: {server.base_url}, max_retries: 3, json_retries: 0, concurrency: 1}}"
        write_project(
            tmp_path,
            {f"{topic}.md": f"# {topic}\nThe {topic} page." for topic in TOPICS},
            [
                {
                    "id": t,
                    "question": f"What is {t}?",
                    "reference_answer": GOOD,
                    "expected_sources": [f"{t}.md"],
                }
                for t in TOPICS
            ],
            "llm_cache_dir: llm-cache\nretrieval: {metrics_k: 1}\nregression: {baseline: none}\n"
            "grid: {chunk_size: [64], retriever: [bm25], top_k: 2, top_n: 1, "
            "reader: [openai/reader-good, openai/reader-bad], judge: [openai/judge]}\n"
            f"generation: {{reader: {llm}}}\n"
            f"evaluation: {{judge: {llm}, judge_check: null, rubrics: [correctness], keyword_tests: false}}\n"
            "search: {strategy: race, metric: correctness_0to1, batch: 6}\n",
        )
        yield server


def test_a_race_plans_the_share_of_its_calls_the_previous_race_sent(race_project):
    race_project.inject("server_error", "server_error")
    code, out, err = printed(command=("race",))
    assert code == 0, out + err
    assert race_project.request_count == 50  # 2 rounds x 6 cases x 2 readers x (answer + verdict), 2 retries
    first = newest_run().run_metadata["spend"]
    assert first["planned"]["calls"] == 72  # every cell answering every case: the bound
    assert (first["total"]["calls"], first["total"]["retries"]) == (50, 2)
    assert first["roles"]["reader"]["calls"] + first["roles"]["judge"]["calls"] == 50
    assert "Planned: 72 calls" in out and "Spent on it: 50 calls (2 retries)" in out

    renamed = [
        "--set=grid.reader=[openai/reader-good2, openai/reader-bad2]",
        "--set=grid.judge=[openai/judge2]",
    ]
    code, out, _ = printed("--dry-run", *renamed, command=("race",))
    assert code == 0 and "Retries: 4.2% of calls expected" in out  # 2 of 48 first attempts
    assert "its calls at 67% of its first attempts" in out  # 48 of 72
    calls, tokens = expected_calls_and_tokens(out)
    assert calls == 50  # 72 x 48/72 x (1 + 2/48)

    race_project.inject("server_error", "server_error")
    code, out, err = printed(*renamed, command=("race",))
    assert code == 0, out + err
    second = newest_run().run_metadata["spend"]
    assert second["planned"]["expected_calls"] == calls and second["planned"]["expected_tokens"] == tokens
    spent = second["total"]
    assert spent["retries"] == 2
    assert within(calls, spent["calls"]) and within(tokens, spent["tokens"])


# The testset: 3 chunks (one question each, one of them unanswerable), both filters; every call may be
# retried, so the 2 injected failures are 2 retries whichever calls meet them.
TESTSET_TOPICS = ("assert", "break", "with statement")


def eval_set_reply(request: dict) -> str:
    """Generator: a question on the passage's topic; critics: 5; reader: the topic's answer, a refusal for
    the unanswerable question."""
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    topic = next((t for t in TESTSET_TOPICS if t in user), "break")
    if system.startswith("You write test questions"):
        if "does NOT answer" in user:
            return json.dumps({"question": f"How fast is the {topic} statement on a large input?"})
        return json.dumps({"question": f"What does the {topic} statement do?", "answer": f"{topic} works."})
    if system.startswith("You check test questions"):
        return json.dumps({"reasoning": "scripted", "rating": 5})
    question = user.rsplit("Question:", 1)[-1]
    asked = next((t for t in TESTSET_TOPICS if t in question), "break")
    return (
        "The context does not say."
        if "How fast" in question
        else f"The {asked} statement: {asked} works [1]."
    )


@pytest.fixture
def testset_project(tmp_path, monkeypatch):
    write_knowledge_base(tmp_path, TESTSET_PAGES)
    with serving_fake_openai(tmp_path, monkeypatch, eval_set_reply) as server:
        write_testset_config(
            tmp_path,
            server.base_url,
            name=f"spent-{tmp_path.name}".lower(),
            testset="unanswerable_share: 0.34, evolutions: {simple: 1.0}, filters: [critics, roundtrip]",
            llm="max_retries: 3, concurrency: 1",
        )
        yield server


def newest_testset_spend() -> dict:
    from zenml.client import Client

    return Client().get_pipeline(TESTSET_PIPELINE).last_run.run_metadata["spend"]


def test_a_testset_run_plans_from_what_the_previous_one_spent(testset_project):
    testset_project.inject("server_error", "server_error")
    code, out, err = printed(command=("testset",))
    assert code == 0, out + err
    first = newest_testset_spend()
    sent = testset_project.request_count
    assert (first["total"]["calls"], first["total"]["retries"]) == (sent, 2)
    assert set(first["roles"]) == {"generator", "critics", "roundtrip"}
    planned = first["planned"]["calls"]
    assert first["planned"]["retry_rate"] == 0.0 and sent - 2 < planned  # the bound: every check asked
    assert f"Planned: {planned} calls" in out and f"Spent on it: {sent} calls (2 retries)" in out
    (summary,) = Path("out/testsets").glob("*/summary.json")  # the exported files say it too
    assert json.loads(summary.read_text())["spend"]["total"] == first["total"]

    renamed = ["--set=testset.generator=openai/generator2", "--set=testset.critic=openai/critic2"]
    code, out, _ = printed("--dry-run", *renamed, command=("testset",))
    assert code == 0 and f"Retries: {2 / (sent - 2):.1%} of calls expected" in out
    calls, tokens = expected_calls_and_tokens(out)

    testset_project.inject("server_error", "server_error")
    code, out, err = printed(*renamed, command=("testset",))
    assert code == 0, out + err
    assert testset_project.request_count == 2 * sent  # the same calls under new names
    second = newest_testset_spend()
    assert second["planned"]["expected_calls"] == calls and second["planned"]["expected_tokens"] == tokens
    spent = second["total"]
    assert spent["retries"] == 2
    assert within(calls, spent["calls"]) and within(tokens, spent["tokens"])
