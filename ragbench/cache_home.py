"""Where this machine keeps what the project caches (the LLM results, the provisioned models, trained
checkpoints copied out of the artifact store): one folder per kind under ``$RAGBENCH_CACHE_DIR``, else under
``~/.cache/ragbench``. Read where the code runs (a step's machine, never the client's).

Imports nothing of ragbench, so every module may import it.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV_VAR = "RAGBENCH_CACHE_DIR"


def cache_dir(kind: str) -> Path:
    """The folder for one kind of cached thing, e.g. ``cache_dir("llm")``."""
    base = os.environ.get(CACHE_ENV_VAR)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "ragbench"
    return root / kind
