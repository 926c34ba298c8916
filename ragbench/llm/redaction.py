"""Secrets never leave in text: provider errors, log records and tracebacks pass through `redact`.

A provider (or a proxy in front of it) may echo the request's headers in an error body, so any text
that came from a provider is redacted before it is stored, logged or raised.
"""

from __future__ import annotations

import logging
import os
import re

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
_MIN_SECRET_LENGTH = 8
# Credentials that have a recognisable shape even when they are not in our environment.
_SHAPED_SECRETS = re.compile(
    r"(?i)((?:bearer\s+)|(?:(?:api[-_]?key|authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?))[\w.~+/=-]{8,}"
    r"|sk-[\w-]{8,}"
)


# Names of config keys or headers that carry credentials (narrower than for environment variables:
# `max_completion_tokens` is a setting, `session_token` a credential).
_CREDENTIAL_KEY = re.compile(
    r"(?i)(api[-_]?key|secret|passw(or)?d|credential|authorization|access[-_]?key|bearer|cookie"
    r"|(^|[-_])(auth|session|access|refresh|id)?[-_]?token$)"
)


def is_secret_name(name: str) -> bool:
    """An environment variable whose value must never appear in text."""
    return any(part in name.upper() for part in SECRET_NAME_PARTS)


def is_credential_key(name: str) -> bool:
    """A config key or header name whose value is a credential."""
    return bool(_CREDENTIAL_KEY.search(name))


def redact(text: str) -> str:
    """Replace every credential-like environment value, and credential-shaped strings, in `text`."""
    for name, value in os.environ.items():
        if len(value) >= _MIN_SECRET_LENGTH and is_secret_name(name) and value in text:
            text = text.replace(value, f"<{name}>")
    return _SHAPED_SECRETS.sub(lambda match: (match.group(1) or "") + "<redacted>", text)


class RedactingFilter(logging.Filter):
    """Redacts a record's message (and its arguments) before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def redact_logs_of(*logger_names: str) -> None:
    """Install the filter on loggers whose records may carry provider text (litellm, httpx, openai)."""
    for name in logger_names:
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in log.filters):
            log.addFilter(RedactingFilter())
