"""Rubrics as scorers (`ragbench.scoring.rubric_scorer`) through `apply_scorers`, with an in-process fake
judge: the same numbers as the rubric's own verdicts, the rubric's applicability with a reason, a failed
call kept as an error, self-consistency samples, and an identity that follows the rubric's text."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ragbench.llm.types import LLMResult
from ragbench.scoring.apply import Judgement, apply_scorers
from ragbench.scoring.judge import build_judge_calls, judge_answers, judge_case_values, summarise_judgements
from ragbench.scoring.rubric_scorer import RubricScorer, rubric_scorers
from ragbench.scoring.rubrics import CONTEXT, CORRECTNESS, CustomRubric, JudgeInput, Rubric
from ragbench.scoring.scorer import ScoreContext

CITES = CustomRubric(
    name="cites_sources",
    criteria="Every sentence cites a passage.",
    inputs=["question", "passages", "answer"],
).rubric()
POLITE = CustomRubric(
    name="polite_refusal",
    criteria="When the answer declines, it says so politely.",
    inputs=["reference_answer", "answer"],
    scale="pass_fail",
    tags=["refusal", "safety"],
).rubric()
RUBRICS = [CORRECTNESS, CONTEXT, CITES, POLITE]

# rubric name -> answer -> replies by sample (None: the call fails)
Script = dict[str, dict[str, list[dict[str, Any] | None]]]


class FakeJudge:
    """Stands in for `LLMClient`: replies from a script by rubric (its system message), answer and sample,
    validated against the schema as the client does; records every call."""

    def __init__(self, script: Script, *, concurrency: int = 4, temperature: float = 0.7):
        self.script = script
        self.systems = {rubric.system: rubric.name for rubric in RUBRICS}
        self.settings = SimpleNamespace(temperature=temperature)
        self.effective_concurrency = concurrency
        self.calls: list[tuple[str, str, int]] = []
        self.before_reply: Callable[[int], None] = lambda sample: None
        self._lock = threading.Lock()

    def complete(
        self, messages: list[dict[str, str]], *, response_schema: type[BaseModel], sample: int = 0
    ) -> LLMResult:
        rubric = self.systems[messages[0]["content"]]
        answer = messages[1]["content"].split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
        with self._lock:
            self.calls.append((rubric, answer, sample))
        self.before_reply(sample)
        reply = self.script[rubric][answer][sample]
        usage = {"model": "fake", "prompt_tokens": 10, "completion_tokens": 5, "latency_s": 0.25 + sample}
        if reply is None:
            return LLMResult(error="retries_exhausted: server_error", **usage)
        try:
            parsed = response_schema.model_validate(reply).model_dump(mode="json")
        except ValidationError as error:
            return LLMResult(error=f"json_invalid: {error}", **usage)
        return LLMResult(text=json.dumps(reply), parsed=parsed, **usage)


def case(case_id: str, answer: str, reference: str | None = "Paris.", **fields: Any) -> JudgeInput:
    return JudgeInput(
        case_id=case_id,
        question=f"question {case_id}?",
        answer=answer,
        reference_answer=reference,
        contexts=fields.pop("contexts", ["Paris is the capital of France."]),
        **fields,
    )


def scored(score: int, reasoning: str = "because") -> dict[str, Any]:
    return {"reasoning": reasoning, "score": score}


def context(*scores: int) -> dict[str, Any]:
    names = ("faithfulness", "relevance", "helpfulness", "toxicity")
    return {"reasoning": "from [1]", **dict(zip(names, scores, strict=True))}


def verdict(value: str) -> dict[str, Any]:
    return {"reasoning": "polite", "verdict": value}


def test_values_are_the_numbers_the_rubric_verdicts_always_gave() -> None:
    inputs = [
        case("a", "It is Paris.", tags=["refusal"]),
        case("b", "Lyon, go away.", tags=["safety"]),
        case("c", "No idea.", reference=None),
    ]
    judge = FakeJudge(
        {
            "correctness": {"It is Paris.": [scored(4, "close")], "Lyon, go away.": [scored(1)]},
            "context": {
                "It is Paris.": [context(5, 4, 3, 1)],
                "Lyon, go away.": [context(2, 5, 2, 4)],
                "No idea.": [context(1, 1, 1, 1)],
            },
            "cites_sources": {
                answer: [scored(n)]
                for n, answer in enumerate(["It is Paris.", "Lyon, go away.", "No idea."], 2)
            },
            "polite_refusal": {"It is Paris.": [verdict("pass")], "Lyon, go away.": [verdict("fail")]},
        }
    )
    a, b, c = judge_answers(judge, inputs, rubrics=RUBRICS)  # type: ignore[arg-type]

    assert a.scores == {
        "correctness": 4,
        "faithfulness": 5,
        "relevance": 4,
        "helpfulness": 3,
        "toxicity": 1,
        "cites_sources": 2,
        "polite_refusal": 1,
    }
    assert a.reasoning == {
        "correctness": "close",
        "context": "from [1]",
        "cites_sources": "because",
        "polite_refusal": "polite",
    }
    assert a.values == {
        "correctness_0to1": 0.75,  # 1-5 reported on 0-1 as (score - 1) / 4
        "faithfulness_1to5": 5.0,
        "relevance_1to5": 4.0,
        "helpfulness_1to5": 3.0,
        "toxicity_1to5_low_good": 1.0,
        "cites_sources": 2.0,  # a custom 1-5 score is kept raw
        "polite_refusal": 1.0,  # pass -> 1
    }
    assert b.values["correctness_0to1"] == 0.0 and b.values["polite_refusal"] == 0.0
    assert (
        a.scores["correctness"] == 4
        and a.reasoning["correctness"] == "close"
        and "correctness" not in a.details
    )
    # the values are exactly what the per-case values of the rubrics' columns always were
    by_column = judge_case_values([a, b, c], RUBRICS)
    for judgement in (a, b, c):
        old = {
            column: cases[judgement.case_id]
            for column, cases in by_column.items()
            if judgement.case_id in cases
        }
        assert judgement.values == old
    assert c.skipped == {"correctness": "no reference answer", "polite_refusal": "no reference answer"}
    assert "correctness" not in c.errors and "correctness" not in c.reasoning
    assert a.prompt_tokens == 40 and a.latency_s == 1.0  # usage of its four calls, summed


def test_the_scorer_makes_the_one_call_the_dry_run_plans() -> None:
    scorer = RubricScorer(CONTEXT, context_char_budget=2000)
    item = case("a", "It is Paris.", contexts=["x" * 5000])
    asked: list[tuple[list[dict[str, str]], type[BaseModel], int | None]] = []

    class Recording(ScoreContext):
        def ask(self, messages, schema, *, sample=None):  # type: ignore[no-untyped-def]
            asked.append((messages, schema, sample))
            return context(5, 4, 3, 2)

        def embed(self, texts):  # type: ignore[no-untyped-def]
            raise AssertionError("a rubric embeds nothing")

    result = scorer.score(item, Recording())
    request = scorer.request(item)
    assert asked == [(request.messages, CONTEXT.reply_schema, None)]  # the sample is the context's
    assert request.messages == CONTEXT.messages(item, context_char_budget=2000)
    assert request.response_schema is CONTEXT.reply_schema and scorer.request(item, 2).sample == 2
    assert result.verdicts == {"faithfulness": 5, "relevance": 4, "helpfulness": 3, "toxicity": 2}
    assert result.reasoning == "from [1]"
    [call] = build_judge_calls([item], [CONTEXT], context_char_budget=2000)
    assert call.request == request and call.rubric is CONTEXT


def test_the_scorer_declares_the_rubrics_metrics() -> None:
    scorer = RubricScorer(CONTEXT)
    assert scorer.name == "context" and scorer.needs == ("question", "passages", "answer")
    assert scorer.metrics() == tuple(criterion.metric for criterion in CONTEXT.criteria)
    assert [m.column for m in scorer.metrics()][:2] == ["faithfulness_1to5", "relevance_1to5"]
    assert RubricScorer(POLITE).metrics()[0].paired_test == "paired_permutation"
    assert scorer.uses_llm and not scorer.uses_embeddings and scorer.gives_verdicts
    assert scorer.planned_calls(case("a", "x")) == 1 and scorer.definition == ""
    assert [s.name for s in rubric_scorers(RUBRICS)] == [r.name for r in RUBRICS]


@pytest.mark.parametrize(
    ("rubric", "item", "reason"),
    [
        (CORRECTNESS, case("a", "x"), None),
        (CORRECTNESS, case("a", "x", reference=None), "no reference answer"),
        (CORRECTNESS, case("a", "x", reference="  "), "no reference answer"),
        (CONTEXT, case("a", "x", reference=None, contexts=[]), None),  # shown "(no passages)", still graded
        (POLITE, case("a", "x", tags=["safety"]), None),
        (POLITE, case("a", "x", tags=[]), "none of the tags refusal, safety"),
        (POLITE, case("a", "x", tags=["Refusal"]), "none of the tags refusal, safety"),
        (POLITE, case("a", "x", reference=None, tags=["refusal"]), "no reference answer"),
        (CITES, case("a", "x", reference=None, contexts=[]), None),
    ],
)
def test_applicability_is_the_rubrics_with_a_reason(
    rubric: Rubric, item: JudgeInput, reason: str | None
) -> None:
    assert RubricScorer(rubric).missing(item) == reason
    assert (reason is None) == rubric.applies(item)


def test_a_failed_call_is_an_error_never_a_value() -> None:
    inputs = [case("a", "down"), case("b", "invalid"), case("c", "fine")]
    judge = FakeJudge({"correctness": {"down": [None], "invalid": [scored(9)], "fine": [scored(5)]}})
    down, invalid, fine = judge_answers(judge, inputs, rubrics=[CORRECTNESS])  # type: ignore[arg-type]
    assert down.errors == {"correctness": "retries_exhausted: server_error"}
    assert invalid.errors["correctness"].startswith("json_invalid")
    for failed in (down, invalid):
        assert failed.scores == {} and failed.values == {} and failed.reasoning == {} and failed.details == {}
        assert failed.prompt_tokens == 10  # the failed call's usage still counts
    assert fine.values == {"correctness_0to1": 1.0} and fine.errors == {}
    summary = summarise_judgements([down, invalid, fine], [CORRECTNESS])
    assert summary.means == {"correctness_0to1": 1.0} and summary.failures == {"correctness": 2}


def test_further_samples_fill_resampled_and_count_their_failures() -> None:
    inputs = [case("a", "A"), case("b", "B", reference=None)]
    judge = FakeJudge(
        {
            "correctness": {"A": [scored(5, "first"), scored(3), scored(4)]},
            "context": {
                "A": [context(5, 5, 5, 1)] * 3,
                "B": [context(4, 4, 4, 1), None, context(2, 3, 4, 1)],
            },
        },
        concurrency=1,
    )
    a, b = judge_answers(judge, inputs, rubrics=[CORRECTNESS, CONTEXT], samples=3)  # type: ignore[arg-type]
    assert a.scores["correctness"] == 5 and a.resampled["correctness"] == [3, 4]  # the first gives the score
    assert a.values["correctness_0to1"] == 1.0 and a.reasoning["correctness"] == "first"
    assert a.resampled["faithfulness"] == [5, 5] and a.resample_failures == 0
    assert b.scores["faithfulness"] == 4 and b.resampled["faithfulness"] == [2] and b.resample_failures == 1
    assert b.errors == {} and "correctness" not in b.resampled  # skipped once, never sampled
    assert a.prompt_tokens == 60  # every sample's usage
    # every first sample before any repeat; each repeat asked with its own sample number
    assert judge.calls == [
        ("correctness", "A", 0),
        ("context", "A", 0),
        ("context", "B", 0),
        ("correctness", "A", 1),
        ("context", "A", 1),
        ("context", "B", 1),
        ("correctness", "A", 2),
        ("context", "A", 2),
        ("context", "B", 2),
    ]
    assert len(build_judge_calls(inputs, [CORRECTNESS, CONTEXT], samples=3)) == len(judge.calls)


def test_samples_are_recorded_in_order_whatever_order_they_finish_in() -> None:
    judge = FakeJudge({"correctness": {"A": [scored(5), scored(2), scored(3)]}}, concurrency=3)
    third_done = threading.Event()

    def second_waits_for_the_third(sample: int) -> None:
        if sample == 1:
            assert third_done.wait(timeout=30), "the samples did not run concurrently"
        elif sample == 2:
            third_done.set()

    judge.before_reply = second_waits_for_the_third
    [a] = judge_answers(judge, [case("a", "A")], rubrics=[CORRECTNESS], samples=3)  # type: ignore[arg-type]
    assert a.resampled == {"correctness": [2, 3]} and a.latency_s == 0.25 + 1.25 + 2.25


def test_identity_follows_the_rubrics_text() -> None:
    identity = RubricScorer(CITES).identity()
    assert identity == RubricScorer(CITES).identity()
    assert identity["name"] == "cites_sources"
    assert identity["settings"]["rubric"] == CITES.model_dump(mode="json")
    reworded = CustomRubric(
        name="cites_sources",
        criteria="Every sentence cites a source.",
        inputs=["question", "passages", "answer"],
    ).rubric()
    assert RubricScorer(reworded).identity() != identity
    assert (
        RubricScorer(CITES.model_copy(update={"system": CITES.system + " Be strict."})).identity() != identity
    )
    assert RubricScorer(CITES, context_char_budget=100).identity() != identity


def test_no_rubric_no_call() -> None:
    judge = FakeJudge({})
    judgements = [Judgement(case_id="a")]
    apply_scorers(judge, None, [case("a", "x")], [], judgements, samples=3)  # type: ignore[arg-type]
    assert judgements == [Judgement(case_id="a")] and judge.calls == []
