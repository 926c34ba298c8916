"""The LLM providers a model string can name, and the one that serves it: ``<name>/<model>`` goes to the
provider registered as ``<name>`` (built in: ``local``; another package's through the entry point group
``ragbench.llm_providers``; code that embeds ragbench, or a test, by `PROVIDERS.register`), every other
string to litellm. One registry, `ragbench.plugins.Registry`, as for scorers and retrievers.
"""

from __future__ import annotations

from ragbench.llm.litellm_provider import LiteLLMProvider
from ragbench.llm.local import LocalProvider
from ragbench.llm.provider import Provider
from ragbench.llm.types import LLMSettings
from ragbench.plugins import Registry

PROVIDER_ENTRY_POINTS = "ragbench.llm_providers"
BUILT_IN: dict[str, type[Provider]] = {LocalProvider.name: LocalProvider}  # litellm serves the rest

# Every provider a model string may name: `register(ProviderClass)` adds one in this process (a test, code
# that embeds ragbench), `unregister(name)` takes it away; entry points are found on the import path.
PROVIDERS: Registry[Provider] = Registry("LLM provider", PROVIDER_ENTRY_POINTS, Provider, BUILT_IN)


def provider_class(model: str) -> type[Provider]:
    """The provider of a model string: the registered one its prefix names, else litellm."""
    prefix, slash, _ = model.partition("/")
    return PROVIDERS.available().get(prefix, LiteLLMProvider) if slash else LiteLLMProvider


def provider_for(settings: LLMSettings) -> Provider:
    """The provider that serves `settings`, holding them."""
    return provider_class(settings.model)(settings)


def model_provider(model: str) -> Provider:
    """The provider of a bare model string, with that model's default settings (for estimates)."""
    return provider_for(LLMSettings(model=model))
