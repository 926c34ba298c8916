"""What an LLM provider is to the client: one interface behind which litellm, the in-process ``local/``
models and any registered provider send a request and answer what a run asks about a model before it
makes one (is it ready, what does a prompt cost, how long may it be, does it run in this process).

The client (`ragbench.llm.client`) keeps what every provider shares: the cache, retries, the spend cap,
concurrency and structured-output re-asks. A provider sends one request and says how its failures are
classified; it holds the `LLMSettings` of the client it serves as `llm`. Providers are found by the prefix of
the model string (``local/...``, a registered ``toy/...``) in `ragbench.llm.providers`; litellm serves
every other string.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from ragbench.llm.errors import retry_after_s
from ragbench.llm.types import LLMSettings, Message
from ragbench.plugins import Plugin

# How the client treats a failed attempt: retry it, fail this request only, or stop (every call would fail).
ErrorKind = Literal["retry", "item", "config"]


@dataclass(frozen=True)
class LLMReadiness:
    """What a provider's pre-flight found: enough to log which provider a run will use."""

    model: str
    provider: str


@dataclass(frozen=True)
class ProviderReply:
    """One answered request. `text` None: the provider answered without a choice. `cost_usd` None: the
    provider cannot price it (unknown must not look free)."""

    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class Provider(Plugin):
    """One kind of LLM backend, registered by `name`: the model-string prefix it serves (``name/<model>``).

    A subclass sends one request (`send`), classifies its failures (`classify`), checks it can run
    (`check_ready`) and counts and prices prompts (`count_prompt_tokens`, `price_usd`); the class
    attributes answer what the plan asks without a call.
    """

    # Computes in this process (one call at a time: the client sends no two at once).
    in_process: ClassVar[bool] = False
    # Its readiness needs no server and no key, so a dry run checks it as the real run would.
    checked_offline: ClassVar[bool] = False

    def __init__(self, settings: LLMSettings) -> None:
        self.llm = settings

    @property
    def model_name(self) -> str:
        """The model string without this provider's prefix (litellm reads the whole string)."""
        return self.llm.model.removeprefix(f"{self.name}/")

    @classmethod
    def resolve_model_file(cls, model: str, resolve: Callable[[str], str]) -> str:
        """`model` with the file it names passed through `resolve` (a config's relative path made absolute);
        by default a model string names no file."""
        return model

    @abstractmethod
    def check_ready(self, environment: Mapping[str, str] | None = None) -> LLMReadiness:
        """Pre-flight without a call: raise `LLMConfigError` if a request cannot work. `environment`: the
        variables where the steps run (default: this process's)."""

    def open(self) -> None:
        """Get ready for the first real call (credentials read, a model loaded); by default the pre-flight."""
        self.check_ready()

    @abstractmethod
    def send(self, messages: list[Message], params: dict[str, Any]) -> ProviderReply:
        """One request, no retry. `params`: model, temperature, max_tokens, timeout, seed (if set),
        api_base (if set), response_format (if structured), and the settings' `extra`."""

    def classify(self, error: Exception) -> ErrorKind:
        """What a failed `send` means; an error the provider does not know is a bug and is raised."""
        if isinstance(error, TimeoutError | ConnectionError):
            return "retry"
        raise error

    def retry_after_s(self, error: Exception) -> float | None:
        """The wait the server asked for (a Retry-After header), if any."""
        return retry_after_s(error)

    def json_mode(self) -> str:
        """The structured-output mechanism requests get: json_schema, json_object or prompt."""
        return "json_object" if self.llm.json_mode == "auto" else self.llm.json_mode

    def response_format(self, mode: str, schema: type[BaseModel], schema_json: dict[str, Any]) -> Any | None:
        """The ``response_format`` parameter for `mode` (OpenAI's form); None sends none."""
        if mode == "json_schema":
            name = "".join(c if c.isalnum() or c in "_-" else "_" for c in schema.__name__)[:64]
            return {
                "type": "json_schema",
                "json_schema": {"name": name or "response", "schema": schema_json, "strict": False},
            }
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    @abstractmethod
    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """The prompt tokens `messages` will be charged, as close as the provider can count them unsent."""

    def price_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What that many tokens cost; None when the provider does not know."""
        return None

    def context_window(self) -> int | None:
        """Tokens (prompt and reply) the model reads at most; None when unknown."""
        return None
