"""Secrets stay where they belong: a canary key echoed back by a leaky provider is found nowhere, and a
server at api_base never receives the user's real OpenAI key."""

import json
import os
from pathlib import Path

import pytest

import run
from ragbench.config.model import ConfigError, load_config
from tests.fake_openai_server import FakeOpenAIServer
from tests.system.test_reliability import responder, write_project

SERVER_KEY = "sk-canary-server-9f3c2a1b7d"  # meant for the self-hosted server (named by api_key_env)
OPENAI_KEY = "sk-canary-openai-5e8d1c0a44"  # the user's real OpenAI key: must never reach that server


def files_containing(root: Path, needle: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


def test_a_canary_key_echoed_by_the_provider_is_found_nowhere(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("RAGBENCH_TEST_SERVER_KEY", SERVER_KEY)
    zenml_root = Path(os.environ["ZENML_CONFIG_PATH"])
    with FakeOpenAIServer(responder=responder, echo_headers=True) as server:
        write_project(tmp_path, server.base_url, cases=3)
        config = (tmp_path / "config.yaml").read_text()
        config = config.replace(
            "generation: {reader: {", "generation: {reader: {api_key_env: RAGBENCH_TEST_SERVER_KEY, "
        )
        (tmp_path / "config.yaml").write_text(config)
        server.inject(*["server_error"] * 3)  # every answer fails once, each error body echoes the key
        assert run.main(["--config", "config.yaml"]) == 2  # the whole cell failed: exit 2, one message
        server.inject("server_error", "rate_limit")  # the next run survives two more leaky errors
        code = run.main(["--config", "config.yaml", "--set", "generation.reader.max_retries=2"])
        assert code == 0
        sent = server.authorizations
    # the reader's server got its own key; the judge (no api_key_env) a placeholder; OpenAI's key never
    assert f"Bearer {SERVER_KEY}" in sent
    assert all(OPENAI_KEY not in (header or "") for header in sent)
    out, err = capfd.readouterr()
    for canary in (SERVER_KEY, OPENAI_KEY):
        assert canary not in out + err
        assert files_containing(tmp_path / "out", canary) == []
        assert files_containing(tmp_path / "llm-cache", canary) == []
        assert files_containing(zenml_root, canary) == []  # ZenML database, artifact store, step logs
    records = [json.loads(line) for line in (tmp_path / "out" / "latest" / "cases.jsonl").open()]
    assert records and all(record["error"] is None for record in records)


@pytest.mark.parametrize(
    "entry",
    [
        "{model: openai/x, extra: {extra_headers: {Authorization: 'Bearer sk-abc'}}}",
        "{model: bedrock/x, extra: {aws_secret_access_key: abc}}",
        "{model: openai/x, extra: {api_key: abc}}",
    ],
)
def test_credentials_in_the_config_are_refused(entry):
    with pytest.raises(ConfigError, match=r"credentials|api_key"):
        load_config(None, [f"grid.reader=[{entry}]"])


def test_an_empty_key_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert run.main(["--set", "grid.reader=[openai/gpt-4o-mini]", "--set", "grid.judge=[]"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
