"""The fault-injection fake server: its command line, its seeded fault rates and its outage switch."""

from __future__ import annotations

import json
import math
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, Fault
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer, Fault  # type: ignore[no-redef]

REPO_ROOT = Path(__file__).resolve().parents[2]
CANARY_KEY = "sk-canary-0123456789abcdef"
# No proxy from the environment may sit between a test and the loopback server.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def chat(base_url: str, text: str = "hello", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """POST one chat completion; the HTTP status and the raw body, error replies included."""
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps({"model": "fake", "messages": [{"role": "user", "content": text}]}).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with _OPENER.open(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def content_of(body: bytes) -> str:
    return json.loads(body)["choices"][0]["message"]["content"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the command line -------------------------------------------------------------------------------


@contextmanager
def serving(*args: str, stop: signal.Signals = signal.SIGTERM) -> Iterator[str]:
    """Run the CLI on a free port; yield the base URL it prints; stop it with `stop` (a clean exit)."""
    port = free_port()
    command = [sys.executable, "-m", "tests.fake_openai_server", "--port", str(port), *args]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready, "the server printed no URL within 20 s"
        base_url = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert base_url == f"http://127.0.0.1:{port}/v1", process.stderr.read()  # type: ignore[union-attr]
        yield base_url
    finally:
        process.send_signal(stop)
        try:
            assert process.wait(timeout=10) == 0
        finally:
            process.kill()
            process.communicate()


def test_cli_serves_echo_replies_with_the_given_latency() -> None:
    with serving("--latency", "0.05", "--seed", "0") as base_url:
        started = time.perf_counter()
        status, body = chat(base_url, "ping")
        assert time.perf_counter() - started >= 0.05
        assert status == 200 and content_of(body) == "echo: ping"
        with _OPENER.open(f"{base_url}/models", timeout=10) as reply:
            assert json.load(reply)["data"][0]["id"] == "fake-model"


def test_cli_all_fail_answers_5xx_and_echoes_the_request_headers() -> None:
    with serving("--all-fail", "--echo-headers", stop=signal.SIGINT) as base_url:
        replies = [chat(base_url, headers={"Authorization": f"Bearer {CANARY_KEY}"}) for _ in range(2)]
    assert sorted(status for status, _ in replies) == [500, 503]
    for _, body in replies:
        error = json.loads(body)["error"]
        assert f"Bearer {CANARY_KEY}" in error["message"]  # where a client's exception text picks it up
        assert error["request_headers"]["Authorization"] == f"Bearer {CANARY_KEY}"


def test_cli_refuses_rates_that_add_up_to_more_than_one() -> None:
    command = [sys.executable, "-m", "tests.fake_openai_server", "--port", "0"]
    result = subprocess.run(
        [*command, "--rate-limit", "0.8", "--server-error", "0.5"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "sum to at most 1" in result.stderr and not result.stdout


# -- seeded fault rates -----------------------------------------------------------------------------

RATES: dict[Any, float] = {"rate_limit": 0.3, "server_error": 0.1, "timeout": 0.05, "malformed_json": 0.1}
REQUESTS = 200


def faults_met(seed: int) -> tuple[list[Any], Counter[str]]:
    """Send `REQUESTS` requests one by one: the server's fault log, and what the client saw."""
    seen: Counter[str] = Counter()
    with FakeOpenAIServer(rates=RATES, seed=seed, retry_after=0.1, timeout_delay_s=0.0) as server:
        for _ in range(REQUESTS):
            status, body = chat(server.base_url)
            if status != 200:
                seen[str(status)] += 1
            elif not content_of(body).startswith("echo: "):
                seen["malformed"] += 1
        return list(server.fault_log), seen


def test_seeded_rates_give_the_expected_mix_reproducibly() -> None:
    log, seen = faults_met(seed=0)
    counts = Counter(log)
    for kind, rate in RATES.items():
        expected, spread = REQUESTS * rate, math.sqrt(REQUESTS * rate * (1 - rate))
        assert abs(counts[kind] - expected) <= 4 * spread, (kind, counts[kind])
    assert counts[None] == REQUESTS - sum(counts[kind] for kind in RATES)
    # what the client saw matches what the server says it served
    assert seen == Counter(
        {"429": counts["rate_limit"], "500": counts["server_error"], "malformed": counts["malformed_json"]}
    )
    assert faults_met(seed=0)[0] == log
    assert faults_met(seed=1)[0] != log


def test_scripted_faults_win_over_rates_and_do_not_shift_the_random_sequence() -> None:
    with FakeOpenAIServer(rates={"rate_limit": 0.5}, seed=3) as plain:
        for _ in range(6):
            chat(plain.base_url)
    with FakeOpenAIServer(rates={"rate_limit": 0.5}, seed=3) as scripted:
        scripted.inject(Fault("client_error", status=401))
        statuses = [chat(scripted.base_url)[0] for _ in range(6)]
    assert statuses[0] == 401 and scripted.fault_log[0] == "client_error"
    assert scripted.fault_log[1:] == plain.fault_log[1:]


def test_rates_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        FakeOpenAIServer(rates={"overload": 0.1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="sum to at most 1"):
        FakeOpenAIServer(rates={"rate_limit": 0.6, "timeout": 0.6})


# -- the outage switch ------------------------------------------------------------------------------


def test_all_fail_switches_on_and_off_while_serving_and_keeps_scripted_faults() -> None:
    with FakeOpenAIServer() as server:
        assert chat(server.base_url)[0] == 200
        server.all_fail = True
        server.inject("rate_limit")
        statuses = [chat(server.base_url)[0] for _ in range(4)]
        assert set(statuses) == {500, 503}
        server.all_fail = False
        assert [chat(server.base_url)[0] for _ in range(2)] == [429, 200]  # the script resumes
    assert server.fault_log == [None, *["all_fail"] * 4, "rate_limit", None]


def test_error_bodies_hide_headers_unless_asked() -> None:
    with FakeOpenAIServer(all_fail=True) as server:
        _, body = chat(server.base_url, headers={"Authorization": f"Bearer {CANARY_KEY}"})
    assert CANARY_KEY not in body.decode()
