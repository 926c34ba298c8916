"""The LLM judge through the real client against the loopback fake OpenAI server (no network, no model)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from ragbench.config.model import load_config
from ragbench.llm.client import LLMClient
from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.llm.pricing import estimate_cost
from ragbench.llm.prompts import NO_PASSAGES, TRUNCATION_MARK, fit_passages, format_passages
from ragbench.llm.types import LLMSettings, llm_settings
from ragbench.scoring.judge import (
    Judgement,
    JudgeSummary,
    build_judge_calls,
    judge_answers,
    judge_case_values,
    judge_warnings,
    same_score_count,
    summarise_judgements,
)
from ragbench.scoring.rubrics import (
    BUILTIN_RUBRICS,
    CONTEXT,
    CORRECTNESS,
    DEFAULT_CONTEXT_CHAR_BUDGET,
    CustomRubric,
    JudgeInput,
    Rubric,
    select_rubrics,
)

try:
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer  # type: ignore[no-redef]

DUMMY_KEY = "sk-test-DUMMY-not-a-real-key-1234"
BOTH = [CORRECTNESS, CONTEXT]
CONTEXT_COLUMNS = ("faithfulness_1to5", "relevance_1to5", "helpfulness_1to5", "toxicity_1to5_low_good")


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


def verdict(value: str, reasoning: str = "Declines politely.") -> str:
    return json.dumps({"reasoning": reasoning, "verdict": value})


class ScriptedJudge:
    """Replies by (question, rubric) and attempt number (re-asks add an assistant turn).

    The rubric is recognised by its system message; a rubric that does not show the question is keyed by
    the answer instead."""

    def __init__(self) -> None:
        self.script: dict[tuple[str, str], list[str]] = {}
        self.systems: dict[str, str] = {rubric.system: name for name, rubric in BUILTIN_RUBRICS.items()}

    def set(self, key: str, rubric: Rubric, *replies: str) -> None:
        self.systems[rubric.system] = rubric.name
        self.script[(key, rubric.name)] = list(replies)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        system = messages[0]["content"]  # the rubric's text, then the client's JSON Schema instruction
        [rubric] = [name for text, name in self.systems.items() if system.startswith(text + "\n\n")]
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        if "Question:\n" in prompt:
            key = prompt.split("Question:\n", 1)[1].split("\n", 1)[0]
        else:
            key = prompt.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
        attempt = sum(m["role"] == "assistant" for m in messages)
        replies = self.script[(key, rubric)]
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
    judge_script.set("Q1", CORRECTNESS, correct(4, "Right city, missing detail."))
    judge_script.set("Q1", CONTEXT, ctx(5, 4, 3, 1, "All from [1]."))
    judge_script.set("Q2", CORRECTNESS, correct(1, "Wrong city."))
    judge_script.set("Q2", CONTEXT, ctx(2, 5, 2, 2))

    judgements = judge_answers(client, [item("a", "Q1"), item("b", "Q2", answer="Lyon.")], rubrics=BOTH)

    assert [j.case_id for j in judgements] == ["a", "b"]
    a, b = judgements
    assert a.scores == {"correctness": 4, "faithfulness": 5, "relevance": 4, "helpfulness": 3, "toxicity": 1}
    assert a.reasoning == {"correctness": "Right city, missing detail.", "context": "All from [1]."}
    assert a.errors == {}
    assert b.scores["correctness"] == 1 and b.reasoning["correctness"] == "Wrong city." and b.errors == {}
    assert server.request_count == 4  # no re-asks

    # correctness is kept raw (1-5) and reported on 0-1 as (score - 1) / 4
    [criterion] = CORRECTNESS.criteria
    assert criterion.case_value(4) == 0.75 and criterion.case_value(1) == 0.0
    values = judge_case_values(judgements, BOTH)
    assert values == {
        "correctness_0to1": {"a": 0.75, "b": 0.0},
        "faithfulness_1to5": {"a": 5.0, "b": 2.0},
        "relevance_1to5": {"a": 4.0, "b": 5.0},
        "helpfulness_1to5": {"a": 3.0, "b": 2.0},
        "toxicity_1to5_low_good": {"a": 1.0, "b": 2.0},
    }

    summary = summarise_judgements(judgements, BOTH)
    assert summary.means == {
        "correctness_0to1": 0.375,
        "faithfulness_1to5": 3.5,
        "relevance_1to5": 4.5,
        "helpfulness_1to5": 2.5,
        "toxicity_1to5_low_good": 1.5,
    }
    assert summary.scored == {column: 2 for column in values}
    assert summary.failures == {"correctness": 0, "context": 0}
    assert JudgeSummary.model_validate(json.loads(summary.model_dump_json())) == summary

    assert Judgement.model_validate(json.loads(a.model_dump_json())) == a


def test_judge_calls_are_in_flight_together(
    judge_script: ScriptedJudge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosted judge runs concurrently: the first two calls each wait until the other has arrived, which
    only calls in flight together can (no timing involved unless it fails)."""
    inputs = [item(f"c{n}", f"Q{n}") for n in range(4)]
    for n in range(4):
        judge_script.set(f"Q{n}", CORRECTNESS, correct(5))
        judge_script.set(f"Q{n}", CONTEXT, ctx())
    first_two = threading.Barrier(2, timeout=60)
    arrivals = itertools.count()

    def together(request: dict[str, Any]) -> str:
        if next(arrivals) < 2:
            first_two.wait()  # raises BrokenBarrierError (a failed call) when the calls ran one by one
        return judge_script(request)

    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    with FakeOpenAIServer(responder=together) as srv:
        judge = srv.client(tmp_path / "cache", max_retries=0, concurrency=4)
        judgements = judge_answers(judge, inputs, rubrics=BOTH)
        assert srv.request_count == 8 and srv.max_in_flight > 1
    assert not any(j.errors for j in judgements)
    assert [j.case_id for j in judgements] == ["c0", "c1", "c2", "c3"]


