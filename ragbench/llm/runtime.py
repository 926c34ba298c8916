"""Lazy, configured import of litellm: importing it costs seconds, and offline it must not fetch prices."""

from __future__ import annotations

import logging
import os
import threading
from types import ModuleType

from ragbench.llm.redaction import redact_logs_of

_lock = threading.Lock()
_module: ModuleType | None = None


def get_litellm() -> ModuleType:
    """Import litellm once, with the bundled price table and without its console banners."""
    global _module
    with _lock:
        if _module is None:
            # Without this, importing litellm offline spends seconds retrying a download of its price table.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback / Provider List" prints on errors
            logging.getLogger("LiteLLM").setLevel(logging.WARNING)
            redact_logs_of("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "openai")
            _module = litellm
        return _module
