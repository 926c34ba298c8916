"""A staged search through real ZenML (the dynamic pipeline) against the loopback fake OpenAI server: each
page is named by a made-up token (`zq03x`) that its question spells apart (`ZQ-03-X`), so BM25 shares no
term with it and finds none of the pages while the dense retriever finds most; the retrieve stage drops the
BM25 keys and keeps both dense chunk sizes (tied); the race among the dense cells stops the bad reader;
the best finalists answer the held-out cases, which confirm the winner. The decisions are artifacts, the
report has its Search section, the results rows say where each cell was left, and a re-run asks nothing."""

import csv
import json

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

pytestmark = pytest.mark.slow  # a staged search's four stages as ZenML runs: about 100 s loaded

TOPICS = [f"zq{number:02d}x" for number in range(20)]
GOOD = "A correct answer."
BAD = "A wrong answer."


def reply(request: dict) -> str:
    if not request.get("response_format"):  # the reader
        return next(
            text for name, text in (("reader-good", GOOD), ("reader-bad", BAD)) if name in request["model"]
        )
    answer = last_user_text(request).rsplit("<answer>", 1)[1]
    return json.dumps({"reasoning": "checked", "score": 5 if "correct" in answer else 1})


def write(tmp_path, server) -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        {f"{topic}.md": f"# {topic}\nThe {topic} page." for topic in TOPICS},
        [
            {
                "id": topic,
                "question": f"What is {topic[:2].upper()}-{topic[2:4]}-{topic[4:].upper()}?",
                "reference_answer": GOOD,
                "expected_sources": [f"{topic}.md"],
            }
            for topic in TOPICS
        ],
        f"llm_cache_dir: {tmp_path / 'llm-cache'}\nretrieval: {{metrics_k: 1}}\n"
        "grid: {chunk_size: [32, 64], retriever: [bm25, dense], "
        "embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 3, top_n: 1, "
        "reader: [openai/reader-good, openai/reader-bad], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n"
        f"evaluation: {{judge: {llm}, judge_check: null, rubrics: [correctness]}}\n"
        "search: {strategy: staged, metric: correctness_0to1, batch: 7, holdout: 0.3, finalists: 2}\n",
    )


def rows_of(tmp_path) -> list[dict]:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        return list(csv.DictReader(file))


def test_a_staged_search_drops_keys_races_the_rest_and_confirms_on_held_out_cases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=reply) as server:
        write(tmp_path, server)
        assert run.main(["--config", "config.yaml"]) == 0
        from zenml.client import Client

        pipeline_run = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name)
        split = pipeline_run.steps["split_cases"].outputs["case_split"][0].load()
        assert (len(split.search), len(split.held_out)) == (14, 6)  # 20 cases, 0.3 held out
        retrieve = pipeline_run.steps["stage_retrieve"].outputs["stage_decision"][0].load()
        assert retrieve.n_cases == 14 and len(retrieve.means) == 4
        assert sorted(retrieve.kept) == sorted(k for k in retrieve.means if "bm25" not in k)  # both sizes
        assert {d.key for d in retrieve.dropped} == {k for k in retrieve.means if "bm25" in k}
        assert "stage_rerank" not in pipeline_run.steps  # no reranker in the grid: nothing more to decide
        # the race: 4 dense cells on the 14 search cases in rounds of 7 (2 planned looks, alpha 0.05 / 2
        # each, Holm over 3): round 1's p 2/2^7 = 0.016 stops nothing, round 2's 2/2^14 the bad reader's 2
        trace = pipeline_run.steps["race_look_r2"].outputs["race_trace"][0].load()
        assert len(trace.cells) == 4 and trace.order == split.search and trace.stop == "cases_exhausted"
        stopped = [cell for cell, outcome in trace.cells.items() if outcome.status == "eliminated"]
        assert len(stopped) == 2 and all("reader_bad" in cell for cell in stopped)
        confirmation = pipeline_run.steps["confirm_finalists"].outputs["confirmation"][0].load()
        assert len(confirmation.finalists) == 2 and confirmation.winner == confirmation.finalists[0]
        winner = confirmation.confirmed[confirmation.winner]
        assert winner.n == 6 and winner.mean == 1.0 and confirmation.flattery == 0.0
        assert "reader_bad" not in confirmation.winner

        table = pipeline_run.steps["build_results_table"].outputs["results"][0].load()
        verdict = next(v for v in table.verdicts if v.column == "correctness_0to1")
        # the headline verdict on the search's metric: the finalists on the held-out cases, the winner best
        assert verdict.best == confirmation.winner
        assert {c.candidate for c in verdict.comparisons} <= set(confirmation.finalists)
        assert all(c.n == 6 for c in verdict.comparisons)

        rows = {row["cell"]: row for row in rows_of(tmp_path)}
        assert len(rows) == 8
        bm25 = [row for row in rows.values() if row["retriever"] == "bm25"]
        assert all(row["search"].startswith("dropped at the retrieve stage: hit_rate@1") for row in bm25)
        assert all(not row.get("e2e_cases") for row in bm25)  # never answered
        assert rows[confirmation.winner]["search"].endswith("winner, confirmed 1 on 6 held-out case(s)")
        assert rows[confirmation.winner]["e2e_cases"] == "20"  # the search's 14 and the held-out 6
        assert all(rows[cell]["search"].startswith("eliminated in round 2 (n=14)") for cell in stopped)
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert '<h2 id="search">Search</h2>' in html and "Search estimate against the held-out cases" in html
        assert "retrieve stage on hit_rate@1 over 14 case(s): kept 2 of 4" in html
        assert "confirmed on 6 held-out case(s)" in html and '<h2 id="race">The race</h2>' in html

        before = server.request_count  # every step is cached: nothing asked again
        assert run.main(["--config", "config.yaml"]) == 0
        assert server.request_count == before
        assert {row["cell"]: row["search"] for row in rows_of(tmp_path)} == {
            cell: row["search"] for cell, row in rows.items()
        }
