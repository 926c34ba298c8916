"""The RAG systems a team already runs, as the config declares them (`systems`): an HTTP endpoint with its
request and reply shape, a Python callable, or the answers the deployed system logged in the traces the
eval cases were read from (`traces: true`, never asked again), with a version, a source rule and call
limits; credentials never ride in the config."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from ragbench.inputs.callables import checked_jmespath, checked_target
from ragbench.llm.redaction import is_credential_key, refuse_url_credentials
from ragbench.section import Section

QUESTION_PLACEHOLDER = "{question}"
# A body string that is exactly this becomes the conversation as OpenAI-style messages (earlier turns, then
# the question as the last user message): JSON in a POST body, its JSON text in a GET query.
MESSAGES_PLACEHOLDER = "{messages}"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ExternalSystemError(RuntimeError):
    """The system cannot be used at all (unreachable, refusing our credentials, a wrong answer path):
    every further call would fail the same way, so the run stops with this one message."""


class SourceMatch(Section):
    """How a source id the system returns becomes a knowledge-base source, to compare with a case's
    `expected_sources`: as is, by its last path component, or through a regular expression."""

    rule: Literal["exact", "basename", "regex"] = Field(
        default="exact", description="exact; basename (last path component, both sides); regex (pattern)"
    )
    pattern: str | None = Field(
        default=None, description="regex rule: matched against the whole returned source (re.fullmatch)"
    )
    replace: str = Field(default=r"\1", description=r"regex rule: what a match becomes (\1 = first group)")

    @model_validator(mode="after")
    def _check_pattern(self) -> SourceMatch:
        if (self.rule == "regex") != (self.pattern is not None):
            raise ValueError("source_match: `pattern` is needed by the regex rule, and only by it")
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as error:
                raise ValueError(f"source_match.pattern {self.pattern!r}: {error}") from None
            if compiled.groups == 0 and "\\" in self.replace:
                raise ValueError(
                    f"source_match.replace {self.replace!r} refers to a group; the pattern has none"
                )
        return self

    def source_id(self, returned: str) -> str:
        """The knowledge-base source a returned id stands for; unchanged when the regex does not match."""
        if self.rule == "basename":
            return PurePosixPath(returned.split("?", 1)[0].split("#", 1)[0].replace("\\", "/")).name
        if self.rule == "regex":
            assert self.pattern is not None
            match = re.fullmatch(self.pattern, returned)
            return match.expand(self.replace) if match else returned
        return returned

    def expected_id(self, expected: str) -> str:
        """The form an expected source is compared in (basename compares last components on both sides)."""
        return PurePosixPath(expected).name if self.rule == "basename" else expected


class HttpSystem(Section):
    """An HTTP endpoint: each question goes in through `body` (every string in it has `{question}`
    replaced), the reply's JSON is read with JMESPath expressions (jmespath.org)."""

    url: str = Field(description="http(s) URL of the endpoint")
    method: Literal["POST", "GET"] = Field(
        default="POST", description="POST sends body as JSON; GET as query"
    )
    headers: dict[str, str] = Field(default_factory=dict, description="headers that carry no secret")
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="header -> environment variable holding its value (read where the step runs, "
        "redacted everywhere, never stored), e.g. {Authorization: MY_RAG_TOKEN}",
    )
    body: Any = Field(
        default_factory=lambda: {"question": QUESTION_PLACEHOLDER},
        description="the request's JSON (POST) or query (GET): every string has {question} replaced; a "
        "string that is exactly {messages} becomes the conversation as OpenAI-style messages (earlier turns, "
        "then the question); without one, a case with earlier turns adds them as a `messages` field",
    )
    answer: str = Field(default="answer", description="JMESPath of the answer text in the reply")
    contexts: str | None = Field(
        default="contexts[*].text", description="JMESPath of the passages' texts (a list); null = none"
    )
    sources: str | None = Field(
        default="contexts[*].source",
        description="JMESPath of the passages' source ids (a list, in rank order); null = none",
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        """The URL is stored with the run (a step parameter): a credential must not ride in it."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url {url!r} is not an http(s) URL")
        return refuse_url_credentials(
            url, "url", "send the credential as a header from the environment (http.headers_env)"
        )

    @field_validator("headers")
    @classmethod
    def _no_secret_in_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        if secret := [name for name in headers if is_credential_key(name)]:
            raise ValueError(
                f"headers {secret} carry credentials: name their environment variables in headers_env "
                "instead, so the values are never written into a config, an artifact or a log"
            )
        return headers

    @field_validator("answer", "contexts", "sources")
    @classmethod
    def _check_path(cls, path: str | None) -> str | None:
        return checked_jmespath(path)

    @model_validator(mode="after")
    def _question_in_body(self) -> HttpSystem:
        if QUESTION_PLACEHOLDER not in json.dumps(self.body):
            raise ValueError(f"body must contain {QUESTION_PLACEHOLDER} where the question goes")
        if self.method == "GET" and not (
            isinstance(self.body, dict) and all(isinstance(v, str) for v in self.body.values())
        ):
            raise ValueError("a GET body is its query: a mapping of strings")
        return self


class ExternalSystem(Section):
    """One system of `systems`: exactly one of `http`, `python` and `traces`."""

    name: str = Field(description="the cell's name: its `external` column, its id in compare and the gate")
    http: HttpSystem | None = Field(default=None, description="an HTTP endpoint (see HttpSystem)")
    python: str | None = Field(
        default=None,
        description="'package.module:function', importable where the step runs: (question) -> "
        "{answer, contexts: [{text, source}]}",
    )
    traces: bool = Field(
        default=False,
        description="true: the answers and retrieved documents logged in the traces eval_cases.traces reads "
        "(scored without asking the system again)",
    )
    version: str | None = Field(
        default=None,
        description="part of the call cache key: a new version (e.g. a deploy's git sha) is asked afresh",
    )
    version_env: str | None = Field(
        default=None, description="read the version from this environment variable where the step runs"
    )
    source_match: SourceMatch = SourceMatch()
    concurrency: int = Field(default=4, ge=1, description="requests in flight at once")
    timeout_s: float = Field(default=60.0, gt=0, description="seconds per request")
    max_retries: int = Field(default=3, ge=0, description="retries of a failed call (429, 5xx, timeouts)")
    max_consecutive_failures: int = Field(
        default=8, ge=1, description="calls in a row that exhaust their retries before the run stops"
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(f"system name {name!r}: letters, digits, '_', '-', '.' only (at most 64)")
        return name

    @field_validator("python")
    @classmethod
    def _check_target(cls, target: str | None) -> str | None:
        return checked_target(target)

    @model_validator(mode="after")
    def _one_kind(self) -> ExternalSystem:
        if sum((self.http is not None, self.python is not None, self.traces)) != 1:
            raise ValueError(f"system {self.name}: give exactly one of http, python and traces: true")
        if self.version is not None and self.version_env is not None:
            raise ValueError(f"system {self.name}: give version or version_env, not both")
        return self

    @property
    def kind(self) -> str:
        return "http" if self.http is not None else "python" if self.python is not None else "traces"

    @property
    def endpoint(self) -> str:
        """Where answers come from, for people: the URL without its query, the callable, or the traces."""
        if self.traces:
            return "logged answers"
        return self.http.url.split("?", 1)[0] if self.http is not None else str(self.python)

    def identity(self) -> dict[str, Any]:
        """What decides an answer: the endpoint and request shape (header names, never their values), or
        the callable. Version, retries and concurrency are not part of it."""
        if self.http is not None:
            return {"http": self.http.model_dump(mode="json", exclude={"headers_env"})}
        return {"traces": True} if self.traces else {"python": self.python}

    def environment_names(self) -> list[str]:
        """Variables the step that calls the system needs."""
        names = list(self.http.headers_env.values()) if self.http is not None else []
        return names + ([self.version_env] if self.version_env else [])

    def resolved_version(self, environment: Mapping[str, str] | None = None) -> str | None:
        environment = os.environ if environment is None else environment
        if self.version_env is None:
            return self.version
        value = environment.get(self.version_env, "").strip()
        if not value:
            raise ExternalSystemError(f"system {self.name}: version_env {self.version_env} is not set")
        return value


def missing_environment(system: ExternalSystem, environment: Mapping[str, str]) -> list[str]:
    """The variables the system needs that are unset or empty in `environment` (names only)."""
    return [name for name in system.environment_names() if not str(environment.get(name, "")).strip()]