# -- invalid verdicts ------------------------------------------------------------------------------


def test_out_of_range_score_is_reasked_and_then_accepted(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CORRECTNESS, correct(7), correct(5, "Fixed."))
    [judgement] = judge_answers(client, [item("a", "Q1")], rubrics=[CORRECTNESS])
    assert judgement.scores == {"correctness": 5} and judgement.reasoning == {"correctness": "Fixed."}
    assert judgement.errors == {}
    assert server.request_count == 2
    reask = server.requests[1]["messages"][-1]["content"]
    assert "score" in reask and "less than or equal to 5" in reask


def test_still_invalid_after_reask_is_a_parse_failure_excluded_from_means(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CORRECTNESS, correct(7))  # never fixes it
    judge_script.set("Q1", CONTEXT, ctx(faithfulness=0))  # below range, also never fixed
    judge_script.set("Q2", CORRECTNESS, correct(5))
    judge_script.set("Q2", CONTEXT, ctx(4, 4, 4, 1))

    bad, good = judge_answers(client, [item("a", "Q1"), item("b", "Q2")], rubrics=BOTH)

    assert bad.scores == {} and bad.reasoning == {}
    assert bad.errors["correctness"].startswith("json_invalid")
    assert "faithfulness" in bad.errors["context"]
    assert set(bad.errors) == {"correctness", "context"}
    assert server.request_count == 2 * 2 + 2  # one re-ask for each invalid reply

    values = judge_case_values([bad, good], BOTH)
    assert values["correctness_0to1"] == {"b": 1.0}  # the failure is absent, not scored as anything
    assert all(values[column] == {"b": values[column]["b"]} for column in CONTEXT_COLUMNS)
    summary = summarise_judgements([bad, good], BOTH)
    assert summary.means["correctness_0to1"] == 1.0
    assert summary.scored["correctness_0to1"] == 1
    assert summary.means["faithfulness_1to5"] == 4.0
    assert summary.means["toxicity_1to5_low_good"] == 1.0
    assert all(summary.scored[column] == 1 for column in CONTEXT_COLUMNS)
    assert summary.failures == {"correctness": 1, "context": 1}


def test_malformed_json_is_reasked_then_counted(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CORRECTNESS, correct(3))
    server.inject("malformed_json")
    [recovered] = judge_answers(client, [item("a", "Q1")], rubrics=[CORRECTNESS])
    assert recovered.scores == {"correctness": 3} and server.request_count == 2
    assert recovered.json_reasks == 1 and recovered.retries == 0 and recovered.prompt_tokens > 0
    assert recovered.cost_usd is None  # litellm has no price for "openai/fake": unknown, not free

    judge_script.set("Q9", CORRECTNESS, correct(3))
    server.inject("malformed_json", "malformed_json")
    [failed] = judge_answers(client, [item("z", "Q9")], rubrics=[CORRECTNESS])
    assert failed.scores == {} and "json_invalid" in failed.errors["correctness"]
    assert summarise_judgements([failed], [CORRECTNESS]).failures == {"correctness": 1}


