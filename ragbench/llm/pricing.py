"""What LLM calls will cost before they are made: prompt tokens by the model's tokenizer where litellm
knows it, prices from litellm's price map; unknown is None, never zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.llm import local
from ragbench.llm.runtime import get_litellm
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
    """Prompt tokens as litellm counts them (the model's tokenizer where known, else tiktoken's).

    For ``local/`` models this is tiktoken's count: close to, not equal to, the GGUF tokenizer's.
    """
    litellm = get_litellm()
    name = local.local_model_name(model) if model.startswith(local.LOCAL_PREFIX) else model
    return int(litellm.token_counter(model=name, messages=as_messages(messages)))


def estimate_cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Price of that many tokens from litellm's bundled price table; None if it does not know the model."""
    if model.startswith(local.LOCAL_PREFIX):
        return 0.0
    litellm = get_litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:
        return None
    return float(prompt_cost + completion_cost)


def estimate_cost(
    settings: LLMSettings,
    requests: Sequence[LLMRequest | Sequence[Mapping[str, Any]] | str],
    *,
    completion_tokens_per_call: int | None = None,
) -> dict[str, Any]:
    """A `--dry-run` price for a batch: prompt tokens counted, completions assumed `max_tokens` each.

    Returns calls, prompt_tokens, completion_tokens, cost_usd (None when the price is unknown).
    """
    per_call = settings.max_tokens if completion_tokens_per_call is None else completion_tokens_per_call
    prompt_tokens = 0
    for item in requests:
        request = item if isinstance(item, LLMRequest) else LLMRequest(messages=item)  # type: ignore[arg-type]
        messages = as_messages(request.messages)
        if request.response_schema is not None:
            messages = with_schema_instruction(messages, request.response_schema)
        prompt_tokens += estimate_prompt_tokens(settings.model, messages)
    completion_tokens = per_call * len(requests)
    return {
        "model": settings.model,
        "calls": len(requests),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": estimate_cost_usd(settings.model, prompt_tokens, completion_tokens),
    }


def context_window(settings: LLMSettings) -> int | None:
    """How many tokens (prompt and reply) the model reads at most: a local model's ``n_ctx`` (the value it
    will be loaded with), else litellm's model map's ``max_input_tokens``; None when neither knows it."""
    if settings.is_local:
        return local.context_size()
    try:
        info = get_litellm().get_model_info(settings.model)
    except Exception:  # litellm raises for a model its map does not hold
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None
