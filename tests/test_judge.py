"""The LLM judge through the real client against the loopback fake OpenAI server (no network, no model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbench.judge import (
    DEFAULT_JUDGE_MODEL,
    TRUNCATION_MARK,
    ContextVerdict,
    CorrectnessVerdict,
    JudgeInput,
    Judgement,
    build_judge_calls,
    context_same_score_count,
    default_judge_settings,
    fit_passages,
    format_passages,
    judge_answers,
    judge_messages,
    judge_requests_count,
    judge_warnings,
    summarise_judgements,
)
from ragbench.llm import LLMClient, estimate_cost

try:
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer  # type: ignore[no-redef]

DUMMY_KEY = "sk-test-DUMMY-not-a-real-key-1234"


def correct(score: int, reasoning: str = "Agrees with the reference.") -> str:
    return json.dumps({"reasoning": reasoning, "score": score})


def ctx(
    faithfulness: int = 5,
    relevance: int = 4,
    helpfulness: int = 3,
    toxicity: int = 1,
    reasoning: str = "Backed by passage [1].",
) -> str:
    return json.dumps(
        {
            "reasoning": reasoning,
            "faithfulness": faithfulness,
            "relevance": relevance,
            "helpfulness": helpfulness,
            "toxicity": toxicity,
        }
    )


class ScriptedJudge:
    """Replies by (question, rubric) and attempt number (re-asks add an assistant turn)."""

    def __init__(self) -> None:
        self.script: dict[tuple[str, str], list[str]] = {}

    def set(self, question: str, rubric: str, *replies: str) -> None:
        self.script[(question, rubric)] = list(replies)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        rubric = "correctness" if "Reference answer" in prompt else "context"
        question = prompt.split("Question:\n", 1)[1].split("\n", 1)[0]
        attempt = sum(m["role"] == "assistant" for m in messages)
        replies = self.script[(question, rubric)]
        return replies[min(attempt, len(replies) - 1)]


@pytest.fixture
def judge_script() -> ScriptedJudge:
    return ScriptedJudge()


@pytest.fixture
def server(judge_script: ScriptedJudge) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=judge_script) as srv:
        yield srv


@pytest.fixture
def client(server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LLMClient:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    return server.client(tmp_path / "cache", max_retries=1, json_retries=1)


def item(case_id: str, question: str, reference: str | None = "Paris.", **fields: Any) -> JudgeInput:
    return JudgeInput(
        case_id=case_id,
        question=question,
        answer=fields.pop("answer", "Paris is the capital."),
        reference_answer=reference,
        contexts=fields.pop("contexts", ["Paris is the capital of France.", "Lyon is a city."]),
        **fields,
    )


def user_prompts(server: FakeOpenAIServer) -> list[str]:
    """The first user message of every request the server received."""
    return [next(m["content"] for m in r["messages"] if m["role"] == "user") for r in server.requests]


# -- valid verdicts --------------------------------------------------------------------------------


def test_valid_verdicts_parse_normalise_and_keep_reasoning(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(4, "Right city, missing detail."))
    judge_script.set("Q1", "context", ctx(5, 4, 3, 1, "All from [1]."))
    judge_script.set("Q2", "correctness", correct(1, "Wrong city."))
    judge_script.set("Q2", "context", ctx(2, 5, 2, 2))

    judgements = judge_answers(client, [item("a", "Q1"), item("b", "Q2", answer="Lyon.")])

    assert [j.case_id for j in judgements] == ["a", "b"]
    a, b = judgements
    assert a.correctness == 4 and a.correctness_normalised == 0.75
    assert a.correctness_reasoning == "Right city, missing detail." and a.correctness_error is None
    assert (a.faithfulness, a.relevance, a.helpfulness, a.toxicity) == (5, 4, 3, 1)
    assert a.context_reasoning == "All from [1]." and a.context_error is None
    assert b.correctness == 1 and b.correctness_normalised == 0.0
    assert server.request_count == 4  # no re-asks

    summary = summarise_judgements(judgements)
    assert summary["correctness_mean_0to1"] == 0.375
    assert summary["correctness_scored"] == 2
    assert summary["faithfulness_mean_1to5"] == 3.5
    assert summary["relevance_mean_1to5"] == 4.5
    assert summary["helpfulness_mean_1to5"] == 2.5
    assert summary["toxicity_mean_1to5_lower_is_better"] == 1.5
    assert summary["context_scored"] == 2
    assert summary["judge_parse_failures"] == {"correctness": 0, "context": 0}
    assert json.loads(json.dumps(summary)) == summary

    dumped = a.model_dump()
    assert dumped["correctness_normalised"] == 0.75  # the per-case table gets the 0-1 value too
    assert Judgement.model_validate(dumped) == a


def test_all_requests_go_out_in_one_concurrent_batch(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = [item(f"c{n}", f"Q{n}") for n in range(4)]
    for n in range(4):
        judge_script.set(f"Q{n}", "correctness", correct(5))
        judge_script.set(f"Q{n}", "context", ctx())
    batches: list[int] = []
    original = client.complete_many

    def spy(requests: Any, **kwargs: Any) -> Any:
        batches.append(len(requests))
        return original(requests, **kwargs)

    monkeypatch.setattr(client, "complete_many", spy)
    server.latency_s = 0.1
    judge_answers(client, inputs)
    assert batches == [8]
    assert server.max_in_flight > 1


# -- invalid verdicts ------------------------------------------------------------------------------


def test_out_of_range_score_is_reasked_and_then_accepted(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(7), correct(5, "Fixed."))
    [judgement] = judge_answers(client, [item("a", "Q1")], rubrics=("correctness",))
    assert judgement.correctness == 5 and judgement.correctness_reasoning == "Fixed."
    assert server.request_count == 2
    reask = server.requests[1]["messages"][-1]["content"]
    assert "score" in reask and "less than or equal to 5" in reask


def test_still_invalid_after_reask_is_a_parse_failure_excluded_from_means(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(7))  # never fixes it
    judge_script.set("Q1", "context", ctx(faithfulness=0))  # below range, also never fixed
    judge_script.set("Q2", "correctness", correct(5))
    judge_script.set("Q2", "context", ctx(4, 4, 4, 1))

    bad, good = judge_answers(client, [item("a", "Q1"), item("b", "Q2")])

    assert bad.correctness is None and bad.correctness_normalised is None
    assert bad.correctness_reasoning is None
    assert bad.correctness_error is not None and bad.correctness_error.startswith("json_invalid")
    assert bad.faithfulness is bad.relevance is bad.helpfulness is bad.toxicity is None
    assert bad.context_error is not None and "faithfulness" in bad.context_error
    assert server.request_count == 2 * 2 + 2  # one re-ask for each invalid reply

    summary = summarise_judgements([bad, good])
    assert summary["correctness_mean_0to1"] == 1.0  # the failure is not scored as anything
    assert summary["correctness_scored"] == 1
    assert summary["faithfulness_mean_1to5"] == 4.0
    assert summary["toxicity_mean_1to5_lower_is_better"] == 1.0
    assert summary["context_scored"] == 1
    assert summary["judge_parse_failures"] == {"correctness": 1, "context": 1}


def test_malformed_json_is_reasked_then_counted(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(3))
    server.inject("malformed_json")
    [recovered] = judge_answers(client, [item("a", "Q1")], rubrics=["correctness"])
    assert recovered.correctness == 3 and server.request_count == 2
    assert recovered.json_reasks == 1 and recovered.retries == 0 and recovered.prompt_tokens > 0
    assert recovered.cost_usd is None  # litellm has no price for "openai/fake": unknown, not free

    judge_script.set("Q9", "correctness", correct(3))
    server.inject("malformed_json", "malformed_json")
    [failed] = judge_answers(client, [item("z", "Q9")], rubrics=["correctness"])
    assert failed.correctness is None and "json_invalid" in (failed.correctness_error or "")
    assert summarise_judgements([failed])["judge_parse_failures"]["correctness"] == 1


def test_call_failure_is_counted_not_scored(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "context", ctx())
    server.inject("server_error", "server_error")  # max_retries=1: both attempts fail
    [judgement] = judge_answers(client, [item("a", "Q1", reference=None)])
    assert judgement.context_error is not None and judgement.context_error.startswith("retries_exhausted")
    assert judgement.faithfulness is None
    summary = summarise_judgements([judgement])
    assert summary["faithfulness_mean_1to5"] is None and summary["context_scored"] == 0
    assert summary["judge_parse_failures"] == {"correctness": 0, "context": 1}


# -- what is judged, and with which prompt ----------------------------------------------------------


def test_cases_without_reference_skip_correctness(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "context", ctx())
    judge_script.set("Q2", "context", ctx())
    inputs = [item("a", "Q1", reference=None), item("b", "Q2", reference="   ")]
    assert judge_requests_count(inputs) == 2
    judgements = judge_answers(client, inputs)
    assert server.request_count == 2
    assert all("Reference answer" not in prompt for prompt in user_prompts(server))
    for j in judgements:
        assert j.correctness is j.correctness_reasoning is j.correctness_error is None
        assert j.faithfulness == 5
    summary = summarise_judgements(judgements)
    assert summary["correctness_mean_0to1"] is None and summary["correctness_scored"] == 0
    assert summary["judge_parse_failures"]["correctness"] == 0


def test_rubrics_can_be_chosen(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(5))
    [j] = judge_answers(client, [item("a", "Q1")], rubrics=("correctness",))
    assert j.correctness == 5 and j.faithfulness is None and j.context_error is None
    assert server.request_count == 1
    assert judge_answers(client, [item("a", "Q1")], rubrics=()) == [Judgement(case_id="a")]
    with pytest.raises(ValueError, match="unknown rubric"):
        judge_answers(client, [item("a", "Q1")], rubrics=("style",))


def test_prompts_carry_the_reader_contexts_and_the_reference(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", "correctness", correct(5))
    judge_script.set("Q1", "context", ctx())
    contexts = ["ZenML's default orchestrator is local.", "Kubeflow is supported too."]
    judge_answers(
        client,
        [item("a", "Q1", reference="The local orchestrator.", answer="It is local.", contexts=contexts)],
    )
    prompts = user_prompts(server)
    correctness_prompt = next(p for p in prompts if "Reference answer" in p)
    context_prompt = next(p for p in prompts if "Context passages" in p)

    assert "The local orchestrator." in correctness_prompt and "It is local." in correctness_prompt
    assert f'<passage id="1">\n{contexts[0]}\n</passage>' in context_prompt
    assert f'<passage id="2">\n{contexts[1]}\n</passage>' in context_prompt
    assert "<answer>\nIt is local.\n</answer>" in context_prompt
    assert "<answer>\nIt is local.\n</answer>" in correctness_prompt
    assert "<reference_answer>\nThe local orchestrator.\n</reference_answer>" in correctness_prompt
    assert "The local orchestrator." not in context_prompt  # judged against what the reader saw
    # instructions first, the JSON shape last
    for request in server.requests:
        system = request["messages"][0]
        assert system["role"] == "system" and "5 = " in system["content"]
        assert request["messages"][-1]["role"] == "user"
    assert correctness_prompt.rstrip().endswith('"score": <integer 1-5>}')
    assert context_prompt.rstrip().endswith("1 = not toxic>}")
    assert all(r["temperature"] == 0 for r in server.requests)


def test_toxicity_direction_is_stated() -> None:
    [system, user] = judge_messages(item("a", "Q"), "context")
    assert "LOWER IS BETTER" in system["content"] and "1 = not toxic" in system["content"]
    assert "1 = not toxic" in user["content"]
    assert "toxicity" in ContextVerdict.model_json_schema()["properties"]
    schema = CorrectnessVerdict.model_json_schema()["properties"]["score"]
    assert (schema["minimum"], schema["maximum"]) == (1, 5)


def test_correctness_prompt_describes_every_level() -> None:
    system = judge_messages(item("a", "Q"), "correctness")[0]["content"]
    for level in range(1, 6):
        assert f"\n{level} = " in system
    with pytest.raises(ValueError, match="reference"):
        judge_messages(item("a", "Q", reference=None), "correctness")


# -- passages --------------------------------------------------------------------------------------


def test_passages_are_cut_only_when_over_budget() -> None:
    passages = ["a" * 100, "b" * 1000, "c" * 3000]
    assert fit_passages(passages, None) == passages
    assert fit_passages(passages, 4100) == passages
    cut = fit_passages(passages, 1300)
    assert cut[0] == passages[0]  # short passages stay whole
    assert cut[1] == "b" * 600 + TRUNCATION_MARK and cut[2] == "c" * 600 + TRUNCATION_MARK
    assert format_passages([]) == "(no passages were retrieved)"
    numbered = format_passages([" one ", "two"])
    assert numbered == '<passage id="1">\none\n</passage>\n\n<passage id="2">\ntwo\n</passage>'


def test_context_budget_reaches_the_prompt() -> None:
    long = item("a", "Q", contexts=["x" * 5000, "y" * 5000])
    content = judge_messages(long, "context", context_char_budget=2000)[1]["content"]
    assert "x" * 1000 + TRUNCATION_MARK in content and "x" * 1001 not in content
    assert "x" * 5000 in judge_messages(long, "context", context_char_budget=None)[1]["content"]


# -- dry run ---------------------------------------------------------------------------------------


def test_dry_run_builds_requests_without_calling(server: FakeOpenAIServer) -> None:
    inputs = [item("a", "Q1"), item("b", "Q2", reference=None)]
    calls = build_judge_calls(inputs)
    assert judge_requests_count(inputs) == len(calls) == 3
    assert judge_requests_count(inputs, ["context"]) == 2
    assert [(c.index, c.rubric) for c in calls] == [(0, "correctness"), (0, "context"), (1, "context")]
    assert calls[0].request.response_schema is CorrectnessVerdict
    estimate = estimate_cost(default_judge_settings("openai/gpt-4o-mini"), [c.request for c in calls])
    assert estimate["calls"] == 3 and estimate["prompt_tokens"] > 300
    assert estimate["completion_tokens"] == 3 * 256
    assert server.request_count == 0


def test_default_judge_settings() -> None:
    settings = default_judge_settings()
    assert settings.model == DEFAULT_JUDGE_MODEL and settings.temperature == 0.0
    assert default_judge_settings(max_tokens=128).max_tokens == 128


def test_summary_of_nothing() -> None:
    summary = summarise_judgements([])
    assert summary["correctness_mean_0to1"] is None and summary["context_scored"] == 0
    assert summary["judge_parse_failures"] == {"correctness": 0, "context": 0}


def context_verdict(case_id: str, scores: tuple[int, int, int, int]) -> Judgement:
    faithfulness, relevance, helpfulness, toxicity = scores
    return Judgement(
        case_id=case_id,
        faithfulness=faithfulness,
        relevance=relevance,
        helpfulness=helpfulness,
        toxicity=toxicity,
        context_reasoning="r",
    )


def test_judge_that_scores_the_criteria_as_one_verdict_is_flagged() -> None:
    # The pattern measured on the local 1.5B judge: all criteria at one extreme, toxicity flipping too.
    verdicts = [context_verdict(f"c{i}", (5, 5, 5, 1) if i % 2 else (1, 1, 1, 5)) for i in range(9)]
    verdicts.append(context_verdict("mixed", (5, 2, 3, 1)))
    verdicts.append(Judgement(case_id="failed", context_error="json_invalid"))
    assert context_same_score_count(verdicts) == (9, 10)
    (warning,) = judge_warnings(verdicts)
    assert "9 of 10 context verdicts" in warning


def test_judge_that_tells_the_criteria_apart_is_not_flagged() -> None:
    varied = [context_verdict(f"c{i}", (5, 4, 3, 1) if i % 2 else (5, 5, 5, 1)) for i in range(10)]
    assert context_same_score_count(varied) == (5, 10)
    assert judge_warnings(varied) == []
    too_few = [context_verdict(f"c{i}", (5, 5, 5, 1)) for i in range(7)]
    assert judge_warnings(too_few) == []  # too few verdicts to say anything


# -- self-consistency ------------------------------------------------------------------------------


def test_repeated_verdicts_are_never_served_the_first_one_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical prompts, three samples: each sample is its own cache entry, so each reaches the judge
    once; a second run is served all three from the cache."""
    scores = iter([5, 3, 4, 5, 2, 2])

    def sampled(request: dict[str, Any]) -> str:
        prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
        return correct(next(scores)) if "Reference answer" in prompt else ctx(5, 5, 5, 1)

    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    inputs = [item("a", "Q1"), item("b", "Q2")]
    with FakeOpenAIServer(responder=sampled) as srv:
        judge = srv.client(tmp_path / "cache", temperature=0.7, max_retries=0, concurrency=1)
        first = judge_answers(judge, inputs, rubrics=["correctness", "context"], samples=3)
        assert srv.request_count == 12  # 2 answers x 2 rubrics x 3 samples, none served from the cache
        again = judge_answers(judge, inputs, rubrics=["correctness", "context"], samples=3)
        assert srv.request_count == 12  # the second run: every sample from the cache
    a, b = first
    assert a.correctness == 5 and a.resampled["correctness"] == [4, 2]  # all first samples come first
    assert b.correctness == 3 and b.resampled["correctness"] == [5, 2]
    assert a.resampled["faithfulness"] == [5, 5] and a.resample_failures == 0
    assert [j.resampled for j in again] == [j.resampled for j in first]
    assert len(build_judge_calls(inputs, ["correctness"], samples=3)) == 6
