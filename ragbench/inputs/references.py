"""References that stay true: a case's reference answer or expected sources fetched when the run happens.

A stored reference goes stale when the knowledge behind the question changes (who is on call, the latest
release, how many incidents are open): a nightly gate would then fail a system that is right. A case
names instead where a person-verified truth comes from (`reference_from`, `expected_sources_from`): a
Python callable or an HTTP GET, whose output is the reference itself or the context the reference is
written from (`gives: context`, written by the caller's `write`, an LLM). Every run resolves them once,
records what it got, from where and when (`ReferenceResolutions`), and a source that fails fails its
case, with the reason, never the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import jmespath
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from tqdm.auto import tqdm

from ragbench.hashing import canonical_json, short_hash
from ragbench.inputs.callables import checked_jmespath, checked_target, load_callable
from ragbench.inputs.conversation import question_in_context

ReferenceField = Literal["reference_answer", "expected_sources"]


class ReferenceFetchError(RuntimeError):
    """One case's dynamic reference could not be fetched or used: its case fails with this reason."""


class ReferenceSource(BaseModel):
    """Where one case's truth is fetched at run time: exactly one of `python` and `url`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Annotated[str | None, AfterValidator(checked_target)] = Field(
        default=None,
        description="'package.module:function', importable where the run's steps run, called with `args` "
        "as keyword arguments; returns a string (or, for expected_sources_from, a list of sources)",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the callable")
    url: str | None = Field(default=None, description="http(s) URL fetched with GET")
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="header -> environment variable holding its value (read where the step runs, never "
        "stored), e.g. {Authorization: STATUS_API_TOKEN}",
    )
    path: Annotated[str | None, AfterValidator(checked_jmespath)] = Field(
        default=None,
        description="JMESPath into the reply's JSON (url), or into the callable's returned mapping; "
        "none: the whole reply text (url) or the returned value",
    )
    gives: Literal["answer", "context"] = Field(
        default="answer",
        description="answer: the output is the reference itself; context: the reference is written from "
        "the output by the grid's first reader model (a prompt of its own, cached by the context's text)",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="seconds an HTTP fetch may take")

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        if url is None:
            return url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url {url!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise ValueError("url: a credential must not ride in the URL; name it in headers_env")
        return url

    @model_validator(mode="after")
    def _one_kind(self) -> ReferenceSource:
        if (self.python is None) == (self.url is None):
            raise ValueError("a reference source gives exactly one of python and url")
        if self.python is not None and self.headers_env:
            raise ValueError("headers_env applies to a url source only")
        if self.url is not None and self.args:
            raise ValueError("args apply to a python source only (put a url's parameters in the url)")
        return self

    @property
    def where(self) -> str:
        """The source for people: the callable with its arguments, or the URL without its query."""
        if self.python is not None:
            arguments = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
            return f"{self.python}({arguments})"
        return str(self.url).split("?", 1)[0]

    def missing_environment(self, environment: Mapping[str, str]) -> list[str]:
        """The header variables unset or empty in `environment` (names only)."""
        return [name for name in self.headers_env.values() if not environment.get(name, "").strip()]

    def fetch(self, environment: Mapping[str, str] | None = None) -> Any:
        """The source's output, read where this runs; `ReferenceFetchError` says why it failed."""
        environment = os.environ if environment is None else environment
        value = self._call() if self.python is not None else self._get(environment)
        if self.path is not None:
            value = jmespath.search(self.path, value)
        return value

    def _call(self) -> Any:
        try:
            function = load_callable(str(self.python))
        except ImportError as error:
            raise ReferenceFetchError(str(error)) from None
        try:
            return function(**self.args)
        except Exception as error:  # the user's function may fail in any way: its case fails, not the run
            raise ReferenceFetchError(f"{self.where} raised {type(error).__name__}: {error}") from None

    def _get(self, environment: Mapping[str, str]) -> Any:
        import httpx

        if missing := self.missing_environment(environment):
            raise ReferenceFetchError(
                f"environment variable(s) {', '.join(missing)} not set where the run's steps run"
            )
        secrets = {header: environment[name] for header, name in self.headers_env.items()}
        try:
            response = httpx.get(
                str(self.url), headers=secrets, timeout=self.timeout_s, follow_redirects=True
            )
        except httpx.HTTPError as error:
            raise ReferenceFetchError(
                f"GET {self.where}: {type(error).__name__}: {_hidden(str(error), secrets)}"
            ) from None
        if response.status_code >= 400:
            text = _hidden(response.text[:200], secrets)
            raise ReferenceFetchError(f"GET {self.where} answered HTTP {response.status_code}: {text}")
        if self.path is None:
            return response.text
        try:
            return response.json()
        except ValueError:
            raise ReferenceFetchError(
                f"GET {self.where}: the reply is not JSON, so path {self.path!r} cannot apply"
            ) from None


def _hidden(text: str, secrets: Mapping[str, str]) -> str:
    """An error text with every header secret's value taken out."""
    for value in secrets.values():
        text = text.replace(value, "[secret]")
    return text


