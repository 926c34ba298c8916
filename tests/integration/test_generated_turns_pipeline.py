"""Generated assistant turns in a real ZenML run with the fake OpenAI-compatible server: each cell's reader
writes the earlier answer from the passages the cell found for the user's first message, that answer is in
the prompt of the same reader's call for the follow-up, and the case records keep the conversation as the
reader saw it, marked generated; the dry run counts the extra reader calls. Requests are matched by model
and content, never by their order."""

import csv
import json
import re

import run
from tests.fake_openai_server import last_user_text
from tests.fake_rag_service import FakeRagService
from tests.projects import no_retry_llm, only_http_system, serving_fake_openai, write_project

DOCUMENTS = {
    "dict.md": "# Dictionaries\nThe get method of a dictionary looks a key up; for a missing key it "
    "returns None, or the default given to it, and never raises KeyError.",
    "lists.md": "# Lists\nappend adds an item at the end of a list; pop removes the last item.",
}
FIRST = "How do I look a key up in a dictionary without an exception?"
CASES = [
    {
        "id": "follow-up",
        "history": [{"role": "user", "content": FIRST}, {"role": "assistant", "generate": True}],
        "question": "And what comes back then, if that is all I pass?",
        "reference_answer": "None.",
        "expected_sources": ["dict.md"],
    },
    {  # the same conversation with the earlier answer given: scored apart from the generated one
        "id": "given-twin",
        "history": [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "Call get."}],
        "question": "And what comes back then, if that is all I pass?",
        "reference_answer": "None.",
        "expected_sources": ["dict.md"],
    },
    {
        "id": "single",
        "question": "How do I add an item at the end of a list?",
        "expected_sources": ["lists.md"],
    },
]
READERS = ("fake-a", "fake-b")


def responder(request: dict) -> str:
    """Each reader answers in its own words, so a cell's follow-up shows whose earlier answer it read; the
    judge's verdicts (structured replies) are fixed."""
    if request.get("response_format"):
        if "faithfulness" in request["messages"][0]["content"]:
            scores = {"faithfulness": 4, "relevance": 4, "helpfulness": 4, "toxicity": 1}
            return json.dumps({"reasoning": "ok", **scores})
        return json.dumps({"reasoning": "ok", "score": 5})
    if FIRST in last_user_text(request):
        return f"{request['model']} says: call get [1]."
    return f"{request['model']} answers the question [1]."


def test_each_cells_reader_writes_the_turn_its_follow_up_reads(tmp_path, monkeypatch, capsys):
    with serving_fake_openai(tmp_path, monkeypatch, responder) as server:
        llm = no_retry_llm(server.base_url)
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: [64], retriever: [bm25], top_k: [5], top_n: [1], "
            f"reader: [openai/{READERS[0]}, openai/{READERS[1]}], judge: [openai/fake-judge]}}\n"
            f"generation: {{reader: {llm}}}\n"
            f"evaluation: {{keyword_tests: false, judge: {llm}, judge_check: null}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert server.requests == []  # the dry run calls nothing
        assert run.main(["--config", "config.yaml"]) == 0
        requests = [r for r in server.requests if not r.get("response_format")]  # the readers'
        verdicts = [last_user_text(r) for r in server.requests if r.get("response_format")]

    # the plan: per cell, one reader call per case and one for the generated turn, and 5 judge calls
    # (correctness of the two cases with a reference, the quality rubric of all three)
    assert "generated_turn_calls" in plan  # a column of the plan's table
    assert all(re.search(rf"openai/{model}\s+new\s+1\s+5\s+9\s", plan) for model in READERS), plan
    assert "New LLM calls: 18" in plan

    assert len(requests) == 8  # the readers' calls, as planned
    for model in READERS:
        mine = [r for r in requests if r["model"] == model]
        (turn,) = [r for r in mine if FIRST in last_user_text(r)]
        assert "dict.md" in last_user_text(turn)  # the cell's own passages for the first message
        assert [m["role"] for m in turn["messages"]] == ["system", "user"]
        follow_ups = [r for r in mine if CASES[0]["question"] in last_user_text(r)]
        assert all(
            [m["role"] for m in r["messages"]] == ["system", "user", "assistant", "user"] for r in follow_ups
        )
        # the generated case reads this cell's answer, its given twin the case's
        earlier = sorted(r["messages"][2]["content"] for r in follow_ups)
        assert earlier == ["Call get.", f"{model} says: call get [1]."]
        # a rubric that reads the question sees the conversation this cell's reader saw
        judged = [v for v in verdicts if f"{model} answers the question" in v and "<conversation>" in v]
        after_own = [v for v in judged if "Assistant: Call get." not in v]  # not the given twin's
        assert after_own and len(after_own) < len(judged)
        assert all(f"{model} says: call get [1]." in v for v in after_own)

    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    follow_ups = {r["cell"]: r for r in records if r["case_id"] == "follow-up"}
    assert len(follow_ups) == 2
    written = sorted(record["history"][1]["content"] for record in follow_ups.values())
    assert written == [f"{model} says: call get [1]." for model in READERS]
    assert all(record["history"][1]["generate"] is True for record in follow_ups.values())
    assert all("generate" not in turn for r in records for turn in r["history"] if turn["role"] == "user")
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "fake-a says: call get [1]." in html and "fake-b says: call get [1]." in html

    # the two modes reported apart: per cell, its follow-up after the given turn and after its own turn
    assert '<h2 id="turn-modes">Scores by turn mode</h2>' in html
    modes = list(csv.DictReader((tmp_path / "out" / "latest" / "turn_modes.csv").open()))
    assert sorted(row["turns"] for row in modes) == sorted(
        2 * ["single question", "given turns", "generated turns"]
    )
    for row in modes:  # correctness is scored on the two follow-ups (the cases with a reference), each alone
        assert row["correctness_0to1_cases"] == ("" if row["turns"] == "single question" else "1")


