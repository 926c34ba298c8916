"""A custom rubric, a custom suite and pairwise judging, defined only in a test's YAML, through real ZenML
runs against the loopback fake OpenAI server: scores, intervals, the report, the gate, the dry run's
call count, and the cache key that follows the rubric's text."""

import csv
import json
import re

import run
from ragbench.config.dry_run import plan_rows
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.inputs.eval_cases import load_eval_suite_from
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project

GOOD = "The answer is in errors.md [1]."
BAD = "Ask on build01.corp.example.com, and use the deprecated --legacy flag."
CITES = "The answer names the document it relied on."


def evaluation_yaml(criteria: str = CITES) -> str:
    return (
        "evaluation:\n"
        "  judge: {JUDGE}\n"
        "  judge_check: null\n"  # calls counted: the card is tested in test_ragas_pipeline
        "  custom_rubrics:\n"
        f"    - {{name: cites_source, criteria: '{criteria}', inputs: [question, passages, answer],\n"
        "       anchors: {5: names the document, 1: names none}}\n"
        "    - {name: no_deprecated_flags, criteria: 'Never recommends a deprecated flag.',\n"
        "       scale: pass_fail, tags: [flags]}\n"
        "  custom_suites:\n"
        "    - {name: internal_hosts, assert: not-regex, value: '\\b[a-z0-9-]+\\.corp\\.example\\.com\\b'}\n"
        "  pairwise: {baseline: openai/reader-bad}\n"
        "regression: {thresholds: {cites_source: 0.5}}\n"
    )


def answers_in(text: str) -> dict[str, str]:
    return dict(re.findall(r'<answer id="(\d)">\n(.*?)\n</answer>', text, re.DOTALL))


def responder(cites_score: int):
    def reply(request: dict) -> str:
        system = request["messages"][0]["content"]
        user = last_user_text(request)
        if not request.get("response_format"):
            return BAD if "bad" in request["model"] else GOOD
        if "Answer 1:" in user:  # pairwise: the answer without the internal host is better
            better = next(n for n, text in answers_in(user).items() if "corp.example" not in text)
            return json.dumps({"reasoning": "no internal host", "verdict": better})
        answer = user.rsplit("<answer>", 1)[1]
        if "the document it relied on" in system:
            return json.dumps({"reasoning": "cites", "score": cites_score if "errors.md" in answer else 1})
        if "deprecated flag" in system:
            return json.dumps({"reasoning": "flag", "verdict": "fail" if "deprecated" in answer else "pass"})
        if "faithfulness" in system:
            return json.dumps(
                {"reasoning": "ok", "faithfulness": 4, "relevance": 4, "helpfulness": 4, "toxicity": 1}
            )
        return json.dumps({"reasoning": "compared", "score": 4})

    return reply


def rows_of(tmp_path) -> dict[str, dict]:
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        return {row["reader"]: row for row in csv.DictReader(file)}


def write(tmp_path, server, criteria: str = CITES) -> None:
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        f"retrieval: {{metrics_k: 1}}\nllm_cache_dir: {tmp_path / 'llm-cache'}\n"
        "grid: {chunk_size: [64], retriever: [bm25], top_k: 3, top_n: 1, "
        "reader: [openai/reader-good, openai/reader-bad], judge: [openai/fake-judge]}\n"
        f"generation: {{reader: {llm}}}\n" + evaluation_yaml(criteria).replace("{JUDGE}", llm),
    )


def test_custom_rubric_suite_and_pairwise_run_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder(cites_score=5)) as server:
        write(tmp_path, server)
        config = load_config(tmp_path / "config.yaml")
        cases = load_eval_suite_from(config.eval_cases).cases
        # per reader: 3 answers; judge: correctness 3, context 3, cites_source 3, no_deprecated_flags 1
        # (the one tagged case); pairwise: the good reader's 3 cases in both orders
        rows = plan_rows(config, cases, set(), cells=expand_grid(config))
        assert sum(row["llm_calls"] for row in rows) == 2 * (3 + 10) + 6
        assert run.main(["--config", "config.yaml"]) == 0
        assert server.request_count == 2 * (3 + 10) + 6
        good, bad = (rows := rows_of(tmp_path))["openai/reader-good"], rows["openai/reader-bad"]
        assert float(good["cites_source"]) == 5.0 and float(bad["cites_source"]) == 1.0
        assert good["cites_source_cases"] == "3" and good["cites_source_low"] and good["cites_source_high"]
        assert float(good["no_deprecated_flags"]) == 1.0 and float(bad["no_deprecated_flags"]) == 0.0
        assert good["no_deprecated_flags_cases"] == "1"  # only the case tagged flags
        assert float(good["fail_internal_hosts"]) == 0.0 and float(bad["fail_internal_hosts"]) == 1.0
        assert float(good["correctness_0to1"]) == 0.75  # the built-in rubric beside them
        html = (tmp_path / "out" / "latest" / "results.html").read_text()
        assert "cites_source (1-5)" in html and "internal_hosts (failure rate)" in html
        assert "Pairwise: which answers the judge preferred" in html and "build01.corp.example.com" in html

        from zenml.client import Client

        run_record = Client().get_pipeline_run((tmp_path / "out" / "latest").resolve().name)
        metadata = run_record.run_metadata
        assert metadata["metric_directions"]["cites_source"] == "higher"
        assert metadata["metric_directions"]["fail_internal_hosts"] == "lower"
        (pairwise,) = metadata["pairwise"]
        assert (pairwise["wins"], pairwise["ties"], pairwise["losses"]) == (3, 0, 0)
        assert pairwise["flip_share"] == 0.0 and pairwise["sign_test_p"] == 0.25

        # the rubric's text is its identity: new wording, new calls for that rubric only (6), and the
        # gate sees its drop (5 -> 2 for the good reader, beyond the 0.5 threshold) as a regression
        server.responder = responder(cites_score=2)
        write(tmp_path, server, criteria=CITES.replace("names", "states"))
        before = server.request_count
        assert run.main(["--config", "config.yaml"]) == 1
        assert server.request_count - before == 6
        assert float(rows_of(tmp_path)["openai/reader-good"]["cites_source"]) == 2.0
        gate = (tmp_path / "out" / "latest" / "gate.html").read_text()
        assert "cites_source" in gate and "regressed" in gate
