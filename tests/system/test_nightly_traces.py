"""The deployed system checked every night: a `run.py schedule` entry on a traces config with a relative
window ("the last 24 hours"), run as cron would run it, night after night, on what the real instrumented
LangChain app (tests/phoenix/rag_app.py, in the Phoenix venv) logged that day. A night like the first
passes against it; a night whose retriever broke fails the gate; a night with too few traces says so and
does not pass."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

import run
from ragbench.runs.schedule import command_of, entries
from tests.fake_openai_server import FakeOpenAIServer
from tests.integration.test_phoenix_traces import judge, run_app
from tests.phoenix_server import PYTHON, unavailable_reason
from tests.projects import THREE_TOPICS, write_knowledge_base
from tests.system.test_schedule import FAKE_CRONTAB

pytestmark = pytest.mark.slow
QUESTIONS = [
    {"question": question}
    for question in (
        "How do I end a loop at once with break?",
        "What does break end in a loop?",
        "What closes a file automatically?",
        "Does a file close by itself when the block ends?",
        "What raises AssertionError?",
        "When does a failing assert raise an error?",
        "Is break the way to leave the innermost loop?",
        "Are files closed automatically after the with block?",
    )
]


def day(root: Path, questions: list[dict], *, broken: bool = False) -> None:
    """One day of the app's traffic, exported where the collector writes it (its file of the day)."""
    (root / "spans.jsonl").unlink(missing_ok=True)
    options = {"otlp_file": str(root / "spans.jsonl"), "project": "prod-rag"}
    run_app(PYTHON, root, questions, **options, **({"broken_retriever": True} if broken else {}))


def night(root: Path, questions: list[dict], *, broken: bool = False, traffic: bool = True) -> str:
    """A day of traffic (unless it was made already), then the installed entry run once as cron would (a
    shell, another working directory); the log's lines of that night."""
    if traffic:
        day(root, questions, broken=broken)
    log = root / "out" / "schedule.log"
    before = log.read_text() if log.exists() else ""
    (line,) = entries((root / "table").read_text())
    subprocess.run(["/bin/sh", "-c", command_of(line)], cwd="/", env=os.environ, timeout=900, check=False)
    return log.read_text()[len(before) :]


def test_a_night_whose_retriever_broke_fails_the_gate_and_a_quiet_night_is_inconclusive(
    tmp_path, monkeypatch
):
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    crontab = tmp_path / "crontab"
    crontab.write_text(FAKE_CRONTAB)
    crontab.chmod(crontab.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RAGBENCH_CRONTAB", str(crontab))
    monkeypatch.setenv("CRONTAB_FILE", str(tmp_path / "table"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.chdir(tmp_path)
    write_knowledge_base(tmp_path, THREE_TOPICS)
    with FakeOpenAIServer(responder=judge) as llm:
        (tmp_path / "nightly.yaml").write_text(
            "name: nightly-traces\n"
            "knowledge_base: {kind: folder, path: kb}\noutput_dir: out\n"
            "eval_cases: {traces: {path: spans.jsonl, since: 24h}}\n"
            "benchmark_grid: false\ngrid: {judge: [openai/fake-judge]}\n"
            f"evaluation: {{judge: {{api_base: {llm.base_url}, max_retries: 0, json_retries: 0}}}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "regression: {min_traces: 6}\n"
            "systems: [{name: prod-rag, traces: true, source_match: {rule: basename}}]\n"
        )
        day(tmp_path, QUESTIONS)  # installing the entry checks the config: its traces must be there
        assert run.main(["schedule", "--config", "nightly.yaml", "--cron", "0 3 * * *"]) == 0

        first = night(tmp_path, QUESTIONS, traffic=False)
        assert "benchmark exit 0" in first and "Gate (previous baseline)" in first, first[-3000:]
        second = night(tmp_path, list(reversed(QUESTIONS)))
        assert "benchmark exit 0" in second and "compare exit 0" in second, second[-3000:]
        assert "two samples of the deployed system's traces" in second
        assert (
            "permutation test of two independent samples (8 and 8 traces)" not in second
        )  # no regression row

        broken = night(tmp_path, QUESTIONS, broken=True)
        assert "REGRESSED" in broken and "benchmark exit 1" in broken and "compare exit 1" in broken, broken[
            -3000:
        ]
        assert "REGRESSION faithfulness_1to5" in broken
        assert "permutation test of two independent samples (8 and 8 traces)" in broken

        quiet = night(tmp_path, QUESTIONS[:3])
        assert "INCONCLUSIVE" in quiet and "benchmark exit 1" in quiet, quiet[-3000:]
        assert "too few traces to tell: 3 scored" in quiet and "regression.min_traces = 6" in quiet
    assert run.main(["schedule", "--config", "nightly.yaml", "--remove"]) == 0
