"""Pre-flight for an LLM: the provider litellm sees in a model string, the variables it needs where the
steps run, and a local model's GGUF, checked without making a call."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from ragbench.llm import local
from ragbench.llm.redaction import is_secret_name
from ragbench.llm.runtime import get_litellm
from ragbench.llm.types import (
    LLMConfigError,
    LLMSettings,
)

# Providers that speak the OpenAI protocol to whatever `api_base` says; a local server there needs no key.
OPENAI_COMPATIBLE = frozenset({"openai", "text-completion-openai", "hosted_vllm", "lm_studio", "llamafile"})


# Providers with a usable default address, for which litellm still lists "<X>_API_BASE" as missing.
DEFAULT_BASE_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})


# Sent to an explicit api_base of an OpenAI-compatible server unless the config names the key's variable.
PLACEHOLDER_KEY = "sk-no-key-required"


@dataclass(frozen=True)
class LLMReadiness:
    """What `check_llm_ready` found: enough to log which provider a run will use."""

    model: str
    provider: str


def provider_of(settings_model: str, api_base: str | None) -> str:
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


def json_mode(settings: LLMSettings) -> str:
    """The structured-output mechanism this model will get: json_schema, json_object or prompt."""
    if settings.json_mode != "auto":
        return settings.json_mode
    if settings.is_local:
        return "json_schema"  # llama.cpp grammar built from the schema
    litellm = get_litellm()
    try:
        supported = litellm.supports_response_schema(model=settings.model)
    except Exception:
        supported = False
    return "json_schema" if supported else "json_object"


def check_llm_ready(settings: LLMSettings, environment: Mapping[str, str] | None = None) -> LLMReadiness:
    """Pre-flight: fail in seconds, with a clear message, if the model string or its credentials are wrong.

    Checks that litellm knows the provider and that the environment variables it needs are set (names
    only; values are never read out or printed) in `environment`, the variables the steps will see
    (default: this process's, which is where the local orchestrator runs them). For ``local/`` models:
    the GGUF is known and llama-cpp-python is installed. Makes no LLM call.
    """
    if settings.is_local:
        local.check_local_model(local.local_model_name(settings.model))
        return LLMReadiness(settings.model, local.PROVIDER)
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
    if empty and not sends_placeholder_key(settings, provider):
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
            if not (name.endswith("_API_BASE") and (settings.api_base or provider in DEFAULT_BASE_PROVIDERS))
        ]
        if missing:
            raise LLMConfigError(
                f"model {settings.model!r} (provider {provider}) needs environment variable(s) "
                f"{', '.join(missing)}, which are not set{where}"
                + ("" if settings.api_base else "; for a self-hosted OpenAI-compatible server set api_base")
            )
    return LLMReadiness(settings.model, provider)


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


def sends_placeholder_key(settings: LLMSettings, provider: str) -> bool:
    """A self-hosted OpenAI-compatible server gets a dummy key unless the config names the variable
    holding its key: the user's real OpenAI key must never travel to a server that is not OpenAI."""
    return bool(settings.api_base) and provider in OPENAI_COMPATIBLE and settings.api_key_env is None
