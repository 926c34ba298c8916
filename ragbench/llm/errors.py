"""How a failed provider call is classified (retryable, a setup problem, an invalid reply) and described
without credentials."""

from __future__ import annotations

from ragbench.llm.redaction import redact
from ragbench.llm.retry import parse_retry_after
from ragbench.llm.runtime import get_litellm
from ragbench.llm.types import (
    LLMConfigError,
)


def short_error(error: BaseException, limit: int = 300) -> str:
    """One-line, length-capped, credential-free description of an error (results may be saved)."""
    text = redact(" ".join(str(error).split()))
    return f"{type(error).__name__}: {text[:limit]}"


def classify_error(error: BaseException) -> str:
    """'retry' (transient), 'item' (this request only: fail it) or 'config' (raise: all would fail)."""
    litellm = get_litellm()
    if isinstance(error, LLMConfigError):
        return "config"
    if isinstance(error, litellm.ContextWindowExceededError | litellm.ContentPolicyViolationError):
        return "item"
    if isinstance(
        error,
        litellm.AuthenticationError
        | litellm.PermissionDeniedError
        | litellm.NotFoundError
        | litellm.BadRequestError
        | litellm.UnprocessableEntityError,
    ):
        return "config"
    if "Missing credentials" in str(error) or "api_key client option must be set" in str(error):
        return "config"  # litellm reports a missing key as a 500
    if isinstance(
        error,
        litellm.RateLimitError
        | litellm.Timeout
        | litellm.APIConnectionError
        | litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError,
    ):
        return "retry"
    status = getattr(error, "status_code", None)
    if isinstance(error, litellm.APIError | litellm.OpenAIError):
        return "retry" if status is None or int(status) >= 500 or int(status) in (408, 409, 429) else "item"
    raise error  # not a provider error: a bug, let it surface


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
