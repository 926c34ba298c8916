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


# Query parameters that carry a credential in the URLs of common services, beyond what `is_credential_key`
# finds (api keys, secrets, passwords, *_token): Google's `key`, Azure Functions' `code`, Azure SAS `sig`,
# AWS and GCS signed URLs, and short names such as `pwd` and `auth`.
_CREDENTIAL_QUERY = re.compile(
    r"(?i)^(key|code|sig|signature|pass|pwd|auth|private[-_]?key"
    r"|x-amz-(signature|credential|security-token)|x-goog-(signature|credential))$"
)


def url_credentials(url: str) -> list[str]:
    """What in `url` is a credential: user info (`user:password@`, or a user name alone, which some
    services use as the key) and credential-named query parameters (by name, never by value)."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = ["user info (user:password@)"] if parts.username or parts.password else []
    found += [
        f"query parameter {name!r}"
        for name, _ in parse_qsl(parts.query, keep_blank_values=True)
        if _CREDENTIAL_QUERY.search(name) or is_credential_key(name)
    ]
    return found


def refuse_url_credentials(url: str, where: str, instead: str) -> str:
    """`url`, or ValueError naming what carries a credential and where the secret should go `instead`:
    every URL a config holds is stored with the run, so none may carry one."""
    if found := url_credentials(url):
        raise ValueError(
            f"{where} carries a credential ({', '.join(found)}): a config is stored with every run, so "
            f"{instead}"
        )
    return url


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
