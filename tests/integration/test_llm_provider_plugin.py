"""An LLM provider defined here and registered by one call (no edit to ragbench) serves the reader and the
judge of a real ZenML benchmark run: its answers and verdicts are the run's, the client caches them (a
second run of every step sends it nothing), charges the price it reports, and retries and counts the rate
limit and the timeout it raises once each."""

import json
from typing import Any, ClassVar

import pytest

from ragbench.llm.provider import ErrorKind, LLMReadiness, Provider, ProviderReply
from ragbench.llm.providers import PROVIDERS, provider_class
from tests.projects import FOUR_KEYWORD_CASES, FOUR_KEYWORD_PAGES, newest_run, printed, write_project

PRICE_PER_CALL = 0.0025
ANSWER = "It is a Python keyword [1]. (said by the toy provider)"


class ToyRateLimit(Exception):
    """The toy's 429: transient."""


class Toy(Provider):
    """``toy/<anything>``: a fixed answer, a top verdict for a structured request, a price per call."""

    name = "toy"
    sent: ClassVar[list[str]] = []  # the model of every request sent in this process, failed ones too
    failures: ClassVar[list[Exception]] = []  # raised by the next sends, in order

    def check_ready(self, environment: Any = None) -> LLMReadiness:
        return LLMReadiness(self.llm.model, self.name)

    def send(self, messages: list[dict], params: dict[str, Any]) -> ProviderReply:
        type(self).sent.append(self.llm.model)
        if self.failures:
            raise self.failures.pop(0)
        structured = "response_format" in params  # the judge's verdict
        text = json.dumps({"reasoning": "the toy agrees", "score": 5}) if structured else ANSWER
        return ProviderReply(
            text,
            "stop",
            prompt_tokens=self.count_prompt_tokens(messages),
            completion_tokens=len(text.split()),
            cost_usd=PRICE_PER_CALL,
        )

    def classify(self, error: Exception) -> ErrorKind:
        return "retry" if isinstance(error, ToyRateLimit) else super().classify(error)

    def count_prompt_tokens(self, messages: list[dict]) -> int:
        return sum(len(str(message.get("content", "")).split()) for message in messages)

    def price_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return PRICE_PER_CALL


@pytest.fixture
def toy_project(tmp_path, monkeypatch):
    """The four keyword cases in one cell whose reader and judge are the toy; the reader retries."""
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        FOUR_KEYWORD_PAGES,
        FOUR_KEYWORD_CASES,
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, "
        "top_n: 1, reader: [toy/reader], judge: [toy/judge]}\n"
        "generation: {sample_size: 4, reader: {max_retries: 3, concurrency: 1}}\n"
        "evaluation: {judge: {max_retries: 0, concurrency: 1}, rubrics: [correctness], "
        "judge_check: null, keyword_tests: false}\n"
        "retrieval: {metrics_k: 1}\nregression: {baseline: none}\n"
        "llm_cache_dir: llm-cache\n",
    )
    PROVIDERS.register(Toy)
    Toy.sent.clear()
    yield tmp_path
    PROVIDERS.unregister(Toy.name)


def test_a_registered_provider_serves_a_pipeline_run_cached_priced_and_retried(toy_project):
    assert provider_class("toy/reader") is Toy
    Toy.failures[:] = [ToyRateLimit("slow down"), TimeoutError("no reply in time")]  # the first two sends
    code, out, err = printed()
    assert code == 0, out + err
    assert Toy.sent.count("toy/reader") == 4 + 2 and Toy.sent.count("toy/judge") == 4  # 2 retried sends

    records = [json.loads(line) for line in (toy_project / "out" / "latest" / "cases.jsonl").open()]
    assert len(records) == 4 and all(record["answer"] == ANSWER for record in records)
    spend = newest_run().run_metadata["spend"]
    assert (spend["total"]["calls"], spend["total"]["retries"]) == (10, 2)
    assert (spend["roles"]["reader"]["calls"], spend["roles"]["reader"]["retries"]) == (6, 2)
    assert spend["total"]["cost_usd"] == pytest.approx(8 * PRICE_PER_CALL)  # failed sends cost nothing
    assert spend["total"]["tokens"] > 0

    # every step again (ZenML's cache off): the LLM cache answers every request, the toy gets none
    code, out, err = printed("--no-cache")
    assert code == 0, out + err
    assert len(Toy.sent) == 10
    again = newest_run().run_metadata["spend"]
    assert again["total"]["calls"] == 0 and again["total"]["cost_usd"] == 0
    rerun = [json.loads(line) for line in (toy_project / "out" / "latest" / "cases.jsonl").open()]
    assert [record["answer"] for record in rerun] == [ANSWER] * 4