def test_an_external_system_writes_the_turn_by_being_asked_first(tmp_path, monkeypatch, capsys):
    """An HTTP system is asked the user's first message alone, then the follow-up after its own answer;
    the dry run counts both calls per case with a generated turn."""
    monkeypatch.chdir(tmp_path)
    with FakeRagService(responder=lambda question: {"answer": f"The service on: {question}"}) as service:
        cases = [case for case in CASES if case["id"] != "given-twin"]  # bodies are told apart by question
        write_project(tmp_path, DOCUMENTS, cases, only_http_system(service.url))
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert service.bodies == []  # the dry run asks nothing
        assert run.main(["--config", "config.yaml"]) == 0
        bodies = {body["question"]: body for body in service.bodies}

    assert len(bodies) == 3 and "messages" not in bodies[FIRST]  # asked alone first
    assert bodies[CASES[0]["question"]]["messages"] == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": f"The service on: {FIRST}"},
        {"role": "user", "content": CASES[0]["question"]},
    ]
    records = {
        json.loads(line)["case_id"]: json.loads(line)
        for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()
    }
    assert records["follow-up"]["history"][1] == {
        "role": "assistant",
        "content": f"The service on: {FIRST}",
        "generate": True,
    }
    assert "Expected: 3 calls" in plan  # two cases and one generated turn


CONTAINERS = "Which method do I want for my container?"
FOLLOW_UP = "And what does it give back?"
REWRITE_SYSTEM = "You rewrite the latest question of a conversation into one standalone search query."
# the reader's earlier answer decides which page the condensed follow-up finds
TURNS = {"fake-lists": "Use append on the list.", "fake-dicts": "Use get on the dictionary."}
CONDENSED = {
    "list": "What does append on a list return?",
    "dictionary": "What does get of a dictionary return for a missing key?",
}


def condensing_responder(request: dict) -> str:
    """The rewriter condenses after what the conversation's assistant said (none: the question alone); each
    reader writes its own earlier answer, and answers the follow-up by the passage it was given."""
    text = last_user_text(request)
    if request["messages"][0]["content"].startswith(REWRITE_SYSTEM):
        return next(
            (
                query
                for word, query in CONDENSED.items()
                if f"on the {word}" in text or f"of the {word}" in text or f"the {word}." in text
            ),
            FOLLOW_UP,
        )
    if CONTAINERS in text and FOLLOW_UP not in text:
        return TURNS[request["model"]]
    return "It returns what the passage says [1]."


