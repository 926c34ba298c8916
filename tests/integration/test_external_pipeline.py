"""External RAG systems benchmarked beside a grid cell, through real ZenML runs: a fake RAG service on
127.0.0.1 (with a secret header, scripted failures and an outage) and a Python callable from this package,
scored, gated and reported like the grid's cells; the judge and the grid's reader are the fake OpenAI
server."""

import csv
import json
import os
import re
from pathlib import Path

import run
from cli.launch import open_store
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.fake_rag_service import FakeRagService
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

SECRET = "Bearer s3cr3t-rag-header-0123456789"
BY_QUESTION = {case["question"]: case for case in CASES}


def good_service(question: str) -> dict:
    """The deploy that works: the reference answer, from the right page (a URL, mapped by basename)."""
    case = BY_QUESTION[question]
    source = case["expected_sources"][0]
    return {
        "answer": case["reference_answer"],
        "contexts": [{"text": DOCUMENTS[source], "source": f"https://docs.example.com/kb/{source}"}],
    }


def broken_service(question: str) -> dict:
    """Yesterday's deploy: it retrieves the wrong page and answers from it."""
    return {
        "answer": "I could not find that.",
        "contexts": [{"text": DOCUMENTS["files.md"], "source": "https://docs.example.com/kb/other.md"}],
    }


def judge(request: dict) -> str:
    user = last_user_text(request)
    if not request.get("response_format"):
        return "The answer is in the passages [1]."
    good = any(case["reference_answer"] in user.rsplit("<answer>", 1)[-1] for case in CASES)
    if "faithfulness" in request["messages"][0]["content"]:
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 4, "relevance": 4, "helpfulness": 4, "toxicity": 1}
        )
    return json.dumps({"reasoning": "compared", "score": 5 if good else 1})


def write(tmp_path: Path, llm: FakeOpenAIServer, service: FakeRagService, bare: FakeRagService) -> None:
    settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, reader: [openai/reader], "
        "judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {settings}, sample_size: null}}\n"
        f"evaluation: {{judge: {settings}}}\n"
        "systems:\n"
        "  - {name: prod-rag, version_env: DEPLOY_SHA, concurrency: 1, max_retries: 3,\n"
        "     max_consecutive_failures: 2, source_match: {rule: basename},\n"
        f"     http: {{url: '{service.url}', headers_env: {{Authorization: RAG_HEADER_VALUE}}}}}}\n"
        "  - {name: bare-rag, concurrency: 1,\n"
        f"     http: {{url: '{bare.url}', headers_env: {{Authorization: RAG_HEADER_VALUE}},\n"
        "            contexts: null, sources: null}}\n"
        "  - {name: py-rag, python: 'tests.fake_rag_system:answer'}\n",
    )


