"""The query_rewrite axis in a real ZenML run: a follow-up whose last question alone cannot find its page
(`off`) is found once the conversation is condensed into a standalone query (`condense`); the rewrite is
one call through the one LLM client (the fake OpenAI-compatible server), what was searched is recorded per
case and shown in the report, and the retrieval metrics measure it."""

import csv
import json

import run
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import newest_run, no_retry_llm, serving_fake_openai, write_project

DOCUMENTS = {
    "dict.md": "# Dictionaries\nThe get method of a dictionary looks a key up; for a missing key it "
    "returns None, or the default given to it, and never raises KeyError.",
    "pass.md": "# The pass statement\npass is a null operation: when it is executed, nothing happens.",
    "lists.md": "# Lists\nappend adds an item at the end of a list; pop removes the last item.",
}
CASES = [
    {
        "id": "follow-up",
        "history": [
            {"role": "user", "content": "How do I look a key up in a dictionary without an exception?"},
            {"role": "assistant", "content": "Call the dictionary's get method with the key."},
        ],
        "question": "And what comes back then, if that is all I pass?",
        "reference_answer": "None.",
        "expected_sources": ["dict.md"],
    },
    {
        "id": "single",
        "question": "How do I add an item at the end of a list?",
        "reference_answer": "With append.",
        "expected_sources": ["lists.md"],
    },
]
CONDENSED = "What does the get method of a dictionary return for a missing key?"
REWRITE_SYSTEM = "You rewrite the latest question of a conversation into one standalone search query."


def responder(request: dict) -> str:
    if request["messages"][0]["content"].startswith(REWRITE_SYSTEM):
        return CONDENSED
    return "An answer [1]."


def test_condense_finds_the_follow_up_that_off_cannot(tmp_path, monkeypatch):
    with serving_fake_openai(tmp_path, monkeypatch, responder) as server:
        llm = no_retry_llm(server.base_url)
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: [64], retriever: [bm25], query_rewrite: [off, condense], top_k: [5], "
            "top_n: [1], reader: [openai/fake-reader], judge: []}\n"
            f"generation: {{reader: {llm}}}\n"
            f"retrieval: {{rewriter: {{model: openai/fake-rewriter, api_base: {server.base_url}, "
            "max_retries: 0}}\n"
            "evaluation: {keyword_tests: false}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
        rewrites = [r for r in server.requests if r["messages"][0]["content"].startswith(REWRITE_SYSTEM)]

    # one rewrite call, for the follow-up only (a single question is standalone), showing the conversation
    assert len(rewrites) == 1 and rewrites[0]["model"] == "fake-rewriter"
    assert "Call the dictionary's get method" in last_user_text(rewrites[0])
    rows = {
        row["query_rewrite"]: row
        for row in csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
    }
    assert set(rows) == {"off", "condense"}
    assert float(rows["off"]["hit_rate@5"]) == 0.5  # the follow-up's last question finds no page of dict.md
    assert float(rows["condense"]["hit_rate@5"]) == 1.0 and float(rows["condense"]["mrr"]) == 1.0
    assert rows["condense"]["rewrite_calls"] == "1" and rows["condense"]["rewrite_failures"] == "0"

    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    searched = {(record["cell"], record["case_id"]): record["searched"] for record in records}
    searches = [json.loads(line) for line in (tmp_path / "out" / "latest" / "searched.jsonl").open()]
    assert {(s["cell"], s["case_id"]) for s in searches} == set(searched)  # every cell that answers, too
    assert sorted(value for value in searched.values() if value) == [[CONDENSED]]
    assert all(record["history"] for record in records if record["case_id"] == "follow-up")
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert CONDENSED in html  # shown beside the answer
    # what condense changed, against off, on the follow-up and the single question apart
    assert "What query rewriting changed" in html
    gains = {(g["cases_group"], g["column"]): g for g in newest_run().run_metadata["rewrite_gains"]}
    assert gains[("follow-ups", "hit_rate@5")]["difference"] == 1.0
    assert gains[("single questions", "hit_rate@5")]["difference"] == 0.0
    assert gains[("follow-ups", "mrr")]["cases"] == gains[("single questions", "mrr")]["cases"] == 1

    steps = newest_run().steps
    retrieve_steps = sorted(name for name in steps if name.startswith("retrieve_"))
    assert len(retrieve_steps) == 2 and any("_qr_condense_" in name for name in retrieve_steps)
    result = (
        steps[next(n for n in retrieve_steps if "_qr_condense_" in n)].outputs["retrieval_result"][0].load()
    )
    (trace,) = [case for case in result.retrieval.cases if case.case_id == "follow-up"]
    assert trace.searched == [CONDENSED] and trace.first_relevant_rank == 1


