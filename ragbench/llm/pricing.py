"""What LLM calls will cost before they are made, as each model's provider counts and prices them
(`ragbench.llm.providers`): litellm's tokenizers and price map for hosted models, tiktoken's count and
no price for in-process ones; unknown is None, never zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.llm.providers import model_provider, provider_for
from ragbench.llm.structured import with_schema_instruction
from ragbench.llm.types import (
    LLMRequest,
    LLMSettings,
    Message,
)


def as_messages(messages: Sequence[Mapping[str, Any]] | str) -> list[Message]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


def estimate_prompt_tokens(model: str, messages: Sequence[Mapping[str, Any]] | str) -> int:
    """Prompt tokens as the model's provider counts them unsent (litellm: the model's tokenizer where
    known, else tiktoken's; ``local/``: tiktoken's count, close to, not equal to, the GGUF tokenizer's)."""
    return model_provider(model).count_prompt_tokens(as_messages(messages))


def estimate_cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Price of that many tokens as the provider knows it; None if it does not know the model."""
    return model_provider(model).price_usd(prompt_tokens, completion_tokens)


def estimate_cost(
    settings: LLMSettings,
    requests: Sequence[LLMRequest | Sequence[Mapping[str, Any]] | str],
    *,
    completion_tokens_per_call: int | None = None,
) -> dict[str, Any]:
    """A `--dry-run` price for a batch: prompt tokens counted, completions assumed `max_tokens` each.

    Returns calls, prompt_tokens, completion_tokens, cost_usd (None when the price is unknown).
    """
    provider = provider_for(settings)
    per_call = settings.max_tokens if completion_tokens_per_call is None else completion_tokens_per_call
    prompt_tokens = 0
    for item in requests:
        request = item if isinstance(item, LLMRequest) else LLMRequest(messages=item)  # type: ignore[arg-type]
        messages = as_messages(request.messages)
        if request.response_schema is not None:
            messages = with_schema_instruction(messages, request.response_schema)
        prompt_tokens += provider.count_prompt_tokens(messages)
    completion_tokens = per_call * len(requests)
    return {
        "model": settings.model,
        "calls": len(requests),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": provider.price_usd(prompt_tokens, completion_tokens),
    }


def context_window(settings: LLMSettings) -> int | None:
    """How many tokens (prompt and reply) the model reads at most, as its provider knows it (a local
    model's ``n_ctx``, the value it will be loaded with; litellm's model map's ``max_input_tokens``);
    None when it does not."""
    return provider_for(settings).context_window()
