"""The project's single LLM client: every LLM call (reader, judge, ...) goes through `LLMClient`.

Importing this package is cheap; litellm (seconds to import) and llama-cpp-python load on first use.

    settings = LLMSettings(model="local/qwen2.5-coder-1.5b-instruct")
    client = LLMClient(settings)
    result = client.complete([{"role": "user", "content": "..."}], response_schema=Verdict)
    if result.ok: use(result.parsed)
"""

from ragbench import submodules_as_attributes
from ragbench.llm.cache import ResultCache, default_cache_dir
from ragbench.llm.client import (
    LLMClient,
    LLMReadiness,
    check_llm_ready,
    estimate_cost,
    estimate_cost_usd,
    estimate_prompt_tokens,
)
from ragbench.llm.local import unload_local_models
from ragbench.llm.structured import extract_json_object, parse_structured
from ragbench.llm.types import (
    LLMConfigError,
    LLMRequest,
    LLMResult,
    LLMSettings,
    LLMStats,
)

__all__ = [
    "LLMClient",
    "LLMConfigError",
    "LLMReadiness",
    "LLMRequest",
    "LLMResult",
    "LLMSettings",
    "LLMStats",
    "ResultCache",
    "check_llm_ready",
    "default_cache_dir",
    "estimate_cost",
    "estimate_cost_usd",
    "estimate_prompt_tokens",
    "extract_json_object",
    "parse_structured",
    "unload_local_models",
]

__getattr__ = submodules_as_attributes(__name__)
