"""Pre-flight for an LLM, asked of its provider (`ragbench.llm.providers`): the model string is known, the
credentials it needs are where the steps run, a local model's GGUF is there; no call is made."""

from __future__ import annotations

from collections.abc import Mapping

from ragbench.llm.provider import LLMReadiness
from ragbench.llm.providers import provider_class, provider_for
from ragbench.llm.types import LLMSettings


def check_llm_ready(settings: LLMSettings, environment: Mapping[str, str] | None = None) -> LLMReadiness:
    """Fail in seconds, with a clear message, if the model string or its credentials are wrong.

    `environment`: the variables the steps will see (default: this process's, which is where the local
    orchestrator runs them); values are never read out or printed. Makes no LLM call.
    """
    return provider_for(settings).check_ready(environment)


def checked_offline(settings: LLMSettings) -> bool:
    """Whether a dry run checks this model as the real run does (its provider needs no server or key)."""
    return provider_class(settings.model).checked_offline
