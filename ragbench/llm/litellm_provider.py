"""The hosted and self-hosted provider: every model string no registered provider claims goes to
`litellm.completion` (openai/..., anthropic/..., ollama/..., openai/<alias> with api_base).

litellm is imported on the first question asked of it (`ragbench.llm.runtime`), never at import: a dry
run of in-process models never loads it. Its pre-flight knows which provider litellm sees in a model
string and which environment variables that provider needs where the steps run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any, ClassVar

from ragbench.llm.provider import ErrorKind, LLMReadiness, Provider, ProviderReply
from ragbench.llm.redaction import is_secret_name
from ragbench.llm.runtime import get_litellm
from ragbench.llm.types import LLMConfigError, LLMSettings, Message

# Providers that speak the OpenAI protocol to whatever `api_base` says; a local server there needs no key.
OPENAI_COMPATIBLE = frozenset({"openai", "text-completion-openai", "hosted_vllm", "lm_studio", "llamafile"})


# Providers with a usable default address, for which litellm still lists "<X>_API_BASE" as missing.
DEFAULT_BASE_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})


# Sent to an explicit api_base of an OpenAI-compatible server unless the config names the key's variable.
PLACEHOLDER_KEY = "sk-no-key-required"


def provider_of(settings_model: str, api_base: str | None) -> str:
    """The provider litellm reads in a model string; `LLMConfigError` for one it does not know."""
    litellm = get_litellm()
    try:
        _, provider, _, _ = litellm.get_llm_provider(settings_model, api_base=api_base)
    except Exception as error:
        raise LLMConfigError(
            f"model {settings_model!r} is unknown to litellm: use '<provider>/<model>' such as "
            "openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, ollama/llama3, openai/<alias> with "
            "api_base, or local/qwen2.5-coder-1.5b-instruct"
        ) from error
    return str(provider)


@contextmanager
def process_environment(environment: Mapping[str, str]) -> Iterator[None]:
    """litellm reads only os.environ: show it the steps' variables for one check (pre-flight runs before
    any thread starts), then put the process's own back."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class LiteLLMProvider(Provider):
    """`litellm.completion` for every model string no other provider claims (it has no prefix of its own)."""

    name: ClassVar[str] = "litellm"

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(settings)
        self._api_key: str | None = None  # set by `open` where a key must travel (sends_placeholder_key)

    @property
    def model_name(self) -> str:
        return self.llm.model

    def sends_placeholder_key(self, provider: str) -> bool:
        """A self-hosted OpenAI-compatible server gets a dummy key unless the config names the variable
        holding its key: the user's real OpenAI key must never travel to a server that is not OpenAI."""
        return bool(self.llm.api_base) and provider in OPENAI_COMPATIBLE and self.llm.api_key_env is None

    def check_ready(self, environment: Mapping[str, str] | None = None) -> LLMReadiness:
        """litellm knows the provider, and the environment variables it needs are set (names only; values
        are never read out or printed) in `environment`, the variables the steps will see (default: this
        process's, which is where the local orchestrator runs them)."""
        settings = self.llm
        env = os.environ if environment is None else environment
        where = "" if environment is None else " where the steps run"
        litellm = get_litellm()
        provider = provider_of(settings.model, settings.api_base)
        if settings.api_key_env is not None and not env.get(settings.api_key_env, "").strip():
            raise LLMConfigError(
                f"model {settings.model!r}: api_key_env names {settings.api_key_env}, which is not set or "
                f"empty{where}"
            )
        prefix = provider.upper().replace("-", "_") + "_"
        empty = sorted(
            name
            for name, value in env.items()
            if name.startswith(prefix) and is_secret_name(name) and not value.strip()
        )
        if empty and not self.sends_placeholder_key(provider):
            raise LLMConfigError(
                f"model {settings.model!r} (provider {provider}): environment variable(s) {', '.join(empty)} "
                f"are set but empty{where}"
            )
        if not (settings.api_base and provider in OPENAI_COMPATIBLE):
            with nullcontext() if environment is None else process_environment(environment):
                required = litellm.validate_environment(model=settings.model, api_base=settings.api_base)
            missing = [
                name
                for name in required.get("missing_keys", [])
                if not (
                    name.endswith("_API_BASE") and (settings.api_base or provider in DEFAULT_BASE_PROVIDERS)
                )
            ]
            if missing:
                raise LLMConfigError(
                    f"model {settings.model!r} (provider {provider}) needs environment variable(s) "
                    f"{', '.join(missing)}, which are not set{where}"
                    + (
                        ""
                        if settings.api_base
                        else "; for a self-hosted OpenAI-compatible server set api_base"
                    )
                )
        return LLMReadiness(settings.model, provider)

    def open(self) -> None:
        readiness = self.check_ready()
        if self.llm.api_key_env is not None:
            self._api_key = os.environ[self.llm.api_key_env]
        elif self.sends_placeholder_key(readiness.provider):
            self._api_key = PLACEHOLDER_KEY  # the SDK insists on some key; a local server ignores it

    def json_mode(self) -> str:
        """json_schema where litellm says the provider supports it, else json_object (unless configured)."""
        if self.llm.json_mode != "auto":
            return self.llm.json_mode
        try:
            supported = get_litellm().supports_response_schema(model=self.llm.model)
        except Exception:
            supported = False
        return "json_schema" if supported else "json_object"

    def send(self, messages: list[Message], params: dict[str, Any]) -> ProviderReply:
        litellm = get_litellm()
        response = litellm.completion(
            messages=messages,
            **params,
            num_retries=0,  # retries are the client's, so they are counted
            max_retries=0,  # nor may the OpenAI SDK retry underneath
            drop_params=True,  # e.g. seed for providers without it
            **({} if self._api_key is None else {"api_key": self._api_key}),
        )
        usage = getattr(response, "usage", None)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:
            cost = None
        choice = response.choices[0] if response.choices else None
        return ProviderReply(
            text=None if choice is None else choice.message.content or "",
            finish_reason=None if choice is None else choice.finish_reason,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
        )

    def classify(self, error: Exception) -> ErrorKind:
        """litellm's exception types mapped to retry (transient), item (this request) or config (all)."""
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
            transient = status is None or int(status) >= 500 or int(status) in (408, 409, 429)
            return "retry" if transient else "item"
        raise error  # not a provider error: a bug, let it surface

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens as litellm counts them (the model's tokenizer where known, else tiktoken's)."""
        return int(get_litellm().token_counter(model=self.llm.model, messages=messages))

    def price_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """From litellm's bundled price table; None if it does not know the model."""
        try:
            prompt_cost, completion_cost = get_litellm().cost_per_token(
                model=self.llm.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        except Exception:
            return None
        return float(prompt_cost + completion_cost)

    def context_window(self) -> int | None:
        """litellm's model map's ``max_input_tokens``."""
        try:
            info = get_litellm().get_model_info(self.llm.model)
        except Exception:  # litellm raises for a model its map does not hold
            return None
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else None