def rows(tmp_path: Path) -> dict[str, dict]:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        return {row["external"] or "grid": row for row in csv.DictReader(file)}


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_external_systems_are_cells_scored_gated_and_kept_secret(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.setenv("RAG_HEADER_VALUE", SECRET)
    monkeypatch.setenv("DEPLOY_SHA", "1111111")
    with (
        FakeOpenAIServer(responder=judge) as llm,
        FakeRagService(good_service, token=SECRET[7:]) as service,
        FakeRagService(good_service, token=SECRET[7:]) as bare,
    ):
        write(tmp_path, llm, service, bare)
        service.inject([503, 429])  # retried (Retry-After honoured), counted, never cached as answers
        assert run.main(["--config", "config.yaml"]) == 0
        assert service.request_count == 3 + 2 and service.answered == 3 and bare.request_count == 3
        table = rows(tmp_path)
        prod, answer_only, python, grid = table["prod-rag"], table["bare-rag"], table["py-rag"], table["grid"]
        assert prod["label"] == "external prod-rag" and prod["chunk_size"] == ""
        # sources mapped by basename: every case's page first -> hit rate 1, MRR 1
        assert float(prod["hit_rate@1"]) == 1.0 and float(prod["mrr"]) == 1.0
        assert prod["retrieval_cases"] == "3" and prod["index_build_s"] == ""
        assert prod["first_stage_mrr"] == "" and grid["first_stage_mrr"] == grid["mrr"]  # one ranking only
        assert float(prod["correctness_0to1"]) == 1.0 and prod["correctness_0to1_cases"] == "3"
        assert prod["faithfulness_1to5"] and prod["answers_produced"] == "3" and prod["reader_retries"] == "2"
        # no passages: answer-only metrics, and the report says so
        assert answer_only["hit_rate@1"] == "" and answer_only["faithfulness_1to5"] == ""
        assert answer_only["correctness_0to1"]
        assert python["answers_produced"] == "3" and python["hit_rate@1"] != ""
        assert grid["external"] == "" and grid["hit_rate@1"] != ""
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "External system prod-rag (http" in html and "version 1111111" in html
        assert "External system bare-rag" in html and "answer-only metrics" in html
        # the header reached the service, and nothing else: not the outputs, the caches, the ZenML store
        seen = service.headers_seen + bare.headers_seen
        assert len(seen) == 8 and all(headers.get("Authorization") == SECRET for headers in seen)
        secret = SECRET[7:].encode()
        assert files_containing(tmp_path, secret) == []
        assert files_containing(Path(os.environ["ZENML_CONFIG_PATH"]), secret) == []
        assert SECRET[7:] not in "".join(capfd.readouterr())

        # the same deploy again: every versioned answer from the cache; bare-rag has no version, so it
        # may have changed since: asked anew, never served the last run's answers
        assert run.main(["--config", "config.yaml"]) == 0
        assert service.request_count == 5 and bare.request_count == 6

        # a new deploy while the service is down: one message, exit 2, nothing kept as answers
        monkeypatch.setenv("DEPLOY_SHA", "2222222")
        service.outage = True
        assert run.main(["--config", "config.yaml"]) == 2
        message = capfd.readouterr().err
        assert "external system prod-rag" in message and "is failing" in message
        assert SECRET[7:] not in message

        # back, and broken: the new version's answers are asked (only prod-rag's 3), and the gate compares
        # them with the previous run's answers from version 1111111
        service.outage = False
        service.responder = broken_service
        before = service.request_count
        assert run.main(["--config", "config.yaml"]) == 1
        assert service.request_count - before == 3
        prod = rows(tmp_path)["prod-rag"]
        assert float(prod["hit_rate@1"]) == 0.0 and float(prod["correctness_0to1"]) == 0.0
        gate = (tmp_path / "out" / "latest" / "gate.html").read_text()
        assert "ext_prod_rag" in gate and "regressed" in gate
        assert files_containing(tmp_path, secret) == []


def deployed_system(question: str) -> dict:
    """The team's RAG function as the nightly imports it: right page and answer, until a deploy breaks it
    (told by the environment: the step may import this module under another name than the test did)."""
    reply = broken_service(question) if os.environ.get("FAKE_DEPLOY_BROKEN") else good_service(question)
    return {
        "answer": reply["answer"],
        "contexts": [{"text": c["text"], "source": c["source"]} for c in reply["contexts"]],
    }


def test_a_nightly_of_the_deploy_alone_is_gated_against_its_champion(tmp_path, monkeypatch, capsys):
    """The deploy job writes its sha into a ZenML secret; each nightly run reads it where the step runs."""
    from zenml.client import Client

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEPLOY_SHA", raising=False)
    monkeypatch.delenv("FAKE_DEPLOY_BROKEN", raising=False)
    secret = f"deploy-info-{tmp_path.name}"
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "benchmark_grid: false\ngrid: {judge: []}\ngeneration: {sample_size: null}\n"
        "retrieval: {metrics_k: 1}\n"
        f"llm_cache_dir: {tmp_path / 'llm-cache'}\nregression: {{baseline: champion}}\n"
        f"orchestration: {{secrets: [{secret}]}}\n"
        "systems:\n"
        "  - {name: deploy, python: 'tests.integration.test_external_pipeline:deployed_system',\n"
        "     version_env: DEPLOY_SHA,\n"
        "     source_match: {rule: regex, pattern: 'https://docs.example.com/kb/(.*)'}}\n",
    )
    open_store()
    Client().create_secret(secret, values={"DEPLOY_SHA": "aaaaaaa"})
    assert run.main(["--config", "config.yaml"]) == 0
    (row,) = rows(tmp_path).values()
    assert row["external"] == "deploy" and float(row["hit_rate@1"]) == 1.0 and "correctness_0to1" not in row
    assert "version aaaaaaa" in (tmp_path / "out" / "latest" / "results.html").read_text()
    champion = (tmp_path / "out" / "latest").resolve().name
    assert run.main(["promote", champion]) == 0
    # tonight's deploy (a new sha in the secret) is broken: asked afresh, gated against the champion's answers
    Client().update_secret(secret, add_or_update_values={"DEPLOY_SHA": "bbbbbbb"})
    monkeypatch.setenv("FAKE_DEPLOY_BROKEN", "1")
    assert run.main(["--config", "config.yaml"]) == 1
    out = capsys.readouterr().out
    assert f"against {champion}" in out and "REGRESSION hit_rate_at_1 in ext_deploy" in out
    assert "version bbbbbbb" in (tmp_path / "out" / "latest" / "results.html").read_text()


def pairwise_judge(request: dict) -> str:
    """The reader's answers are refusals; a pairwise verdict prefers the answer with a reference in it."""
    user = last_user_text(request)
    if not request.get("response_format"):
        return "I could not find that."
    if "Answer 1:" in user:
        answers = dict(re.findall(r'<answer id="(\d)">\n(.*?)\n</answer>', user, re.DOTALL))
        right = [n for n, text in answers.items() if any(c["reference_answer"] in text for c in CASES)]
        return json.dumps({"reasoning": "states the fact", "verdict": right[0] if len(right) == 1 else "tie"})
    return json.dumps({"reasoning": "graded", "score": 3})


def test_the_grid_is_judged_pairwise_against_the_deploy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.delenv("FAKE_DEPLOY_BROKEN", raising=False)
    with FakeOpenAIServer(responder=pairwise_judge) as llm:
        settings = f"{{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}"
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\nretrieval: {{metrics_k: 1}}\n"
            "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, reader: [openai/reader], "
            "judge: [openai/judge]}\n"
            f"generation: {{reader: {settings}, sample_size: null}}\n"
            f"evaluation: {{judge: {settings}, rubrics: [correctness],\n"
            "             pairwise: {baseline: {external: deploy}}}\n"
            "systems: [{name: deploy, python: 'tests.integration.test_external_pipeline:deployed_system'}]\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
    from zenml.client import Client

    metadata = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name).run_metadata
    (pairwise,) = metadata["pairwise"]
    assert pairwise["baseline"] == "external deploy" and pairwise["candidate"] == "openai/reader"
    assert (pairwise["wins"], pairwise["ties"], pairwise["losses"]) == (0, 0, 3)
    assert (
        "Pairwise: which answers the judge preferred"
        in (tmp_path / "out" / "latest" / "results.html").read_text()
    )