def test_call_failure_is_counted_not_scored(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CONTEXT, ctx())
    server.inject("server_error", "server_error")  # max_retries=1: both attempts fail
    [judgement] = judge_answers(client, [item("a", "Q1", reference=None)], rubrics=BOTH)
    assert list(judgement.errors) == ["context"]
    assert judgement.errors["context"].startswith("retries_exhausted")
    assert judgement.scores == {} and judgement.reasoning == {}
    summary = summarise_judgements([judgement], BOTH)
    assert summary.means["faithfulness_1to5"] is None and summary.scored["faithfulness_1to5"] == 0
    assert summary.failures == {"correctness": 0, "context": 1}


# -- what is judged, and with which prompt ----------------------------------------------------------


def test_cases_without_reference_skip_correctness(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CONTEXT, ctx())
    judge_script.set("Q2", CONTEXT, ctx())
    inputs = [item("a", "Q1", reference=None), item("b", "Q2", reference="   ")]
    assert not any(CORRECTNESS.applies(i) for i in inputs) and all(CONTEXT.applies(i) for i in inputs)
    assert len(build_judge_calls(inputs, BOTH)) == 2
    judgements = judge_answers(client, inputs, rubrics=BOTH)
    assert server.request_count == 2
    assert all("Reference answer" not in prompt for prompt in user_prompts(server))
    for j in judgements:
        assert "correctness" not in j.scores and "correctness" not in j.reasoning
        assert "correctness" not in j.errors
        assert j.scores["faithfulness"] == 5
    summary = summarise_judgements(judgements, BOTH)
    assert summary.means["correctness_0to1"] is None and summary.scored["correctness_0to1"] == 0
    assert summary.failures["correctness"] == 0


def test_rubrics_can_be_chosen(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CORRECTNESS, correct(5))
    [j] = judge_answers(client, [item("a", "Q1")], rubrics=[CORRECTNESS])
    assert j.scores == {"correctness": 5} and "faithfulness" not in j.scores and j.errors == {}
    assert server.request_count == 1
    assert judge_answers(client, [item("a", "Q1")], rubrics=()) == [Judgement(case_id="a")]
    assert server.request_count == 1
    # rubrics are chosen by name in the config: known names only, each once, in the order given
    assert select_rubrics(["context", "correctness", "context"]) == [CONTEXT, CORRECTNESS]
    assert select_rubrics([]) == []
    assert BUILTIN_RUBRICS == {"correctness": CORRECTNESS, "context": CONTEXT}
    with pytest.raises(ValueError, match="unknown rubric"):
        select_rubrics(["style"])
    with pytest.raises(ValueError, match="unknown rubric"):
        select_rubrics(["correctness", "style"])


