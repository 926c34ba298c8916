"""ragbench's Ragas family gives the scores of the real ragas 0.4.3 (to 1e-6) when both get the same
scripted judge replies and the same embeddings, and asks the judge the same steps in the same order.

ragas runs in its own environment (`.venv-ragas`, made by `make ragas-venv`, which `make test-slow`
runs first) through tests/conformance/ragas_side.py, with `ragas.evaluate` and its own metric classes. Where
ragbench differs on purpose, a test below names the difference and checks it.
"""

from __future__ import annotations

import json
import math
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbench.scoring.ragas_family import RAGAS_FAMILY
from tests.conformance.scripted import case_of, score

pytestmark = pytest.mark.slow  # needs .venv-ragas, which only make test-slow builds

ROOT = Path(__file__).resolve().parents[2]
RAGAS_PYTHON = ROOT / ".venv-ragas" / "bin" / "python"
RAGAS_SIDE = ROOT / "tests" / "conformance" / "ragas_side.py"
TOLERANCE = 1e-6

QUESTION = "When did the Hubble telescope launch?"
ANSWER = "Hubble launched in 1990 on the shuttle Discovery. It orbits at 540 km."
REFERENCE = "The Hubble Space Telescope was launched on 24 April 1990 by Space Shuttle Discovery."
PASSAGES = [
    "Hubble was carried into orbit by Discovery in April 1990.",
    "The James Webb telescope launched in December 2021.",
    "Hubble orbits Earth at an altitude of about 540 kilometres.",
    "Discovery flew 39 missions before it retired in 2011.",
    "Servicing missions repaired Hubble five times.",
]


