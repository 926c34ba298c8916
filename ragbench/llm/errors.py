"""How a failed provider call is described without credentials, and the wait its server asked for (how it
is classified is each provider's, `ragbench.llm.provider.Provider.classify`)."""

from __future__ import annotations

from ragbench.llm.redaction import redact
from ragbench.llm.retry import parse_retry_after


def short_error(error: BaseException, limit: int = 300) -> str:
    """One-line, length-capped, credential-free description of an error (results may be saved)."""
    text = redact(" ".join(str(error).split()))
    return f"{type(error).__name__}: {text[:limit]}"


def retry_after_s(error: BaseException) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on the error, if the server sent one."""
    for headers in (getattr(error, "litellm_response_headers", None), getattr(error, "headers", None)):
        if not headers:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return max(0.0, float(millis) / 1000)
            value = headers.get("retry-after")
        except AttributeError:
            continue
        if (seconds := parse_retry_after(value)) is not None:
            return seconds
    return None