class ResolvedReference(BaseModel):
    """What one run fetched for one case's field: the value (None when it failed), from where, when."""

    case_id: str
    field: ReferenceField
    source: str  # ReferenceSource.where
    gives: Literal["answer", "context"]
    resolved_at: str  # ISO time in UTC
    value: str | list[str] | None = None
    context: str | None = None  # what a `gives: context` source returned, the reference was written from
    error: str | None = None


class ReferenceResolutions(BaseModel):
    """Every dynamic reference of one run, as the `references` artifact keeps them."""

    resolutions: list[ResolvedReference] = []

    def failures(self) -> dict[str, str]:
        """case id -> why its reference could not be resolved."""
        failed: dict[str, str] = {}
        for item in self.resolutions:
            if item.error is not None:
                failed[item.case_id] = "; ".join(
                    filter(None, [failed.get(item.case_id), f"{item.field}: {item.error}"])
                )
        return failed

    def digests(self) -> dict[str, str]:
        """case id -> a digest of everything resolved for it: the case's identity for this run, which the
        gate compares with the baseline's to say when a reference changed."""
        by_case: dict[str, list[Any]] = {}
        for item in sorted(self.resolutions, key=lambda r: (r.case_id, r.field)):
            by_case.setdefault(item.case_id, []).append([item.field, item.value, item.error is not None])
        return {case: short_hash(canonical_json(parts)) for case, parts in by_case.items()}

    def rows(self) -> list[dict[str, Any]]:
        """One row per resolved field, for the report and the CSV."""
        return [
            {
                "case": r.case_id,
                "field": r.field,
                "source": r.source,
                "value": ", ".join(r.value) if isinstance(r.value, list) else r.value,
                "written_from_context": r.context is not None,
                "resolved_at": r.resolved_at,
                "error": r.error or "",
            }
            for r in self.resolutions
        ]


# (question, context) -> the reference written from the context; raises on a failed call.
Writer = Callable[[str, str], str]


def _as_text(value: Any, where: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ReferenceFetchError(
            f"{where} gave {type(value).__name__} {str(value)[:80]!r}, not a non-empty text"
        )
    return value.strip()


def _as_sources(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s.strip() for s in value):
        raise ReferenceFetchError(f"{where} gave {str(value)[:80]!r}, not a non-empty list of sources")
    return [source.strip() for source in value]


def resolve(
    case_id: str,
    question: str,
    field: ReferenceField,
    source: ReferenceSource,
    write: Writer | None,
    environment: Mapping[str, str] | None = None,
) -> ResolvedReference:
    """One field of one case, fetched now (and written from its context when the source gives one)."""
    record = ResolvedReference(
        case_id=case_id,
        field=field,
        source=source.where,
        gives=source.gives,
        resolved_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    try:
        output = source.fetch(environment)
        if field == "expected_sources":
            return record.model_copy(update={"value": _as_sources(output, source.where)})
        text = _as_text(output, source.where)
        if source.gives == "answer":
            return record.model_copy(update={"value": text})
        if write is None:
            raise ReferenceFetchError(
                "gives: context, but the run has no reader model to write the reference"
            )
        try:
            written = write(question, text)
        except Exception as error:  # a failed LLM call: the case fails with the reason
            raise ReferenceFetchError(f"writing the reference from the context failed: {error}") from None
        return record.model_copy(update={"value": _as_text(written, "the reference writer"), "context": text})
    except ReferenceFetchError as error:
        return record.model_copy(update={"error": str(error)})


def dynamic_fields(case: Any) -> list[tuple[ReferenceField, ReferenceSource]]:
    """The fields of a case that are fetched at run time."""
    fields: list[tuple[ReferenceField, ReferenceSource]] = []
    if case.reference_from is not None:
        fields.append(("reference_answer", case.reference_from))
    if case.expected_sources_from is not None:
        fields.append(("expected_sources", case.expected_sources_from))
    return fields


def resolve_cases(
    cases: Sequence[Any], write: Writer | None, environment: Mapping[str, str] | None = None
) -> tuple[list[Any], ReferenceResolutions]:
    """The cases with every dynamic field filled in from its source (a failed one empties the field and sets
    `reference_error`), and what was resolved."""
    resolved, records = [], []
    for case in tqdm(cases, desc="references", unit="case", disable=None):
        fields = dynamic_fields(case)
        if not fields:
            resolved.append(case)
            continue
        found = [
            resolve(
                case.id,
                question_in_context(case.question, getattr(case, "history", ())),
                field,
                source,
                write,
                environment,
            )
            for field, source in fields
        ]
        records += found
        update: dict[str, Any] = {r.field: r.value if r.error is None else None for r in found}
        if "expected_sources" in update and update["expected_sources"] is None:
            update["expected_sources"] = []
        errors = [f"{r.field}: {r.error}" for r in found if r.error is not None]
        update["reference_error"] = "; ".join(errors) or None
        resolved.append(case.model_copy(update=update))
    return resolved, ReferenceResolutions(resolutions=records)
