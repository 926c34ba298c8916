"""A raced run through real ZenML (the dynamic pipeline) against the loopback fake OpenAI server: one
reader answers well, two badly; the race stops the bad ones as soon as the paired test allows, the report
and the table show the trace, and a re-run asks nothing again."""

import csv
import json

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

TOPICS = [f"topic{number:02d}" for number in range(24)]
GOOD = "A correct answer."
BAD = "A wrong answer."
WORSE = "Another wrong answer."  # not BAD's text: the LLM cache would serve its verdicts from BAD's


def reply(request: dict) -> str:
    if not request.get("response_format"):  # the reader
        return next(
            text
            for name, text in (("good", GOOD), ("bad", BAD), ("worse", WORSE))
            if name in request["model"]
        )
    answer = last_user_text(request).rsplit("<answer>", 1)[1]
    return json.dumps({"reasoning": "checked", "score": 5 if GOOD in answer else 1})


def write(tmp_path, server, extra: str = "") -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        {f"{topic}.md": f"# {topic}\nThe {topic} page." for topic in TOPICS},
        [
            {
                "id": topic,
                "question": f"What is {topic}?",
                "reference_answer": GOOD,
                "expected_sources": [f"{topic}.md"],
            }
            for topic in TOPICS
        ],
        f"llm_cache_dir: {tmp_path / 'llm-cache'}\nretrieval: {{metrics_k: 1}}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
        "reader: [openai/reader-good, openai/reader-bad, openai/reader-worse], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, judge_check: null, rubrics: [correctness]}}\n"
        "search: {strategy: race, metric: correctness_0to1, batch: 6}\n" + extra,
    )


def rows_of(tmp_path) -> dict[str, dict]:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        return {row["reader"]: row for row in csv.DictReader(file)}


def test_a_race_stops_the_losing_readers_and_a_rerun_asks_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=reply) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        # 24 cases in batches of 6: 4 planned looks, alpha 0.05 / 4 per look, Holm over 2 comparisons.
        # Round 1 (6 paired cases, every difference -1): the exact permutation p 2/2^6 = 0.031 is above
        # 0.0063; round 2 (12 cases): p 2/2^12 = 0.00049 stops both. 3 readers x 12 answers + 12
        # verdicts each = 72 calls, not 144.
        assert server.request_count == 72
        rows = rows_of(tmp_path)
        good, bad = rows["openai/reader-good"], rows["openai/reader-bad"]
        assert good["race"] == "winner (n=12)" and good["e2e_cases"] == "12"
        assert bad["race"].startswith("eliminated in round 2 (n=12): -1 against") and bad["e2e_cases"] == "12"
        assert float(good["correctness_0to1"]) == 1.0 and float(bad["correctness_0to1"]) == 0.0
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert '<h2 id="race">The race</h2>' in html and "50% of a full evaluation" in html

        from zenml.client import Client

        pipeline_run = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name)
        trace = pipeline_run.steps["race_look_r2"].outputs["race_trace"][0].load()
        assert trace.stop == "decided" and trace.calls_used == 72 and trace.calls_full == 144
        assert [len(look.eliminated) for look in trace.looks] == [0, 2]
        assert "race_look_r3" not in pipeline_run.steps

        before = server.request_count  # every round's steps are cached: nothing asked again
        assert run.main(["--config", "config.yaml"]) == 0
        assert server.request_count == before
        assert rows_of(tmp_path)["openai/reader-bad"]["race"] == bad["race"]
