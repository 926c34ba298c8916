"""The offline default LLM for real: Qwen2.5-Coder-1.5B (GGUF from PyPI) in llama.cpp, through the client.

Slow-ish (model provisioning on first run, then seconds per call on 2 cores) and needs
llama-cpp-python; it fails rather than skips when something is missing, so a broken offline path
cannot hide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ragbench.generation.references import reference_writer
from ragbench.llm.client import LLMClient
from ragbench.llm.readiness import check_llm_ready
from ragbench.llm.types import LLMSettings

MODEL = "local/qwen2.5-coder-1.5b-instruct"


class Capital(BaseModel):
    country: str
    capital: str
    confidence: Literal["low", "medium", "high"]
    population_millions: float = Field(ge=0)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> LLMClient:
    settings = LLMSettings(model=MODEL, max_tokens=64)
    readiness = check_llm_ready(settings)
    assert readiness.provider == "local"
    return LLMClient(settings, cache_location=tmp_path_factory.mktemp("llm-cache"), progress=False)


def test_answers_a_trivial_question(client: LLMClient) -> None:
    result = client.complete(
        [
            {"role": "system", "content": "Answer in as few words as possible."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    assert result.ok, result.error
    assert "paris" in result.text.lower()
    assert result.prompt_tokens > 10 and 0 < result.completion_tokens <= 64
    assert result.latency_s > 0 and result.cost_usd == 0.0 and result.cost_known
    assert result.attempts == 1 and not result.cached

    again = client.complete(
        [
            {"role": "system", "content": "Answer in as few words as possible."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    assert again.cached and again.text == result.text


def test_returns_a_schema_valid_object(client: LLMClient) -> None:
    result = client.complete("Give the capital of Japan and its population.", response_schema=Capital)
    assert result.ok, f"{result.error}: {result.text!r}"
    assert result.parsed is not None
    parsed = Capital.model_validate(result.parsed)
    assert parsed.capital.lower().startswith("tokyo")
    assert result.json_reasks <= 1


def test_batch_is_serialised_and_ordered(client: LLMClient) -> None:
    results = client.complete_many(
        [f"Reply with the single digit {d} and nothing else." for d in (3, 7)], desc="local batch"
    )
    assert [r.ok for r in results] == [True, True]
    assert "3" in results[0].text and "7" in results[1].text
    assert client.effective_concurrency == 1


def test_prompt_beyond_the_context_window_fails_only_that_request(client: LLMClient, tmp_path: Path) -> None:
    result = client.complete("word " * 9000 + "\nSay OK.")
    assert result.error is not None and "context" in result.error.lower()
    assert client.complete("Reply with OK.").ok


def test_a_reused_prompt_prefix_gives_the_reply_a_fresh_evaluation_gives() -> None:
    """Consecutive prompts sharing a long prefix reuse its evaluated blocks, and the reply is the one the
    same prompt gets on a fresh model state, whatever prompt ran before."""
    from ragbench.llm import local

    name = local.local_model_name(MODEL)
    model = local.get_local_model(name)
    shared = "Facts: " + " ".join(f"Item {i} weighs {i * 7 % 13} kilograms." for i in range(40))
    params = {"temperature": 0.0, "max_tokens": 24}

    def ask(question: str) -> dict:
        messages = [{"role": "system", "content": shared}, {"role": "user", "content": question}]
        return local.run_local_chat(name, messages, params)

    question = "How much does item 12 weigh? Answer with a number and the unit."
    model.llama.reset()
    fresh = ask(question)
    assert model.reused_tokens == 0
    ask("Which item weighs the most? Answer in one sentence.")  # the shared prefix is now evaluated
    reused = ask(question)
    assert reused["choices"][0]["message"]["content"] == fresh["choices"][0]["message"]["content"]
    # whole blocks of the shared prefix, most of the prompt, were taken over instead of evaluated
    prompt_tokens = fresh["usage"]["prompt_tokens"]
    assert model.reused_tokens % local.PROMPT_BLOCK == 0
    assert prompt_tokens - local.PROMPT_BLOCK - 40 < model.reused_tokens < prompt_tokens


def test_the_reader_model_writes_a_reference_from_fresh_context(client: LLMClient) -> None:
    """`reference_from` with `gives: context`: the 1.5B reader turns a status line into the reference, once
    (the same context is served from the cache)."""
    write = reference_writer(client)
    context = "Roster for the week of 23 November: the on-call engineer is Priya Raman (payments team)."
    reference = write("Who is on call this week?", context)
    assert "Priya Raman" in reference
    hits = client.stats.cache_hits
    assert write("Who is on call this week?", context) == reference and client.stats.cache_hits == hits + 1