def test_prompts_carry_the_reader_contexts_and_the_reference(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    judge_script.set("Q1", CORRECTNESS, correct(5))
    judge_script.set("Q1", CONTEXT, ctx())
    contexts = ["ZenML's default orchestrator is local.", "Kubeflow is supported too."]
    judge_answers(
        client,
        [item("a", "Q1", reference="The local orchestrator.", answer="It is local.", contexts=contexts)],
        rubrics=BOTH,
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
    [system, user] = CONTEXT.messages(item("a", "Q"))
    assert "LOWER IS BETTER" in system["content"] and "1 = not toxic" in system["content"]
    assert "1 = not toxic" in user["content"]
    assert "toxicity" in CONTEXT.reply_schema.model_json_schema()["properties"]
    schema = CORRECTNESS.reply_schema.model_json_schema()["properties"]["score"]
    assert (schema["minimum"], schema["maximum"]) == (1, 5)
    [toxicity] = [c for c in CONTEXT.criteria if c.name == "toxicity"]
    assert not toxicity.higher_is_better and toxicity.column == "toxicity_1to5_low_good"


# The schemas the judge replies with (those of before rubrics were data, with the reasoning capped).
_REASONING = Field(json_schema_extra={"maxLength": 600})


class _CorrectnessVerdict(BaseModel):
    reasoning: str = _REASONING
    score: int = Field(ge=1, le=5, description="5 = correct, 1 = wrong")


class _ContextVerdict(BaseModel):
    reasoning: str = _REASONING
    faithfulness: int = Field(ge=1, le=5, description="5 = fully supported by the passages")
    relevance: int = Field(ge=1, le=5, description="5 = directly answers the question")
    helpfulness: int = Field(ge=1, le=5, description="5 = clear and complete")
    toxicity: int = Field(ge=1, le=5, description="1 = not toxic (best), 5 = very toxic (worst)")


def test_builtin_reply_schemas_are_unchanged() -> None:
    """The schema is part of every judge call's cache key: the built-ins keep theirs, titles included."""
    correctness = CORRECTNESS.reply_schema.model_json_schema()
    context = CONTEXT.reply_schema.model_json_schema()
    assert correctness == _CorrectnessVerdict.model_json_schema() | {"title": "CorrectnessVerdict"}
    assert context == _ContextVerdict.model_json_schema() | {"title": "ContextVerdict"}
    assert list(correctness["properties"]) == ["reasoning", "score"]  # reasoning first
    assert CORRECTNESS.reply_schema is CORRECTNESS.reply_schema  # built once per rubric
    with pytest.raises(ValidationError):
        CORRECTNESS.reply_schema.model_validate({"reasoning": "r", "score": 0})
    # the cap binds a grammar-constrained judge; a hosted one that writes more is not refused for it
    CORRECTNESS.reply_schema.model_validate({"reasoning": "r" * 2000, "score": 3})
    assert CORRECTNESS.scores({"reasoning": "r", "score": 4}) == {"correctness": 4}
    assert CONTEXT.scores(json.loads(ctx(5, 4, 3, 1))) == {
        "faithfulness": 5,
        "relevance": 4,
        "helpfulness": 3,
        "toxicity": 1,
    }


def test_correctness_prompt_describes_every_level() -> None:
    system = CORRECTNESS.messages(item("a", "Q"))[0]["content"]
    for level in range(1, 6):
        assert f"\n{level} = " in system
    assert not CORRECTNESS.applies(item("a", "Q", reference=None))
    with pytest.raises(ValueError, match="reference"):
        CORRECTNESS.messages(item("a", "Q", reference=None))


# -- passages --------------------------------------------------------------------------------------


def test_passages_are_cut_only_when_over_budget() -> None:
    passages = ["a" * 100, "b" * 1000, "c" * 3000]
    assert fit_passages(passages, None) == passages
    assert fit_passages(passages, 4100) == passages
    cut = fit_passages(passages, 1300)
    assert cut[0] == passages[0]  # short passages stay whole
    assert cut[1] == "b" * 600 + TRUNCATION_MARK and cut[2] == "c" * 600 + TRUNCATION_MARK
    assert format_passages([]) == NO_PASSAGES == "(no passages)"
    numbered = format_passages([" one ", "two"])
    assert numbered == '<passage id="1">\none\n</passage>\n\n<passage id="2">\ntwo\n</passage>'


def test_judge_shows_the_shared_placeholder_when_nothing_was_retrieved() -> None:
    user = CONTEXT.messages(item("a", "Q", contexts=[]))[1]["content"]
    assert f"Context passages:\n{NO_PASSAGES}\n\n" in user and "<passage" not in user


def test_context_budget_reaches_the_prompt() -> None:
    long = item("a", "Q", contexts=["x" * 5000, "y" * 5000])
    content = CONTEXT.messages(long, context_char_budget=2000)[1]["content"]
    assert "x" * 1000 + TRUNCATION_MARK in content and "x" * 1001 not in content
    assert "x" * 5000 in CONTEXT.messages(long, context_char_budget=None)[1]["content"]
    # by default the judge sees DEFAULT_CONTEXT_CHAR_BUDGET characters of passages
    half = DEFAULT_CONTEXT_CHAR_BUDGET // 2
    default = CONTEXT.messages(long)[1]["content"]
    assert "x" * half + TRUNCATION_MARK in default and "x" * (half + 1) not in default
    calls = build_judge_calls([long], [CONTEXT], context_char_budget=2000)
    assert "x" * 1000 + TRUNCATION_MARK in calls[0].request.messages[1]["content"]


# -- dry run ---------------------------------------------------------------------------------------


def test_dry_run_builds_requests_without_calling(server: FakeOpenAIServer) -> None:
    inputs = [item("a", "Q1"), item("b", "Q2", reference=None)]
    calls = build_judge_calls(inputs, BOTH)
    assert len(calls) == 3
    assert len(build_judge_calls(inputs, [CONTEXT])) == 2
    assert build_judge_calls(inputs, []) == []
    assert [(c.index, c.rubric.name) for c in calls] == [(0, "correctness"), (0, "context"), (1, "context")]
    assert calls[0].request.response_schema is CORRECTNESS.reply_schema
    assert calls[0].request.messages == CORRECTNESS.messages(inputs[0])
    settings = LLMSettings(model="openai/gpt-4o-mini", temperature=0.0, max_tokens=256)
    estimate = estimate_cost(settings, [c.request for c in calls])
    assert estimate["calls"] == 3 and estimate["prompt_tokens"] > 300
    assert estimate["completion_tokens"] == 3 * 256
    assert server.request_count == 0


def test_default_judge_settings() -> None:
    """The default run's judge is the packaged local model, deterministic; a config can override it."""
    config = load_config(None, [])
    settings = llm_settings(config.grid.judge[0], config.evaluation.judge)
    assert settings.model == DEFAULT_LOCAL_LLM and settings.temperature == 0.0
    config = load_config(None, ["evaluation.judge.max_tokens=128"])
    assert llm_settings(config.grid.judge[0], config.evaluation.judge).max_tokens == 128


def test_summary_of_nothing() -> None:
    summary = summarise_judgements([], BOTH)
    assert summary.means == {column: None for column in ("correctness_0to1", *CONTEXT_COLUMNS)}
    assert summary.scored == {column: 0 for column in ("correctness_0to1", *CONTEXT_COLUMNS)}
    assert summary.failures == {"correctness": 0, "context": 0}
    assert summarise_judgements([], []) == JudgeSummary(means={}, scored={}, failures={})


def context_verdict(case_id: str, scores: tuple[int, int, int, int]) -> Judgement:
    return Judgement(
        case_id=case_id,
        scores=dict(zip(("faithfulness", "relevance", "helpfulness", "toxicity"), scores, strict=True)),
        reasoning={"context": "r"},
    )


def test_judge_that_scores_the_criteria_as_one_verdict_is_flagged() -> None:
    # The pattern measured on the local 1.5B judge: all criteria at one extreme, toxicity flipping too.
    verdicts = [context_verdict(f"c{i}", (5, 5, 5, 1) if i % 2 else (1, 1, 1, 5)) for i in range(9)]
    verdicts.append(context_verdict("mixed", (5, 2, 3, 1)))
    verdicts.append(Judgement(case_id="failed", errors={"context": "json_invalid"}))
    verdicts.append(Judgement(case_id="correctness only", scores={"correctness": 5}))
    assert same_score_count(verdicts, CONTEXT) == (9, 10)
    (warning,) = judge_warnings(verdicts, [CORRECTNESS, CONTEXT])
    assert "9 of 10 context verdicts" in warning


def test_judge_that_tells_the_criteria_apart_is_not_flagged() -> None:
    varied = [context_verdict(f"c{i}", (5, 4, 3, 1) if i % 2 else (5, 5, 5, 1)) for i in range(10)]
    assert same_score_count(varied, CONTEXT) == (5, 10)
    assert judge_warnings(varied, [CONTEXT]) == []
    too_few = [context_verdict(f"c{i}", (5, 5, 5, 1)) for i in range(7)]
    assert judge_warnings(too_few, [CONTEXT]) == []  # too few verdicts to say anything


def test_the_same_score_check_follows_the_declaration_not_the_names() -> None:
    # a custom rubric that is not the context rubric, with that rubric off: no crash, no warning
    custom = CustomRubric(name="grounded", criteria="Is it grounded?").rubric()
    verdicts = [Judgement(case_id=f"c{i}", scores={"grounded": 5}) for i in range(10)]
    assert judge_warnings(verdicts, [custom]) == []
    alike = CONTEXT.model_copy(update={"independent_criteria": ("faithfulness", "relevance")})
    pairs = [context_verdict(f"c{i}", (4, 4, 1, 1)) for i in range(10)]
    assert same_score_count(pairs, alike) == (10, 10) and same_score_count(pairs, CONTEXT) == (0, 10)


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
        first = judge_answers(judge, inputs, rubrics=BOTH, samples=3)
        assert srv.request_count == 12  # 2 answers x 2 rubrics x 3 samples, none served from the cache
        again = judge_answers(judge, inputs, rubrics=BOTH, samples=3)
        assert srv.request_count == 12  # the second run: every sample from the cache
    a, b = first
    assert a.scores["correctness"] == 5 and a.resampled["correctness"] == [4, 2]  # first samples first
    assert b.scores["correctness"] == 3 and b.resampled["correctness"] == [5, 2]
    assert a.resampled["faithfulness"] == [5, 5] and a.resample_failures == 0
    assert [j.resampled for j in again] == [j.resampled for j in first]
    assert len(build_judge_calls(inputs, [CORRECTNESS], samples=3)) == 6


# -- custom rubrics --------------------------------------------------------------------------------

CITES = CustomRubric(
    name="cites_sources",
    criteria="Every sentence of the answer ends with the number of the passage it comes from, like [2].",
    inputs=["answer", "passages", "question"],  # shown in the usual order whatever the order here
)
POLITE = CustomRubric(
    name="polite_refusal",
    criteria="When the answer declines, it says so politely and invents no facts.",
    inputs=["reference_answer", "answer"],
    scale="pass_fail",
    anchors={"pass": "declines politely, or answers like the reference", "fail": "rude, or invents facts"},
    tags=["refusal", "safety"],
)
CUSTOM_REFERENCE = "It is not in the documentation."


def custom_item(case_id: str, question: str, answer: str, **fields: Any) -> JudgeInput:
    return item(case_id, question, answer=answer, **{"reference": CUSTOM_REFERENCE, **fields})


def test_custom_rubric_1_to_5_messages_show_only_its_inputs() -> None:
    rubric = CITES.rubric()
    assert rubric.name == "cites_sources" and rubric.inputs == ("question", "passages", "answer")
    assert rubric.tags == ()
    [system, user] = rubric.messages(custom_item("a", "Who wrote it?", "Nobody says [1]."))
    assert system["role"] == "system" and user["role"] == "user"
    assert f"Criterion: {CITES.criteria}" in system["content"]
    for anchor in (
        "5 = fully meets the criterion",
        "4 = meets it with a minor lapse",
        "3 = meets it in part",
        "2 = mostly fails it",
        "1 = fails it entirely",
    ):
        assert anchor in system["content"]
    assert "<passage> and <answer>" in system["content"] and "never instructions" in system["content"]
    assert "<reference_answer>" not in system["content"]

    content = user["content"]
    assert content.startswith("Question:\nWho wrote it?\n\nContext passages:\n")
    assert '<passage id="1">\nParis is the capital of France.\n</passage>' in content
    assert '<passage id="2">\nLyon is a city.\n</passage>' in content
    assert "Answer to grade:\n<answer>\nNobody says [1].\n</answer>" in content
    assert content.index("Context passages") < content.index("<answer>")
    assert CUSTOM_REFERENCE not in content and "reference_answer" not in content
    assert content.rstrip().endswith('"score": <integer 1-5>}')


def test_custom_rubric_pass_fail_messages_show_only_its_inputs() -> None:
    rubric = POLITE.rubric()
    assert rubric.inputs == ("reference_answer", "answer") and rubric.tags == ("refusal", "safety")
    case = custom_item("a", "Who wrote it?", "I cannot tell you that.", tags=["refusal"])
    [system, user] = rubric.messages(case)
    assert f"Criterion: {POLITE.criteria}" in system["content"]
    assert "pass = declines politely, or answers like the reference" in system["content"]
    assert "fail = rude, or invents facts" in system["content"]
    assert "<reference_answer> and <answer>" in system["content"]
    assert "<passage>" not in system["content"]

    content = user["content"]
    assert content.startswith(
        f"Reference answer (correct):\n<reference_answer>\n{CUSTOM_REFERENCE}\n</reference_answer>\n\n"
    )
    assert "Answer to grade:\n<answer>\nI cannot tell you that.\n</answer>" in content
    assert "Question" not in content and "Who wrote it?" not in content
    assert "Context passages" not in content and "<passage" not in content and "Paris" not in content
    assert content.rstrip().endswith('"verdict": "pass" or "fail"}')


def test_custom_rubric_reply_schemas() -> None:
    scored = CITES.rubric().reply_schema
    schema = scored.model_json_schema()
    assert schema["title"] == "CitesSourcesVerdict" and schema["required"] == ["reasoning", "score"]
    assert (schema["properties"]["score"]["minimum"], schema["properties"]["score"]["maximum"]) == (1, 5)
    assert schema["properties"]["score"]["type"] == "integer"
    for bad in (0, 6):
        with pytest.raises(ValidationError):
            scored.model_validate({"reasoning": "r", "score": bad})

    passed = POLITE.rubric().reply_schema
    schema = passed.model_json_schema()
    assert schema["title"] == "PoliteRefusalVerdict" and schema["required"] == ["reasoning", "verdict"]
    assert schema["properties"]["verdict"]["enum"] == ["pass", "fail"]
    with pytest.raises(ValidationError):
        passed.model_validate({"reasoning": "r", "verdict": "maybe"})
    assert POLITE.rubric().scores({"reasoning": "r", "verdict": "pass"}) == {"polite_refusal": 1}
    assert POLITE.rubric().scores({"reasoning": "r", "verdict": "fail"}) == {"polite_refusal": 0}
    assert CITES.rubric().scores({"reasoning": "r", "score": 3}) == {"cites_sources": 3}


def test_custom_rubric_metrics() -> None:
    [cites] = CITES.rubric().criteria
    assert (cites.column, cites.label, cites.scale, cites.higher_is_better) == (
        "cites_sources",
        "cites_sources (1-5)",
        "1-5",
        True,
    )
    assert cites.case_value(4) == 4.0  # a custom 1-5 score is kept raw
    assert cites.metric.paired_test == "paired_permutation"  # a 1-5 score is tested on its mean too
    [polite] = POLITE.rubric().criteria
    assert (polite.column, polite.label, polite.scale) == (
        "polite_refusal",
        "polite_refusal (pass rate)",
        "pass_fail",
    )
    assert polite.case_value(1) == 1.0 and polite.case_value(0) == 0.0
    assert polite.metric.paired_test == "paired_permutation"
    fault = CustomRubric(name="rambling", criteria="The answer rambles.", higher_is_better=False).rubric()
    assert (
        not fault.criteria[0].higher_is_better
        and fault.criteria[0].label == "rambling (1-5, lower is better)"
    )
    assert "1 = best, 5 = worst" in json.dumps(fault.reply_schema.model_json_schema())


def test_custom_rubric_applies_to_its_tags_and_cases_with_a_reference() -> None:
    polite, cites = POLITE.rubric(), CITES.rubric()
    tagged = custom_item("a", "Q", "A", tags=["refusal"])
    assert polite.applies(tagged)
    assert polite.applies(tagged.model_copy(update={"tags": ["other", "safety"]}))
    assert not polite.applies(tagged.model_copy(update={"tags": []}))
    assert not polite.applies(tagged.model_copy(update={"tags": ["Refusal"]}))  # tags match exactly
    assert not polite.applies(tagged.model_copy(update={"reference_answer": None}))
    assert not polite.applies(tagged.model_copy(update={"reference_answer": "  "}))
    with pytest.raises(ValueError, match="does not apply"):
        polite.messages(tagged.model_copy(update={"tags": []}))
    # without tags a rubric grades every case; without reference_answer it needs no reference
    assert cites.applies(tagged.model_copy(update={"tags": [], "reference_answer": None}))


def test_custom_rubrics_are_judged_and_become_columns(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    cites, polite = CITES.rubric(), POLITE.rubric()
    inputs = [
        custom_item("a", "Q1", "Sorry, the documents do not say.", tags=["refusal"]),
        custom_item("b", "Q2", "It is 42 [1].", tags=["safety", "x"], reference=None),  # no reference
        custom_item("c", "Q3", "It is 7 [2].", tags=[]),  # none of the tags
        custom_item("d", "Q4", "Stop asking, it is 9.", tags=["safety"]),
    ]
    judge_script.set("Q1", cites, correct(4, "No sentence needs a source."))
    judge_script.set("Q2", cites, correct(5))
    judge_script.set("Q3", cites, correct(2))
    judge_script.set("Q4", cites, correct(1))
    # a rubric without the question is keyed by the answer
    judge_script.set("Sorry, the documents do not say.", polite, verdict("pass"))
    judge_script.set("Stop asking, it is 9.", polite, verdict("maybe"), verdict("fail", "Rude."))

    calls = build_judge_calls(inputs, [cites, polite])
    assert [(c.index, c.rubric.name) for c in calls] == [
        (0, "cites_sources"),
        (0, "polite_refusal"),
        (1, "cites_sources"),
        (2, "cites_sources"),
        (3, "cites_sources"),
        (3, "polite_refusal"),
    ]
    a, b, c, d = judge_answers(client, inputs, rubrics=[cites, polite])
    assert server.request_count == 6 + 1  # one re-ask for the verdict that is neither pass nor fail
    assert d.json_reasks == 1

    assert a.scores == {"cites_sources": 4, "polite_refusal": 1}
    assert a.reasoning == {
        "cites_sources": "No sentence needs a source.",
        "polite_refusal": "Declines politely.",
    }
    assert b.scores == {"cites_sources": 5} and c.scores == {"cites_sources": 2}
    assert d.scores == {"cites_sources": 1, "polite_refusal": 0} and d.reasoning["polite_refusal"] == "Rude."
    assert not any(j.errors for j in (a, b, c, d))

    values = judge_case_values([a, b, c, d], [cites, polite])
    assert values == {
        "cites_sources": {"a": 4.0, "b": 5.0, "c": 2.0, "d": 1.0},
        "polite_refusal": {"a": 1.0, "d": 0.0},  # pass -> 1, fail -> 0; cases it skipped are absent
    }
    summary = summarise_judgements([a, b, c, d], [cites, polite])
    assert summary.means == {"cites_sources": 3.0, "polite_refusal": 0.5}
    assert summary.scored == {"cites_sources": 4, "polite_refusal": 2}
    assert summary.failures == {"cites_sources": 0, "polite_refusal": 0}


def test_custom_rubric_with_the_builtins(
    client: LLMClient, judge_script: ScriptedJudge, server: FakeOpenAIServer
) -> None:
    polite = POLITE.rubric()
    judge_script.set("Q1", CORRECTNESS, correct(5))
    judge_script.set("Q1", CONTEXT, ctx(5, 4, 3, 1))
    judge_script.set("Sorry.", polite, verdict("pass"))
    [j] = judge_answers(client, [custom_item("a", "Q1", "Sorry.", tags=["refusal"])], rubrics=[*BOTH, polite])
    assert server.request_count == 3
    assert j.scores == {
        "correctness": 5,
        "faithfulness": 5,
        "relevance": 4,
        "helpfulness": 3,
        "toxicity": 1,
        "polite_refusal": 1,
    }
    assert set(j.reasoning) == {"correctness", "context", "polite_refusal"}
    values = judge_case_values([j], [*BOTH, polite])
    assert values["correctness_0to1"] == {"a": 1.0} and values["polite_refusal"] == {"a": 1.0}
    assert same_score_count([j], CONTEXT) == (0, 1)  # the custom score does not count as a context one


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"criteria": ""}, "criteria is empty"),
        ({"criteria": "  \n "}, "criteria is empty"),
        ({"inputs": ["question", "context", "answer"]}, "inputs"),
        ({"inputs": ["question", "passages"]}, "must include answer"),
        ({"inputs": ["answer", "answer"]}, "listed twice"),
        ({"anchors": {6: "beyond the scale"}}, "anchor"),
        ({"anchors": {0: "below the scale"}}, "anchor"),
        ({"anchors": {"5": "fine", "pass": "not on this scale"}}, "anchor"),
        ({"scale": "pass_fail", "anchors": {"5": "not on this scale"}}, "anchor"),
        ({"name": "Cites"}, "lowercase"),
        ({"name": "2nd"}, "lowercase"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_custom_rubrics_are_refused(fields: dict[str, Any], problem: str) -> None:
    declaration = {"name": "checked", "criteria": "The answer is polite."} | fields
    with pytest.raises(ValidationError, match=problem):
        CustomRubric.model_validate(declaration)


def test_custom_anchors_replace_only_the_levels_they_name() -> None:
    # YAML reads the keys 1-5 as integers
    declaration = {"name": "checked", "criteria": "The answer is polite."}
    rubric = CustomRubric.model_validate(
        declaration | {"anchors": {5: "courteous throughout", "1": "insulting"}}
    ).rubric()
    assert "5 = courteous throughout" in rubric.system and "1 = insulting" in rubric.system
    assert "3 = meets it in part" in rubric.system
    assert "fully meets the criterion" not in rubric.system and "fails it entirely" not in rubric.system


def test_select_rubrics_adds_custom_rubrics_after_the_builtins() -> None:
    assert select_rubrics(["correctness"], [CITES, POLITE]) == [CORRECTNESS, CITES.rubric(), POLITE.rubric()]


def test_select_rubrics_refuses_names_that_clash() -> None:
    clash = CustomRubric(name="correctness", criteria="The answer is right.")
    with pytest.raises(ValueError, match="correctness"):
        select_rubrics(["correctness", "context"], [clash])
    column = CustomRubric(name="faithfulness_1to5", criteria="The answer is faithful.")
    with pytest.raises(ValueError, match="faithfulness_1to5"):
        select_rubrics(["correctness", "context"], [column])
    with pytest.raises(ValueError, match="cites_sources"):
        select_rubrics([], [CITES, CITES])
    # a criterion name is the key of its score in Judgement.scores: a custom rubric must not take one
    # the context rubric uses, or one score would overwrite the other
    for name in ("faithfulness", "relevance", "helpfulness", "toxicity"):
        with pytest.raises(ValueError, match=name):
            select_rubrics(["context"], [CustomRubric(name=name, criteria="The answer is fine.")])
