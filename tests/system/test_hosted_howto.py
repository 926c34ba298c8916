"""docs/how-to/hosted-models.md, walked as written: the page's config is configs/hosted_openai.yaml byte
for byte, a missing key is refused with the page's message, and the run (against the loopback fake of
OpenAI's API, reached through OPENAI_BASE_URL as the page describes for a gateway, the config untouched)
writes its report where the page says, with the key sent as the provider's credential and found in no
file the run wrote. Its recorded dry run is checked with the other recorded outputs
(tests/system/test_recorded_outputs.py)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import run
from tests.fake_openai_server import FakeOpenAIServer, Fault, last_user_text

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "how-to" / "hosted-models.md"
CONFIG = REPO / "configs" / "hosted_openai.yaml"
KEY = "sk-howto-canary-3b9e71d04c"  # a dummy OPENAI_API_KEY: it must reach the provider and nothing else
RUN = "$ run.py --config hosted_openai.yaml"


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block of a Markdown page."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def block_after(prompt: str) -> str:
    """The page's text block that starts with the command `prompt`: what the page says it prints."""
    (body,) = [body for _, body in fenced_blocks(PAGE.read_text()) if body.splitlines()[0] == prompt]
    return "\n".join(body.splitlines()[1:])


def reply(request: dict) -> str:
    """A reader answering every question, a judge that passes every answer (the judge card must call it
    UNRELIABLE: it catches no planted error)."""
    if not request.get("response_format"):
        return f"About {last_user_text(request).rsplit('Question:', 1)[-1].strip()[:80]} [1]."
    if "faithfulness" in json.dumps(request["messages"]):  # the context rubric
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 5, "helpfulness": 5, "toxicity": 1}
        )
    return json.dumps({"reasoning": "matches", "score": 5})


def files_containing(root: Path, needle: str) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()]


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """An empty folder with the page's config copied in, as the page's first step does."""
    shutil.copy(CONFIG, tmp_path / "hosted_openai.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    return tmp_path


def test_the_page_shows_the_config_file_as_it_is():
    yaml_blocks = [body for info, body in fenced_blocks(PAGE.read_text()) if info == "yaml"]
    assert yaml_blocks and yaml_blocks[0] == CONFIG.read_text()


@pytest.mark.slow
def test_the_run_writes_the_report_where_the_page_says_and_the_key_nowhere(folder, monkeypatch, capfd):
    run_config = [
        "--config",
        "hosted_openai.yaml",
        "--set",
        "generation.sample_size=2",  # 2 cases end to end, not 20: the path, in well under 2 minutes
        "--set",
        f"llm_cache_dir={folder / 'llm-cache'}",  # fake answers must never reach the real LLM cache
    ]
    # No key: refused before any work, with the message the page quotes.
    assert run.main(run_config) == 2
    assert block_after(RUN + "   # without OPENAI_API_KEY").strip() in capfd.readouterr().err
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAIServer(responder=reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the gateway route the page describes
        # A key the provider rejects stops the step that meets it, exit 2; the rejected call is not retried.
        server.inject(Fault("client_error", status=401, message="Incorrect API key provided"))
        assert run.main(run_config) == 2
        err = capfd.readouterr().err
        assert "stopped; step" in err and "AuthenticationError" in err and "run the same command again" in err
        assert server.fault_log[0] == "client_error" and server.requests.count(server.requests[0]) == 1
        assert run.main(run_config) == 0
        out, err = capfd.readouterr()
        assert {request["model"] for request in server.requests} == {"gpt-4o-mini"}
        assert set(server.authorizations) == {f"Bearer {KEY}"}  # OPENAI_API_KEY is the key sent
    report = folder / "output" / "latest"
    assert (report / "results.html").is_file() and (report / "results.csv").is_file()
    assert report.resolve().parent == (folder / "output").resolve()
    assert f"report: {report.resolve()}/results.html" in out
    rows = list(csv.DictReader((report / "results.csv").open()))
    assert [row["retriever"] for row in rows] == ["dense", "hybrid"]
    assert all(float(row["cost_usd"]) > 0 for row in rows)  # priced from litellm's table
    assert "UNRELIABLE" in out and "UNRELIABLE" in (report / "results.html").read_text()
    assert KEY not in out + err
    assert files_containing(folder, KEY) == []  # the report, the LLM cache
    assert files_containing(Path(os.environ["ZENML_CONFIG_PATH"]), KEY) == []  # database, artifacts, logs