def vector(text: str) -> list[float]:
    """A fixed, unnormalised vector per text (so both sides must normalise the same way)."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return (rng.uniform(-0.3, 1.0, size=8) * rng.uniform(0.5, 3.0)).tolist()


def entry(step: str, *replies: dict, when: str | None = None) -> dict[str, Any]:
    return {"step": step, "replies": list(replies)} | ({"when": when} if when else {})


def statements(*texts: str, when: str | None = None) -> dict[str, Any]:
    return entry("statements", {"statements": list(texts)}, when=when)


def faithfulness(name: str, found: list[str], verdicts: list[int], **extra: Any) -> dict[str, Any]:
    judged = [
        {"statement": f"statement {i}", "reason": "the passages say so" if v else "not stated", "verdict": v}
        for i, v in enumerate(verdicts)
    ]
    replies = [statements(*found), entry("verdicts", {"statements": judged})]
    return (
        {"id": f"faithfulness/{name}", "metric": "faithfulness", "contexts": PASSAGES[:3]}
        | {
            "question": QUESTION,
            "answer": ANSWER,
            "replies": replies,
        }
        | extra
    )


def relevancy(name: str, generated: list[tuple[str, int]], **extra: Any) -> dict[str, Any]:
    replies = [entry("question", *({"question": q, "noncommittal": n} for q, n in generated))]
    vectors = {text: vector(text) for text in [QUESTION, *(q for q, _ in generated)]}
    scenario = {"id": f"answer_relevancy/{name}", "metric": "answer_relevancy", "question": QUESTION}
    return scenario | {"answer": ANSWER, "replies": replies, "vectors": vectors} | extra


def precision(name: str, verdicts: list[int]) -> dict[str, Any]:
    passages = PASSAGES[: len(verdicts)]
    replies = [
        entry("usefulness", {"reason": "it names the launch" if v else "unrelated", "verdict": v}, when=p)
        for p, v in zip(passages, verdicts, strict=True)
    ]
    scenario = {"id": f"context_precision/{name}", "metric": "context_precision", "question": QUESTION}
    return scenario | {"answer": ANSWER, "reference": REFERENCE, "contexts": passages, "replies": replies}


def recall(name: str, attributed: list[int]) -> dict[str, Any]:
    sentences = [
        {"statement": f"sentence {i}", "reason": "in passage 1" if a else "absent", "attributed": a}
        for i, a in enumerate(attributed)
    ]
    scenario = {"id": f"context_recall/{name}", "metric": "context_recall", "question": QUESTION}
    return scenario | {
        "answer": ANSWER,
        "reference": REFERENCE,
        "contexts": PASSAGES[:3],
        "replies": [entry("attribution", {"classifications": sentences})],
    }


def similarity(name: str, **vectors: list[float]) -> dict[str, Any]:
    chosen = {"answer": vector(ANSWER), "reference": vector(REFERENCE)} | vectors
    scenario = {"id": f"answer_similarity/{name}", "metric": "answer_similarity", "question": QUESTION}
    return scenario | {
        "answer": ANSWER,
        "reference": REFERENCE,
        "vectors": {ANSWER: chosen["answer"], REFERENCE: chosen["reference"]},
    }


def correctness(
    name: str, found: list[str], expected: list[str], counts: tuple[int, int, int] | None, **vectors: Any
) -> dict[str, Any]:
    replies = [statements(*found, when=ANSWER), statements(*expected, when=REFERENCE)]
    if counts is not None:
        lists = {
            kind: [{"statement": f"{kind} {i}", "reason": "compared"} for i in range(count)]
            for kind, count in zip(("TP", "FP", "FN"), counts, strict=True)
        }
        replies.append(entry("classification", lists))
    scenario = similarity(name, **vectors) | {"replies": replies, "metric": "answer_correctness"}
    return scenario | {"id": f"answer_correctness/{name}"}


ZERO = [0.0] * 8
ONE_HOT = [1.0] + [0.0] * 7
SCENARIOS = [
    faithfulness("ordinary", ["Hubble launched in 1990.", "Hubble launched on Discovery.", "x"], [1, 1, 0]),
    faithfulness("all_supported", ["Hubble launched in 1990.", "Hubble orbits at 540 km."], [1, 1]),
    faithfulness("none_supported", ["Hubble is made of cheese.", "Hubble sings."], [0, 0]),
    faithfulness("no_statements", [], []),
    faithfulness("fewer_verdicts_than_statements", ["a", "b", "c"], [1, 0]),
    faithfulness("no_verdicts", ["Hubble launched in 1990."], []),
    relevancy("ordinary", [("When was Hubble launched?", 0), ("What did Discovery carry?", 0), ("Q3?", 0)]),
    relevancy("same_as_question", [(QUESTION, 0)] * 3),
    relevancy("noncommittal", [("What is Hubble?", 1)] * 3),
    relevancy("some_noncommittal", [("Q1?", 1), ("Q2?", 0), ("Q3?", 1)]),
    relevancy("temperature_0", [("When was Hubble launched?", 0)] * 3, samples_differ=False),
    relevancy("no_question", [("", 0)] * 3),
    relevancy("one_empty_question", [("", 0), ("When was Hubble launched?", 0), ("Q2?", 0)]),
    relevancy(
        "opposite_vectors",
        [("Q1?", 0), ("Q2?", 0), ("Q3?", 0)],
        vectors={QUESTION: ONE_HOT, "Q1?": [-2.0] + [0.0] * 7, "Q2?": vector("Q2?"), "Q3?": vector("Q3?")},
    ),
    relevancy(
        "zero_vector",
        [("Q1?", 0), ("Q2?", 0), ("Q3?", 0)],
        vectors={QUESTION: vector(QUESTION), "Q1?": ZERO, "Q2?": vector("Q2?"), "Q3?": vector("Q3?")},
    ),
    precision("mixed", [1, 0, 1]),
    precision("relevant_late", [0, 0, 1, 0, 1]),
    precision("all_useful", [1, 1, 1, 1]),
    precision("none_useful", [0, 0, 0]),
    precision("single_useful", [1]),
    precision("single_useless", [0]),
    recall("ordinary", [1, 0, 1, 1]),
    recall("all_attributed", [1, 1]),
    recall("none_attributed", [0, 0, 0]),
    recall("no_sentences", []),
    similarity("ordinary"),
    similarity("identical", answer=[3.0, 4.0] + [0.0] * 6, reference=[0.6, 0.8] + [0.0] * 6),
    similarity("orthogonal", answer=ONE_HOT, reference=[0.0, 2.0] + [0.0] * 6),
    similarity("opposite", answer=ONE_HOT, reference=[-5.0] + [0.0] * 7),
    similarity("zero_vector", answer=ZERO),
    correctness("ordinary", ["a1", "a2", "a3"], ["r1", "r2"], (2, 1, 1)),
    correctness("all_true", ["a1", "a2"], ["r1", "r2"], (2, 0, 0)),
    correctness("all_false", ["a1"], ["r1", "r2"], (0, 1, 2)),
    correctness("no_statements_either_side", [], [], None),
    correctness("no_answer_statements", [], ["r1", "r2"], (0, 0, 2)),
    correctness("no_reference_statements", ["a1"], [], (0, 1, 0)),
    correctness("zero_vector", ["a1"], ["r1"], (1, 0, 0), reference=ZERO),
]
BY_ID = {scenario["id"]: scenario for scenario in SCENARIOS}
# Scored by ragas only: ragbench does not score it (test_an_empty_answer_is_skipped_not_scored).
EMPTY_ANSWER = similarity("empty_answer") | {
    "answer": "",
    "vectors": {" ": vector(" "), REFERENCE: vector(REFERENCE)},
}


@pytest.fixture(scope="module")
def ragas() -> dict[str, dict[str, Any]]:
    """Every scenario scored by ragas 0.4.3, in one process (importing ragas takes a few seconds)."""
    if not RAGAS_PYTHON.is_file():
        pytest.fail(f"{RAGAS_PYTHON} is missing: run `make ragas-venv` (make test-slow runs it)")
    done = subprocess.run(
        [str(RAGAS_PYTHON), str(RAGAS_SIDE)],
        input=json.dumps([*SCENARIOS, EMPTY_ANSWER]),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def ragas_steps(asked: list[list[Any]]) -> list[str]:
    """ragas's calls as one step per generation (a call with n=3 is three)."""
    return [step for step, n in asked for _ in range(n)]


