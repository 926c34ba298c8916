"""ZenML's cache key covers a step's own source only; these policies add the core code it runs."""

from types import ModuleType

from zenml.config.cache_policy import CachePolicy


def cache_on(*modules: ModuleType) -> CachePolicy:
    """Invalidate a step's cache whenever the core modules doing its work change."""
    return CachePolicy(source_dependencies=list(modules))
