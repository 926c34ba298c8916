"""Sources of truth that change, for `reference_from` tests: a status file a test rewrites between runs.

`open_incidents`, `on_call` and `status_pages` read the file at `path` (what a team's verified function
would read from its incident tracker); `down` raises as a status service that is down would. `status_system`
is a RAG system (`systems: python`) that reads the same file, so its answers follow the change, unless
STATUS_SYSTEM_STALE is set: then it answers from the file's `stale` copy, as a system with an old index.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _status(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def open_incidents(path: str) -> str:
    return f"There are {_status(path)['incidents']} open incidents."


def on_call(path: str) -> str:
    return f"{_status(path)['on_call']} is on call this week."


def status_pages(path: str) -> list[str]:
    return _status(path)["pages"]


def status_record(path: str) -> dict[str, Any]:
    return _status(path)


def down() -> str:
    raise ConnectionError("the status service is down")


def status_system(question: str) -> dict[str, Any]:
    status = _status(os.environ["STATUS_FILE"])
    if os.environ.get("STATUS_SYSTEM_STALE"):
        status = status["stale"]
    if "incidents" in question:
        answer = f"{status['incidents'] + 1} incidents are open right now."
    elif "on call" in question:
        answer = f"This week {status['on_call']} is on call."
    else:
        answer = "The status page does not say."
    return {"answer": answer, "contexts": [{"text": answer, "source": "status.md"}]}
