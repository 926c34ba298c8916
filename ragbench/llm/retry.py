"""How long to wait before retrying a call, one rule for the LLM client and the external-system client: the
server's Retry-After when it sent one (capped), else exponential backoff with equal jitter."""

from __future__ import annotations

import email.utils
import random
import time

MAX_RETRY_AFTER_S = 120.0


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After value (a number of seconds or an HTTP date); None when it is absent or
    neither, so the caller falls back to its backoff."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def backoff_s(attempt: int, retry_after_s: float | None, base_s: float, max_s: float) -> float:
    """The wait before retry `attempt` (1-based)."""
    if retry_after_s is not None:
        return min(retry_after_s, MAX_RETRY_AFTER_S)
    ceiling = min(max_s, base_s * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)  # "equal jitter"
