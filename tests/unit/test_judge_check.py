"""`check_judge` through the loopback fake OpenAI server: the planted verdicts go through the rubric
scorer's path, and the card is the one the judge's raw replies give (scores, failures, seconds per call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbench.analysis.judge_card import PlantedVerdict, build_card, planted_inputs, sample_cases
from ragbench.analysis.judge_check import check_judge
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMRequest, LLMSettings
from ragbench.scoring.planted import PLANTED_KINDS, UNCHANGED, knowledge_vocabulary
from ragbench.scoring.registry import JudgeCheckConfig
from ragbench.scoring.rubrics import CORRECTNESS

try:
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:  # tests/ on sys.path instead of the repo root
    from fake_openai_server import FakeOpenAIServer  # type: ignore[no-redef]

DOCUMENTS = ["A KeyError or a TypeError is raised by dict lookups; ValueError by int('x')."]
CASES = [
    EvalCase(id="a", question="What is raised?", reference_answer="A TypeError is raised for 2 items."),
    EvalCase(
        id="b", question="Which error?", reference_answer="A KeyError is raised when the key is missing."
    ),
]


def answer_of(request: dict[str, Any]) -> str:
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return prompt.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]


def test_the_card_comes_from_the_rubric_scorers_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = JudgeCheckConfig(cases=2, seed=0)
    planted = planted_inputs(
        sample_cases(CASES, check.cases, check.seed), knowledge_vocabulary(DOCUMENTS), check.seed
    )
    planted = [
        entry for entry in planted if entry.kind == UNCHANGED or entry.kind in CORRECTNESS.judge_check_kinds
    ]
    references = {case.reference_answer for case in CASES}
    failing = next(item.answer for item, kind, _ in planted if kind != UNCHANGED)

    def judge(request: dict[str, Any]) -> str:
        answer = answer_of(request)
        score = 9 if answer == failing else 5 if answer in references else 1  # 9: never a valid verdict
        return json.dumps({"reasoning": "compared", "score": score})

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    cache = tmp_path / "cache"
    with FakeOpenAIServer(responder=judge) as server:
        settings = LLMSettings(model="openai/fake", api_base=server.base_url, max_retries=0, json_retries=1)
        card = check_judge(
            settings, "fake", CASES, DOCUMENTS, CORRECTNESS, check, confidence=0.95, llm_cache=str(cache)
        )
        assert server.request_count == len(planted) + 1  # one re-ask of the invalid verdict

        # what the card was built from before: the raw results (those that succeeded now from the cache)
        with LLMClient(settings, cache_location=cache, progress=False) as client:
            results = client.complete_many(
                [
                    LLMRequest(CORRECTNESS.messages(item), response_schema=CORRECTNESS.reply_schema)
                    for item, _, _ in planted
                ]
            )
    assert [v.case_id for v in card.verdicts] == [item.case_id for item, _, _ in planted]
    scores = [v.score for v in card.verdicts]
    assert scores.count(None) == 1 and card.parse_failures == 1
    assert {score for score in scores if score is not None} == {1, 5}
    for verdict, result in zip(card.verdicts, results, strict=True):
        assert verdict.seconds is not None and verdict.seconds > 0
        if result.cached:
            assert verdict.seconds == result.latency_s  # the time of the call the verdict came from
    expected = [
        PlantedVerdict(
            case_id=item.case_id,
            kind=kind,
            change=change,
            score=None if result.parsed is None else CORRECTNESS.scores(result.parsed)["correctness"],
            seconds=result.latency_s if result.cached else verdict.seconds,
        )
        for (item, kind, change), result, verdict in zip(planted, results, card.verdicts, strict=True)
    ]
    assert card == build_card(
        expected,
        judge="fake",
        rubric="correctness",
        criterion="correctness",
        min_detection=check.min_detection,
        confidence=0.95,
        scale="1-5",
        counted_kinds=CORRECTNESS.judge_check_kinds or PLANTED_KINDS,
    )


def test_a_card_the_spend_cap_cut_counts_its_unasked_verdicts_apart(tmp_path, monkeypatch):
    """Under a cap of 3 calls the card's other verdicts are never sent: they are the cap's, not parse
    failures, and the card says it is partial."""
    from ragbench.llm.budget import BudgetConfig, SpendAccount, spending

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    check = JudgeCheckConfig(cases=2, seed=0)
    reply = json.dumps({"reasoning": "compared", "score": 5})
    cache = str(tmp_path / "cache")
    with FakeOpenAIServer(responder=lambda _: reply) as server:
        settings = LLMSettings(model="openai/fake", api_base=server.base_url, max_retries=0)
        with spending(SpendAccount.new(BudgetConfig(max_calls=3), cache)):
            card = check_judge(
                settings, "fake", CASES, DOCUMENTS, CORRECTNESS, check, confidence=0.95, llm_cache=cache
            )
        assert server.request_count == 3
    assert card.parse_failures == 0 and card.refused_by_budget == len(card.verdicts) - 3
