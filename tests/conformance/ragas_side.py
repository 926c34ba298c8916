"""Ragas's own scores for conformance scenarios: run with the python of `.venv-ragas` (`make ragas-venv`),
scenarios as a JSON list on stdin, one result per scenario as JSON on stdout.

Each scenario is scored by `ragas.evaluate` with the metric class it runs for that name in ragas 0.4.3
(the legacy `ragas.metrics` classes: `evaluate` takes no other), a ragas LLM that answers from the
scenario's script and embeddings that return the scenario's vectors. A scripted reply is chosen by the
step (the output model ragas asks for) and, where a step is asked more than once, by a text (`when`) that
the call's input holds. The result is the score (null for NaN) and the steps asked, in order.

Imports nothing of ragbench: it runs in its own environment, whose langchain is not ragbench's.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

os.environ["RAGAS_DO_NOT_TRACK"] = "true"
os.environ["HF_HUB_OFFLINE"] = "1"
warnings.filterwarnings("ignore")

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.outputs import Generation, LLMResult  # noqa: E402
from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402
from ragas.llms.base import BaseRagasLLM  # noqa: E402
from ragas.metrics import (  # noqa: E402
    AnswerCorrectness,
    AnswerRelevancy,
    AnswerSimilarity,
    ContextPrecision,
    ContextRecall,
    Faithfulness,
)

# The classes behind ragas's metric names (ContextPrecision is the variant judged against the reference).
METRICS = {
    "faithfulness": Faithfulness,
    "answer_relevancy": AnswerRelevancy,
    "context_precision": ContextPrecision,
    "context_recall": ContextRecall,
    "answer_similarity": AnswerSimilarity,
    "answer_correctness": AnswerCorrectness,
}
# The steps by the output model ragas asks for (the title of the JSON Schema in its prompt).
STEPS = {
    "StatementGeneratorOutput": "statements",
    "NLIStatementOutput": "verdicts",
    "ResponseRelevanceOutput": "question",
    "Verification": "usefulness",
    "ContextRecallClassifications": "attribution",
    "ClassificationWithReason": "classification",
}
_SCHEMA_START = "as specified in JSON Schema:\n"
_SCHEMA_END = "Do not use single quotes"
_INPUT_START = "Now perform the same with the following input\ninput: "


def _strings(value: Any) -> list[str]:
    """Every string in a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


@dataclass
class ScriptedLLM(BaseRagasLLM):
    """Answers each prompt with the scenario's scripted replies for its step, `n` of them."""

    script: list[dict[str, Any]] = field(default_factory=list)
    asked: list[list[Any]] = field(default_factory=list)

    def _reply(self, prompt: str, n: int) -> LLMResult:
        schema = prompt[prompt.index(_SCHEMA_START) + len(_SCHEMA_START) : prompt.index(_SCHEMA_END)]
        step = STEPS[json.loads(schema)["title"]]
        data = prompt[prompt.rindex(_INPUT_START) + len(_INPUT_START) : prompt.rindex("\nOutput: ")]
        haystack = "\n".join(_strings(json.loads(data)))
        entries = [entry for entry in self.script if entry["step"] == step]
        if len(entries) > 1:
            entries = [entry for entry in entries if entry["when"] in haystack]
        if len(entries) != 1:
            raise LookupError(f"{len(entries)} scripted replies fit step {step} with input {haystack!r}")
        self.asked.append([step, n])
        replies = entries[0]["replies"][:n]
        return LLMResult(generations=[[Generation(text=json.dumps(reply)) for reply in replies]])

    def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None) -> LLMResult:
        return self._reply(prompt.to_string(), n)

    async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None) -> LLMResult:
        return self._reply(prompt.to_string(), n)

    def is_finished(self, response: LLMResult) -> bool:
        return True


class ScriptedEmbeddings(Embeddings):
    """The scenario's vector for each text (`evaluate` wraps it as it wraps any langchain embeddings)."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


def score(scenario: dict[str, Any]) -> dict[str, Any]:
    """Ragas's score of one scenario (None for NaN) and the steps it asked, each with its `n`."""
    sample = SingleTurnSample(
        user_input=scenario["question"],
        response=scenario["answer"],
        reference=scenario.get("reference"),
        retrieved_contexts=scenario.get("contexts"),
    )
    llm = ScriptedLLM(script=scenario.get("replies", []))
    result = evaluate(
        EvaluationDataset(samples=[sample]),
        metrics=[METRICS[scenario["metric"]]()],
        llm=llm,
        embeddings=ScriptedEmbeddings(scenario.get("vectors", {})),
        show_progress=False,
        raise_exceptions=True,
    )
    value = float(result.scores[0][scenario["metric"]])
    return {"score": None if value != value else value, "asked": llm.asked}


def main() -> None:
    scenarios = json.load(sys.stdin)
    json.dump({scenario["id"]: score(scenario) for scenario in scenarios}, sys.stdout)


if __name__ == "__main__":
    main()
