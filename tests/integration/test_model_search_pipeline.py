"""A model-based search through real ZenML (the dynamic pipeline) against the loopback fake OpenAI server:
12 cells (3 readers x 2 top_n x 2 prompts), one reader answers well, two badly. TPE tries at most 4 cells,
the pruner stops a bad reader's trial once the paired test allows, the good reader wins and is confirmed
on the held-out cases, the report shows every trial, and a rerun asks nothing again."""

import csv
import json

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

pytestmark = pytest.mark.slow  # a model-based search's trials as ZenML runs: about 90 s loaded

TOPICS = [f"topic{number:02d}" for number in range(24)]
GOOD = "A correct answer."
BAD = "A wrong answer."
WORSE = "Another wrong answer."  # not BAD's text: the LLM cache would serve its verdicts from BAD's
MAX_CELLS = 4


def reply(request: dict) -> str:
    if not request.get("response_format"):  # the reader
        return next(
            text
            for name, text in (("good", GOOD), ("bad", BAD), ("worse", WORSE))
            if name in request["model"]
        )
    answer = last_user_text(request).rsplit("<answer>", 1)[1]
    return json.dumps({"reasoning": "checked", "score": 5 if GOOD in answer else 1})


def write(tmp_path, server) -> None:
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
        "prompts: {plain: {system: Answer the question.}}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: [1, 2], prompt: [default, plain], "
        "reader: [openai/reader-good, openai/reader-bad, openai/reader-worse], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, judge_check: null, rubrics: [correctness]}}\n"
        # 24 cases: 18 searched in batches of 9, 6 held out; 2 random trials, then TPE
        f"search: {{strategy: tpe, metric: correctness_0to1, batch: 9, max_cells: {MAX_CELLS}, "
        "startup_trials: 2, holdout: 0.25, finalists: 2}\n",
    )


def rows_of(tmp_path) -> dict[str, dict]:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        return {row["cell"]: row for row in csv.DictReader(file)}


def test_a_model_based_search_prunes_the_bad_readers_confirms_the_good_one_and_a_rerun_asks_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=reply) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        # at most 6 trials x 18 search cases x (reader + judge), plus 2 finalists x 6 held-out cases x 2
        assert server.request_count <= MAX_CELLS * 18 * 2 + 2 * 6 * 2

        from zenml.client import Client

        pipeline_run = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name)
        search = pipeline_run.steps["record_trials"].outputs["model_search"][0].load()
        trials = {trial.cell: trial for trial in search.trials}
        assert 2 <= len(search.trials) <= MAX_CELLS == search.max_cells and search.grid_cells == 12
        good = {cell for cell in trials if "reader_good" in cell}
        assert search.winner in good
        # A bad trial after a good one completed: its first 9 cases, paired with the good one's, all differ by
        # -1 (p 2/2^9 = 0.0039, under alpha 0.05 over 2 planned batches): pruned after batch 1.
        first_good = min(trials[cell].number for cell in good)
        later_bad = [t for t in search.trials if t.cell not in good and t.number > first_good]
        assert later_bad and all(t.pruned and t.batches == 1 and t.cases == 9 for t in later_bad)
        assert all(not trials[cell].pruned and trials[cell].cases == 18 for cell in good)
        assert f"trial_values_t{trials[search.winner].number}_b2" in pipeline_run.steps

        confirmation = pipeline_run.steps["confirm_finalists"].outputs["confirmation"][0].load()
        assert confirmation.winner == search.winner and confirmation.confirmed[search.winner].n == 6
        assert confirmation.confirmed[search.winner].mean == 1.0

        rows = rows_of(tmp_path)
        number = trials[search.winner].number
        assert rows[search.winner]["search"] == (
            f"trial {number}: complete (n=18); winner, confirmed 1 on 6 held-out case(s)"
        )
        assert sum(row["search"] == "not tried" for row in rows.values()) == 12 - len(search.trials)
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert '<h2 id="search">Search: model-based</h2>' in html
        assert f"{len(search.trials)} of 12 cells tried" in html and "pruned after batch 1" in html

        before = server.request_count  # every trial's steps are cached: nothing asked again
        assert run.main(["--config", "config.yaml"]) == 0
        assert server.request_count == before
        again = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name)
        assert again.steps["record_trials"].outputs["model_search"][0].load() == search
