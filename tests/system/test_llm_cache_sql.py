"""The LLM cache in a SQL database that every step and pod shares: the same semantics as the SQLite
file, no lost or corrupted entries with several writers at once, no password in its URL, and a real
pipeline that resumes from it. PostgreSQL is a real server (Debian's), started per module."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import run
from ragbench.config.model import ConfigError, load_config
from ragbench.llm.budget import BudgetConfig, SpendAccount, SpendLedger
from ragbench.llm.cache import ResultCache, SQLResultCache, check_cache_url, open_result_cache
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.postgres_server import postgres_server, unavailable_reason
from tests.projects import newest_run, write_keyword_topics

REPO_ROOT = Path(__file__).resolve().parents[2]


def responder(request: dict) -> str:
    if not request.get("response_format"):
        return f"About {last_user_text(request).rsplit('Question:', 1)[-1].strip()} [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    with postgres_server() as (url, password), pytest.MonkeyPatch.context() as patch:
        patch.setenv("PGPASSWORD", password)  # as a pod gets it from a ZenML secret: never in the URL
        yield url


def test_a_cache_url_with_a_password_is_refused_and_never_echoed(tmp_path):
    with pytest.raises(ValueError, match="must not contain a password") as refused:
        check_cache_url("postgresql+psycopg://user:hunter2@db/ragbench")
    assert "hunter2" not in str(refused.value)
    (tmp_path / "c.yaml").write_text("llm_cache_url: postgresql+psycopg://u:hunter2@db/x\n")
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "c.yaml")
    assert "must not contain a password" in str(error.value) and "hunter2" not in str(error.value)
    (tmp_path / "both.yaml").write_text("llm_cache_url: postgresql+psycopg://u@db/x\nllm_cache_dir: here\n")
    with pytest.raises(ConfigError, match="not both"):
        load_config(tmp_path / "both.yaml")
    assert isinstance(open_result_cache(tmp_path), ResultCache)
    assert isinstance(open_result_cache(f"sqlite:///{tmp_path / 'c.db'}"), SQLResultCache)


@pytest.mark.parametrize("backend", ["postgresql", "sqlite-url", "sqlite-folder"])
def test_every_backend_keeps_results_and_failures_apart(backend, tmp_path, request):
    location = {
        "postgresql": lambda: request.getfixturevalue("postgres_url"),
        "sqlite-url": lambda: f"sqlite:///{tmp_path / 'cache.db'}",
        "sqlite-folder": lambda: tmp_path,
    }[backend]()
    cache = open_result_cache(location)
    key = f"{backend}-k"
    assert cache.get(key) is None and not cache.failed_before(key)
    cache.record_failure(key, "m", "503")
    assert cache.get(key) is None and cache.failed_before(key)  # remembered, never served
    cache.put(key, "m", '{"text": "a"}')
    cache.put(key, "m", '{"text": "b"}')  # the same key again: one row, the newest value
    cache.forget_failure(key)
    assert cache.get(key) == '{"text": "b"}' and not cache.failed_before(key)
    assert len(cache) >= 1 and "hunter" not in cache.describe()
    cache.close()


def test_several_processes_writing_at_once_lose_nothing(postgres_url):
    script = (
        "import sys\n"
        "from ragbench.llm.cache import open_result_cache\n"
        "cache = open_result_cache(sys.argv[1])\n"
        "for i in range(60):\n"
        "    cache.put(f'{sys.argv[2]}-{i}', 'm', str(i))\n"
        "    assert cache.get(f'{sys.argv[2]}-{i}') == str(i)\n"
        "    cache.get(f'shared-{i % 7}')\n"
        "    cache.put(f'shared-{i % 7}', 'm', sys.argv[2])\n"
        "    cache.record_failure(f'shared-{i % 7}', 'm', 'e')\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, postgres_url, f"writer{n}"], cwd=REPO_ROOT, stderr=subprocess.PIPE
        )
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    cache = open_result_cache(postgres_url)
    assert all(cache.get(f"writer{n}-{i}") == str(i) for n in range(4) for i in range(60))
    assert {cache.get(f"shared-{i}") for i in range(7)} <= {f"writer{n}" for n in range(4)}
    assert len([1 for n in range(4) for i in range(60) if cache.get(f"writer{n}-{i}") is not None]) == 240
    cache.close()


def test_processes_charging_one_account_in_the_database_never_pass_its_cap(postgres_url):
    """Four processes (as a run's steps in separate pods) each charge 10 calls to one capped account kept
    in PostgreSQL: exactly the cap's 25 are granted, every other charge is refused."""
    account = SpendAccount.new(BudgetConfig(max_calls=25), postgres_url)
    script = (
        "import sys\n"
        "from ragbench.llm.budget import BudgetExhausted, SpendAccount, SpendLedger\n"
        "ledger = SpendLedger(SpendAccount.model_validate_json(sys.argv[1]))\n"
        "granted = 0\n"
        "for _ in range(10):\n"
        "    try:\n"
        "        ledger.reserve(1, 100, 0.0)\n"
        "        granted += 1\n"
        "    except BudgetExhausted:\n"
        "        pass\n"
        "ledger.close()\n"
        "print(granted)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, account.model_dump_json()],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    granted = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
        granted += int(out.decode().split()[-1])
    ledger = SpendLedger(account)
    spent = ledger.spent()
    ledger.close()
    assert granted == spent.calls == 25 and spent.tokens == 2500 and spent.refused == 40 - 25


def test_a_pipeline_resumes_from_the_shared_database_cache(postgres_url, tmp_path, monkeypatch):
    """Two runs with ZenML's step cache off: the second makes no LLM call, every answer and verdict
    comes from PostgreSQL, and nothing is written to a local SQLite cache. The second is capped: it is
    charged only the calls it really sends, none, since the shared cache serves them all."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.setenv("RAGBENCH_CACHE_DIR", str(tmp_path / "local-cache"))
    write_keyword_topics(tmp_path, 3)
    with FakeOpenAIServer(responder=responder) as server:
        (tmp_path / "config.yaml").write_text(
            "name: shared-cache\n"
            "knowledge_base: {kind: folder, path: kb}\n"
            "eval_cases: cases.jsonl\n"
            "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, "
            "top_n: 1, reader: openai/fake-reader, judge: openai/fake-judge}\n"
            "retrieval: {metrics_k: 1}\n"
            f"generation: {{reader: {{api_base: {server.base_url}, max_retries: 0}}}}\n"
            f"evaluation: {{judge: {{api_base: {server.base_url}, max_retries: 0}}, rubrics: [correctness]}}"
            "\n"
            f"llm_cache_url: {postgres_url}\n"
            "output_dir: out\n"
        )
        assert run.main(["--config", "config.yaml", "--no-cache"]) == 0
        first = server.request_count
        assert first > 0
        # a cap the plan fits (every call and the judge card's at most), so the run is charged as it goes
        assert run.main(["--config", "config.yaml", "--no-cache", "--set=budget.max_calls=1000"]) == 0
        assert server.request_count == first
    spend = newest_run().run_metadata["spend"]
    assert spend["total"]["calls"] == 0 and spend["total"]["tokens"] == 0  # served, so never charged
    assert not (tmp_path / "local-cache" / "llm").exists()