@pytest.mark.parametrize("scenario_id", list(BY_ID))
def test_same_score_and_calls_as_ragas(scenario_id: str, ragas: dict[str, dict[str, Any]]) -> None:
    scenario = BY_ID[scenario_id]
    theirs = ragas[scenario_id]
    ours, context = score(scenario)
    if theirs["score"] is None:
        # Difference on purpose: ragas's NaN is no value in ragbench, with the reason in the details.
        assert ours.values == {}
        assert ours.details["undefined"]
    else:
        assert ours.values[scenario["metric"]] == pytest.approx(theirs["score"], abs=TOLERANCE, rel=0)
        assert math.isfinite(ours.values[scenario["metric"]])
    ours_steps = [step for step, _ in context.asked]
    if scenario.get("samples_differ", True):
        assert ours_steps == ragas_steps(theirs["asked"])


def test_temperature_0_asks_the_question_once(ragas: dict[str, dict[str, Any]]) -> None:
    """Difference on purpose: with identical samples ragbench generates the question once and counts it
    `strictness` times; ragas asks for 3 generations. The score is the same (checked above)."""
    theirs = ragas["answer_relevancy/temperature_0"]
    _, context = score(BY_ID["answer_relevancy/temperature_0"])
    assert theirs["asked"] == [["question", 3]]
    assert context.asked == [("question", 0)]


def test_samples_are_asked_apart_when_they_differ() -> None:
    """ragas asks one call for n=3 generations; ragbench's client has no n, so it asks samples 0, 1, 2."""
    _, context = score(BY_ID["answer_relevancy/ordinary"])
    assert context.asked == [("question", 0), ("question", 1), ("question", 2)]


def test_context_precision_without_the_epsilon(ragas: dict[str, dict[str, Any]]) -> None:
    """Difference on purpose: ragas divides by (useful passages + 1e-10); ragbench gives the exact average
    precision (0 when no passage is useful, as ragas's 0 / 1e-10 does)."""
    ours, _ = score(BY_ID["context_precision/mixed"])
    assert ours.values["context_precision"] == (1 + 2 / 3) / 2
    assert abs(ragas["context_precision/mixed"]["score"] - (1 + 2 / 3) / 2) < 1e-9
    assert ragas["context_precision/none_useful"]["score"] == 0.0
    assert score(BY_ID["context_precision/none_useful"])[0].values["context_precision"] == 0.0


def test_an_empty_answer_is_skipped_not_scored(ragas: dict[str, dict[str, Any]]) -> None:
    """Difference on purpose: ragas embeds an empty answer as " " and scores it; ragbench's scorers name
    the missing field and leave the case out (`Scorer.missing`), as for every scorer and rubric."""
    assert math.isfinite(ragas[EMPTY_ANSWER["id"]]["score"])
    assert RAGAS_FAMILY["answer_similarity"]().missing(case_of(EMPTY_ANSWER)) == "no answer"


def test_every_metric_has_several_scenarios() -> None:
    per_metric = {name: sum(s["metric"] == name for s in SCENARIOS) for name in RAGAS_FAMILY}
    assert min(per_metric.values()) >= 4, per_metric