def test_a_failed_rewrite_is_searched_as_asked_warned_about_and_asked_again(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as reader, FakeOpenAIServer(responder=responder) as rewriter:
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: [64], retriever: [bm25], query_rewrite: [condense], top_k: [5], top_n: [1], "
            "reader: [openai/fake-reader], judge: []}\n"
            f"generation: {{reader: {{api_base: {reader.base_url}, max_retries: 0}}}}\n"
            f"retrieval: {{rewriter: {{model: openai/fake-rewriter, api_base: {rewriter.base_url}, "
            "max_retries: 0}}\n"
            "evaluation: {keyword_tests: false}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        rewriter.all_fail = True
        run.main(["--config", "config.yaml"])
        out = capsys.readouterr().out
        assert "query rewrite condense by openai/fake-rewriter failed for 1 of 1 case(s)" in out
        assert "rewrite_condense" in {step for step in newest_run().steps}
        (row,) = csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
        assert row["rewrite_failures"] == "1" and float(row["hit_rate@5"]) == 0.5  # searched as asked

        rewriter.all_fail = False
        assert run.main(["--config", "config.yaml"]) == 0
        (row,) = csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open())
    assert row["rewrite_failures"] == "0" and float(row["hit_rate@5"]) == 1.0  # the step ran, and asked again
    assert "failed for" not in capsys.readouterr().out


def test_a_retrieval_only_run_records_what_each_cell_searched_per_case(tmp_path, monkeypatch):
    """No reader, so no answer records (`cases.jsonl` is empty): `searched.jsonl` holds, per cell and case,
    the question, the cell's rewrite mode and what it searched, and the sources it found with their ranks."""
    with serving_fake_openai(tmp_path, monkeypatch, responder) as server:
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: [64], retriever: [bm25], query_rewrite: [off, condense], top_k: [5], "
            "reader: [], judge: []}\n"
            f"retrieval: {{rewriter: {{model: openai/fake-rewriter, api_base: {server.base_url}, "
            "max_retries: 0}}\n"
            "evaluation: {keyword_tests: false}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
        assert [r["model"] for r in server.requests] == ["fake-rewriter"]  # the follow-up's condense only

    folder = tmp_path / "out" / "latest"
    assert not (folder / "cases.jsonl").read_text()  # retrieval only: no answers
    rows = {row["query_rewrite"]: row["cell"] for row in csv.DictReader((folder / "results.csv").open())}
    searches = [json.loads(line) for line in (folder / "searched.jsonl").open()]
    by = {(s["cell"], s["case_id"]): s for s in searches}
    assert len(searches) == len(by) == 4  # one record per (cell, case)
    assert set(by) == {(cell, case["id"]) for cell in rows.values() for case in CASES}

    condensed = by[(rows["condense"], "follow-up")]
    assert condensed["query_rewrite"] == "condense" and condensed["question"] == CASES[0]["question"]
    assert condensed["searched"] == [CONDENSED] and condensed["rewritten"] is True
    assert condensed["retrieved_sources"][0] == "dict.md" and condensed["first_relevant_rank"] == 1
    as_asked = by[(rows["off"], "follow-up")]
    assert as_asked["query_rewrite"] == "off" and as_asked["searched"] == [CASES[0]["question"]]
    assert not as_asked["rewritten"] and "dict.md" not in as_asked["retrieved_sources"]
    single = by[(rows["condense"], "single")]  # standalone already: searched as asked, no call
    assert single["searched"] == [CASES[1]["question"]] and single["rewritten"] is False
    assert single["retrieved_sources"][0] == "lists.md" and single["rewrite_error"] is None
    # written from the results step's artifact, as every file of the folder
    step = newest_run().steps["build_results_table"]
    assert step.outputs["searched"][0].load().jsonl() == (folder / "searched.jsonl").read_text()
