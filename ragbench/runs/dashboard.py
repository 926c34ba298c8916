"""ZenML's local dashboard on 127.0.0.1, started ready to use and stopped again.

It drives the `zenml` command line of the running interpreter's environment rather than ZenML's
internal server-deployment classes: the command is ZenML's documented interface for this and keeps
its behaviour across releases, and it keeps this module free of ZenML imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"  # never another interface: the local server has no authentication
DEFAULT_PORT = 8237
START_TIMEOUT_S = 120.0


class DashboardError(RuntimeError):
    """The dashboard could not be started, reached or stopped."""


def zenml_command(*args: str) -> list[str]:
    """The `zenml` command of this interpreter's environment (a venv's, not whichever is on PATH)."""
    beside = Path(sys.executable).with_name("zenml")
    return [str(beside) if beside.exists() else "zenml", *args]


def _zenml(*args: str, timeout_s: float) -> str:
    env = os.environ | {"ZENML_AUTO_OPEN_DASHBOARD": "false"}  # never try to launch a browser
    try:
        done = subprocess.run(
            zenml_command(*args), env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DashboardError(f"zenml {' '.join(args)} failed: {error}") from None
    if done.returncode != 0:
        raise DashboardError(f"zenml {' '.join(args)} failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


def _request(url: str, method: str = "GET", body: dict | None = None, timeout_s: float = 10.0) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read()


def wait_until_healthy(url: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _request(f"{url}/health", timeout_s=5.0)  # any 2xx: urlopen raises on the others
            return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise DashboardError(f"the ZenML server at {url} did not answer within {timeout_s:.0f} s")
        time.sleep(0.5)


def skip_onboarding(url: str) -> None:
    """The dashboard sends a user to its survey while `email_opted_in` is unset or the user's metadata
    lacks `finished_onboarding_survey` (read from its bundle); answer both, with no e-mails, so it opens
    on the runs. The local server accepts this without a login."""
    answers = {"email_opted_in": False, "user_metadata": {"finished_onboarding_survey": True}}
    try:
        _request(f"{url}/api/v1/current-user", method="PUT", body=answers)
    except (urllib.error.URLError, OSError) as error:
        raise DashboardError(f"could not skip the dashboard's onboarding at {url}: {error}") from None


def start(port: int = DEFAULT_PORT) -> str:
    """Start (or restart on another port) the local server bound to 127.0.0.1; return its URL.

    While it runs, this machine's ZenML client talks to the store through it, so benchmark runs
    show up in the dashboard as they happen."""
    _zenml(
        "login", "--local", "--port", str(port), "--ip-address", HOST, "--restart", timeout_s=START_TIMEOUT_S
    )
    url = f"http://{HOST}:{port}"
    wait_until_healthy(url)
    skip_onboarding(url)
    return url


def stop() -> None:
    """Stop the local server and point the client back at the local store."""
    _zenml("logout", "--local", timeout_s=60.0)


def run_url(url: str, run_id: str) -> str:
    """The dashboard page of one pipeline run (its DAG holds the report's artifact)."""
    return f"{url}/projects/default/runs/{run_id}"
