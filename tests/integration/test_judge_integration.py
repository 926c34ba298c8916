"""The offline default judge for real: Qwen2.5-Coder-1.5B in llama.cpp grades a right and a wrong answer.

Needs llama-cpp-python and the packaged GGUF (provisioned on first use); fails rather than skips.
"""

from __future__ import annotations

import time

import pytest

from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.scoring.judge import judge_answers, summarise_judgements
from ragbench.scoring.rubrics import CONTEXT, CORRECTNESS, JudgeInput

# Four local 1.5B verdicts, about 4 min on a loaded machine.
pytestmark = pytest.mark.slow

CONTEXTS = [
    "ZenML runs pipelines on the local orchestrator unless a stack with another orchestrator is "
    "active. The local orchestrator executes every step in the current Python process.",
    "Remote orchestrators such as Kubeflow, Airflow or Vertex AI can be registered as part of a stack.",
]
QUESTION = "Which orchestrator does ZenML use by default?"
REFERENCE = "The local orchestrator, which runs the pipeline steps on your own machine."


def test_local_judge_tells_right_from_wrong(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = LLMSettings(model="local/qwen2.5-coder-1.5b-instruct", temperature=0.0, max_tokens=256)
    client = LLMClient(settings, cache_location=tmp_path_factory.mktemp("judge-cache"), progress=False)
    inputs = [
        JudgeInput(
            case_id="right",
            question=QUESTION,
            answer="By default ZenML uses the local orchestrator, which runs all steps on your machine.",
            reference_answer=REFERENCE,
            contexts=CONTEXTS,
        ),
        JudgeInput(
            case_id="wrong",
            question=QUESTION,
            answer="ZenML uses Apache Airflow by default; every pipeline is sent to an Airflow cluster.",
            reference_answer=REFERENCE,
            contexts=CONTEXTS,
        ),
    ]

    started = time.perf_counter()
    right, wrong = judge_answers(client, inputs, rubrics=[CORRECTNESS, CONTEXT])
    elapsed = time.perf_counter() - started
    stats = client.stats.snapshot()
    print(f"\njudge: 4 calls in {elapsed:.1f}s (incl. model load); stats={stats}")
    for judgement in (right, wrong):
        print(judgement.model_dump_json(indent=1))

    criteria = ("faithfulness", "relevance", "helpfulness", "toxicity")
    for judgement in (right, wrong):
        assert judgement.errors == {}
        assert set(judgement.scores) == {"correctness", *criteria}
        assert all(1 <= score <= 5 for score in judgement.scores.values())
        assert judgement.reasoning["correctness"] and set(judgement.reasoning) == {"correctness", "context"}
    assert right.scores["correctness"] > wrong.scores["correctness"]

    summary = summarise_judgements([right, wrong], [CORRECTNESS, CONTEXT])
    assert summary.scored == {
        "correctness_0to1": 2,
        "faithfulness_1to5": 2,
        "relevance_1to5": 2,
        "helpfulness_1to5": 2,
        "toxicity_1to5_low_good": 2,
    }
    assert summary.failures == {"correctness": 0, "context": 0}
