"""The provider interface: model strings find their provider, a registered provider is found by its prefix,
cache keys are the ones recorded before providers existed, and the in-process models are planned (counted,
priced, checked, their files resolved) without litellm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragbench.config.paths import local_llm_path
from ragbench.llm import runtime
from ragbench.llm.client import LLMClient
from ragbench.llm.litellm_provider import LiteLLMProvider
from ragbench.llm.local import LocalProvider, tiktoken_prompt_tokens
from ragbench.llm.pricing import context_window, estimate_cost, estimate_cost_usd
from ragbench.llm.provider import LLMReadiness, Provider, ProviderReply
from ragbench.llm.providers import PROVIDERS, provider_class
from ragbench.llm.readiness import checked_offline
from ragbench.llm.types import LLMRequest, LLMSettings

LOCAL = "local/qwen2.5-coder-1.5b-instruct"


class Verdict(BaseModel):
    reasoning: str
    score: int


CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]


@pytest.mark.parametrize(
    ("settings", "messages", "schema", "sample", "recorded"),
    [
        (
            LLMSettings(model=LOCAL),
            CONVERSATION,
            None,
            0,
            "00862303fe137f27a39bd3f516f4dcb465252800855d2a21a42526e14075c201",
        ),
        (
            LLMSettings(model=LOCAL),
            "Grade it.",
            Verdict,
            1,
            "86ec0a38847226edbafe0078b26a9ed46dfa417f8d3f4dd785867cc82d508ad1",
        ),
        (
            LLMSettings(model="openai/gpt-4o-mini", temperature=0.2, extra={"top_p": 0.9}),
            CONVERSATION,
            None,
            0,
            "5226a92825507585b6f925c6db2f6330bce98458250a0ad77e01272768395581",
        ),
        (
            LLMSettings(model="openai/gpt-4o-mini", temperature=0.2, extra={"top_p": 0.9}),
            "Grade it.",
            Verdict,
            0,
            "d49e8bc98736f994e175481eddae282a3aecfc74923a377616fcd2a6ac8c9ce0",
        ),
        (
            LLMSettings(model="openai/judge", api_base="http://127.0.0.1:9/v1", json_mode="json_object"),
            "Grade it.",
            Verdict,
            1,
            "a858495298a5f430fd7437999ac4f0aea7a6927c8b7ccb203cfb3d45a74ec5cb",
        ),
    ],
)
def test_cache_keys_are_the_ones_recorded_before_the_providers(
    settings: LLMSettings, messages: Any, schema: type[BaseModel] | None, sample: int, recorded: str
) -> None:
    """Keys computed by the client of main at f095b19 (before providers): earlier runs' answers are served."""
    client = LLMClient(settings, use_cache=False)
    assert client.cache_key(messages, schema, sample) == recorded


def test_model_strings_find_their_provider() -> None:
    assert provider_class(LOCAL) is LocalProvider and provider_class("local//models/m.gguf") is LocalProvider
    for model in ("openai/gpt-4o-mini", "ollama/llama3", "gpt-4o-mini", "localhost/x"):
        assert provider_class(model) is LiteLLMProvider
    assert checked_offline(LLMSettings(model=LOCAL))
    assert not checked_offline(LLMSettings(model="openai/gpt-4o-mini"))


class Echo(Provider):
    """A provider registered by a call: ``echo/<anything>`` answers with the last message."""

    name = "echo"

    def check_ready(self, environment: Any = None) -> LLMReadiness:
        return LLMReadiness(self.llm.model, self.name)

    def send(self, messages: list[dict], params: dict[str, Any]) -> ProviderReply:
        return ProviderReply(messages[-1]["content"], "stop", prompt_tokens=1, completion_tokens=1)

    def count_prompt_tokens(self, messages: list[dict]) -> int:
        return 7 * len(messages)


def test_a_registered_provider_is_found_by_its_prefix_until_unregistered(tmp_path: Path) -> None:
    PROVIDERS.register(Echo)
    try:
        assert provider_class("echo/one") is Echo
        with pytest.raises(ValueError, match="registered twice"):
            PROVIDERS.register(type("Other", (Echo,), {}))
        with LLMClient(LLMSettings(model="echo/one"), cache_location=tmp_path, progress=False) as client:
            result = client.complete("say this")
        assert result.text == "say this" and result.cost_known is False  # it gives no price: unknown
        estimate = estimate_cost(LLMSettings(model="echo/one", max_tokens=3), ["a", "b"])
        counted = (estimate["prompt_tokens"], estimate["completion_tokens"], estimate["cost_usd"])
        assert counted == (14, 6, None)
    finally:
        PROVIDERS.unregister(Echo.name)
    assert provider_class("echo/one") is LiteLLMProvider


# Prompts of the kinds the reader and the judge send: short, several messages, over litellm's chunk of
# 1024 characters, non-ASCII, code.
PROMPTS = [
    CONVERSATION,
    [{"role": "user", "content": "Context:\n" + "[1] The with statement closes a file. " * 60 + "\nQ: why?"}],
    [
        {"role": "system", "content": "Grade the answer.\n<rubric>correctness 1-5</rubric>"},
        {"role": "user", "content": "Frage: Wie groß ist der Mond? Antwort: ≈ 3 474 km — «gut»."},
        {"role": "assistant", "content": '{"reasoning": "x", "score": 4}'},
        {"role": "user", "content": "def f(x):\n    return [i ** 2 for i in range(x)]  # 平方"},
    ],
]


@pytest.mark.parametrize("messages", PROMPTS)
def test_local_prompts_are_counted_as_litellm_counted_them(messages: list[dict]) -> None:
    """The dry run's numbers stay: litellm counted a local model's prompt as a model it does not know."""
    litellm = runtime.get_litellm()
    expected = litellm.token_counter(model=LOCAL.removeprefix("local/"), messages=messages)
    assert tiktoken_prompt_tokens(messages) == expected


def test_local_models_are_planned_without_litellm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Whatever this process imported before, every question a dry run asks of a local model is answered
    with litellm unimportable."""
    monkeypatch.setitem(sys.modules, "litellm", None)  # `import litellm` now raises ImportError
    monkeypatch.setattr(runtime, "_module", None)
    settings = LLMSettings(model=LOCAL, max_tokens=10)
    estimate = estimate_cost(settings, [CONVERSATION, LLMRequest("Grade it.", response_schema=Verdict)])
    assert estimate["prompt_tokens"] > 0 and estimate["cost_usd"] == 0.0
    assert estimate_cost_usd(LOCAL, 10**6, 10**6) == 0.0
    assert context_window(settings) == LocalProvider(settings).context_window() > 0
    client = LLMClient(settings, use_cache=False)
    assert client.effective_concurrency == 1 and client.cache_key("x")
    (tmp_path / "m.gguf").write_bytes(b"")
    assert local_llm_path("local/m.gguf", tmp_path) == f"local/{tmp_path / 'm.gguf'}"
    assert local_llm_path("openai/m.gguf", tmp_path) == "openai/m.gguf"  # another provider's name
    with pytest.raises(ImportError):
        runtime.get_litellm()  # the check is real: litellm could not have been loaded above