def test_a_rewriting_cell_searches_its_follow_up_again_after_the_turn_it_wrote(tmp_path, monkeypatch, capsys):
    """Two readers write different earlier answers; a condensing cell searches each one's follow-up after
    that answer, so the two find different pages, while the case whose earlier answer is given finds the
    same page in both cells; the dry run counts the rewrite made again."""
    cases = [
        {
            "id": "generated",
            "history": [{"role": "user", "content": CONTAINERS}, {"role": "assistant", "generate": True}],
            "question": FOLLOW_UP,
            "expected_sources": ["dict.md"],
        },
        {
            "id": "given",
            "history": [
                {"role": "user", "content": CONTAINERS},
                {"role": "assistant", "content": TURNS["fake-dicts"]},
            ],
            "question": FOLLOW_UP,
            "expected_sources": ["dict.md"],
        },
    ]
    with serving_fake_openai(tmp_path, monkeypatch, condensing_responder) as server:
        llm = no_retry_llm(server.base_url)
        write_project(
            tmp_path,
            DOCUMENTS,
            cases,
            "grid: {chunk_size: [64], retriever: [bm25], query_rewrite: [condense], top_k: [5], top_n: [1], "
            f"reader: [openai/fake-lists, openai/fake-dicts], judge: []}}\n"
            f"generation: {{reader: {llm}}}\n"
            f"retrieval: {{rewriter: {{model: openai/fake-rewriter, api_base: {server.base_url}, "
            "max_retries: 0}}\n"
            "evaluation: {keyword_tests: false}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n",
        )
        assert run.main(["--config", "config.yaml", "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert server.requests == []
        assert run.main(["--config", "config.yaml"]) == 0
        rewrites = [r for r in server.requests if r["messages"][0]["content"].startswith(REWRITE_SYSTEM)]
        readers = [r for r in server.requests if r["model"] in TURNS]

    # the stage rewrote both follow-ups once (the generated turn left out); each cell its own again, and
    # the dictionary cell's conversation is the given case's, so the LLM cache served it
    assert len(rewrites) == 3
    after_turn = [last_user_text(r) for r in rewrites if any(t in last_user_text(r) for t in TURNS.values())]
    assert len(after_turn) == 2 and any(TURNS["fake-lists"] in text for text in after_turn)
    assert "follow_up_rewrite_calls" in plan  # a column of the plan, one call per cell
    assert "New LLM calls: 10" in plan  # 2 stage rewrites; per cell a turn, 2 answers and 1 rewrite again

    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    generated = {r["history"][1]["content"]: r for r in records if r["case_id"] == "generated"}
    assert set(generated) == set(TURNS.values())  # each cell wrote its own earlier answer
    lists, dicts = generated[TURNS["fake-lists"]], generated[TURNS["fake-dicts"]]
    # each cell's follow-up found the page its own earlier answer pointed at
    assert lists["searched"] == [CONDENSED["list"]] and lists["searched_again"] is True
    assert dicts["searched"] == [CONDENSED["dictionary"]] and dicts["searched_again"] is True
    assert [p["source"] for p in lists["contexts"]] == ["lists.md"]
    assert [p["source"] for p in dicts["contexts"]] == ["dict.md"]
    # the given case is the same conversation in both cells: the stage's ranking, the same page
    given = [r for r in records if r["case_id"] == "given"]
    assert len(given) == 2 and not any(r["searched_again"] for r in given)
    assert all(r["searched"] == [CONDENSED["dictionary"]] for r in given)
    assert all([p["source"] for p in r["contexts"]] == ["dict.md"] for r in given)
    # the reader was given the passage found again, after its own turn
    (lists_follow_up,) = [
        r
        for r in readers
        if r["model"] == "fake-lists"
        and FOLLOW_UP in last_user_text(r)
        and len(r["messages"]) == 4
        and r["messages"][2]["content"] == TURNS["fake-lists"]
    ]
    assert "append adds an item" in last_user_text(lists_follow_up)
    modes = list(csv.DictReader((tmp_path / "out" / "latest" / "turn_modes.csv").open()))
    assert sorted(row["turns"] for row in modes) == sorted(2 * ["given turns", "generated turns"])
