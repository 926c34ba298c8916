"""Eval-set generation through the real LLM client against the loopback fake server with scripted replies:
the evolution mix, the unanswerable share, the critique filter, de-duplication, and how failures count."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragbench.config.model import ConfigError, load_config
from ragbench.config.preflight import PreflightError, run_testset_preflight
from ragbench.inputs.chunking import Chunk
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.testset.assemble import build_eval_set, good_words, near_duplicates
from ragbench.testset.critique import critique_candidates
from ragbench.testset.generate import generate_candidates
from ragbench.testset.labels import CandidateLabel
from ragbench.testset.plan import Seed, allocate, assign_kinds, plan_seeds, related_chunk, sample_chunks
from ragbench.testset.roundtrip import roundtrip_filter
from ragbench.testset.rubrics import GeneratedQA, check_standalone
from tests.fake_openai_server import FakeOpenAIServer

PASSAGES = {
    "assert": "A failing assert statement raises AssertionError when its condition is false; with -O the "
    "interpreter removes assert statements entirely.",
    "loops": "The break statement ends the innermost enclosing for or while loop at once, skipping the "
    "loop's optional else clause.",
    "files": "The with statement closes a file automatically when its block ends, even when the block "
    "raises an exception.",
    "files-again": "Opening a file with the with statement guarantees that the file is closed when the "
    "block is left.",
    "imports": "The import statement finds a module, loads it, and binds a name in the local namespace.",
}
# The question the scripted generator writes from each passage (files and files-again: the same one).
QUESTIONS = {
    "assert": ("Which exception does a failing assert statement raise?", "It raises AssertionError."),
    "loops": ("How do I leave a for loop before it has finished?", "Use break; it ends the loop."),
    "files": ("What closes a file automatically in Python code?", "The with statement closes it."),
    "files-again": ("What closes a file automatically in Python code?", "The with statement closes it."),
    "imports": ("What does the passage say about the import statement?", "It loads a module."),
}
UNANSWERABLE = {
    "files": "How many files can one Python process keep open at once?",  # critic: not answered (5)
    "loops": "Does the break statement end the innermost loop only?",  # critic: answered (1)
}


def passage_name(text: str) -> str:
    return next(name for name, passage in PASSAGES.items() if passage[:40] in text)


def script(request: dict) -> str:
    """The generator's and the critics' replies, chosen by what the request asks for."""
    system = request["messages"][0]["content"]
    user = request["messages"][1]["content"]  # the task (a re-ask comes after it)
    if system.startswith("You write test questions"):
        name = passage_name(user)
        if "does NOT answer" in user:
            return json.dumps({"question": UNANSWERABLE[name]})
        if "plain question and its answer" in user:
            return json.dumps(
                {
                    "question": "If an assert's condition is false, which exception is raised?",
                    "answer": "AssertionError.",
                }
            )
        question, answer = QUESTIONS[name]
        return json.dumps({"question": question, "answer": answer})
    question = user.split("<question>")[1].split("</question>")[0].strip()
    rating = 5
    if "Grade the proposed answer" in system and "loop" in question:
        rating = 2  # groundedness rejects the loop question
    if "meant to be one the documentation does NOT answer" in system and "innermost" in question:
        rating = 1  # the "unanswerable" loop question is answered by the knowledge base
    return json.dumps({"reasoning": f"scripted rating {rating}", "rating": rating})


def chunk(name: str) -> SourceChunk:
    return SourceChunk(source=f"{name}.md", start_index=0, text=PASSAGES[name])


def seed(name: str, evolution: str, *names: str) -> Seed:
    return Seed(id=f"{evolution}-{name}", evolution=evolution, chunks=[chunk(n) for n in (name, *names)])


def one_hot(texts: list[str]) -> np.ndarray:
    """Identical questions get identical vectors, different ones orthogonal ones."""
    vectors = np.zeros((len(texts), 64), dtype=np.float32)
    for row, text in enumerate(texts):
        vectors[row, int(hashlib.sha256(text.encode()).hexdigest(), 16) % 64] = 1.0
    return vectors


@pytest.fixture
def server():
    with FakeOpenAIServer(responder=script) as fake:
        yield fake


def client_for(server: FakeOpenAIServer, tmp_path: Path, model: str) -> LLMClient:
    settings = LLMSettings(model=model, api_base=server.base_url, max_retries=0, json_retries=1)
    return LLMClient(settings, cache_location=tmp_path / "llm", backoff_base_s=0.001, progress=False)


def make_set(server: FakeOpenAIServer, tmp_path: Path, seeds: list[Seed], monkeypatch, thresholds=None):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with client_for(server, tmp_path, "openai/fake-generator") as generator:
        candidates = generate_candidates(generator, seeds, audience="Python programmers")
    retrieved = {s.id: [chunk("loops")] for s in seeds if s.evolution == "unanswerable"}
    with client_for(server, tmp_path, "openai/fake-critic") as critic:
        critiques = critique_candidates(critic, candidates, retrieved, audience="Python programmers")
    return build_eval_set(
        "test-set",
        candidates,
        critiques,
        None,
        thresholds=thresholds or {"groundedness": 4, "relevance": 4, "standalone": 4, "unanswerable": 4},
        corpus_texts=list(PASSAGES.values()),
        embed=one_hot,
        duplicate_similarity=0.9,
        max_good_words=3,
    )


SEEDS = [
    seed("assert", "simple"),
    seed("loops", "simple"),
    seed("files", "simple"),
    seed("files-again", "simple"),
    seed("assert", "reasoning"),
    seed("files", "unanswerable"),
    seed("loops", "unanswerable"),
    seed("imports", "simple"),
]


def test_critique_filter_dedup_and_unanswerable_cases(server, tmp_path, monkeypatch) -> None:
    eval_set = make_set(server, tmp_path, SEEDS, monkeypatch)
    kept = {case.id: case for case in eval_set.cases}
    rejected = {case.id: case for case in eval_set.rejected}
    assert sorted(kept) == ["reasoning-assert", "simple-assert", "simple-files", "unanswerable-files"]
    # groundedness 2 < 4; the unanswerable question the knowledge base answers; the repeated question
    assert rejected["simple-loops"].provenance.rejected_because == ["groundedness 2 < 4"]
    assert rejected["unanswerable-loops"].provenance.rejected_because == ["unanswerable 1 < 4"]
    assert rejected["simple-files-again"].provenance.rejected_because == [
        "near-duplicate of simple-files (cosine 1.00)"
    ]
    # "the passage" in every reply: no valid question, counted, not a failed call
    assert "simple-imports" not in kept and "simple-imports" not in rejected
    summary = eval_set.summary
    assert summary["generator_invalid"] == 1 and summary["generator_failures"] == 0
    assert summary["not_generated"][0]["id"] == "simple-imports"
    assert summary["rejected_by"] == {"groundedness": 1, "unanswerable": 1}
    assert summary["duplicates_removed"] == 1 and summary["kept"] == 4 and summary["generated"] == 7
    assert summary["by_evolution"]["simple"] == {"planned": 5, "generated": 4, "kept": 2}

    answerable, declines = kept["simple-assert"], kept["unanswerable-files"]
    assert answerable.reference_answer == "It raises AssertionError."
    assert answerable.expected_sources == ["assert.md"] and answerable.good_words == ["AssertionError"]
    assert answerable.expected_behaviour == "answers" and answerable.case_type == "simple"
    assert declines.expected_behaviour == "declines" and declines.reference_answer is None
    assert declines.expected_sources == [] and declines.provenance.checked_against == ["loops.md@0"]
    # every critic that applies rated, with its reasoning; unanswerable cases are not rated on groundedness
    assert [c.criterion for c in answerable.provenance.critiques] == [
        "groundedness",
        "relevance",
        "standalone",
    ]
    assert [c.criterion for c in declines.provenance.critiques] == ["relevance", "standalone", "unanswerable"]
    assert all(c.reasoning == "scripted rating 5" for c in answerable.provenance.critiques)
    evolved = kept["reasoning-assert"].provenance
    assert evolved.seed_question == QUESTIONS["assert"][0] and evolved.evolution == "reasoning"
    # generator and critic are different models, both recorded
    assert (evolved.generator, evolved.critic) == ("openai/fake-generator", "openai/fake-critic")
    models = Counter(request["model"] for request in server.requests)
    assert set(models) == {"fake-generator", "fake-critic"}
    # three critics per generated candidate, less the two the cache answered: the repeated question's
    # relevance and standalone requests are the same as the first's
    assert models["fake-critic"] == 3 * 7 - 2
    lines = eval_set.jsonl().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [case.id for case in eval_set.cases]


def test_thresholds_decide_what_is_kept(server, tmp_path, monkeypatch) -> None:
    thresholds = {"groundedness": 2, "relevance": 4, "standalone": 4, "unanswerable": 4}
    lenient = make_set(server, tmp_path, SEEDS[:2], monkeypatch, thresholds)
    assert sorted(case.id for case in lenient.cases) == ["simple-assert", "simple-loops"]


def test_a_failed_generator_call_is_counted_as_a_failure_not_kept(server, tmp_path, monkeypatch) -> None:
    server.inject("server_error")
    eval_set = make_set(server, tmp_path, SEEDS[:2], monkeypatch)
    assert eval_set.summary["generator_failures"] == 1
    reason = eval_set.summary["not_generated"][0]["reason"]
    assert reason.startswith("question: ") and "json_invalid" not in reason
    assert eval_set.summary["generator_invalid"] == 0
    assert len(eval_set.cases) + len(eval_set.rejected) == 1


def test_a_failed_critic_call_rejects_the_case_and_is_counted(server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with client_for(server, tmp_path, "openai/fake-generator") as generator:
        candidates = generate_candidates(generator, SEEDS[:1], audience="Python programmers")
    server.inject("server_error")
    with client_for(server, tmp_path, "openai/fake-critic") as critic:
        critiques = critique_candidates(critic, candidates, {}, audience="Python programmers")
    assert critiques.failures == 1
    eval_set = build_eval_set(
        "s",
        candidates,
        critiques,
        None,
        thresholds={"groundedness": 4, "relevance": 4, "standalone": 4, "unanswerable": 4},
        corpus_texts=[],
        embed=one_hot,
        duplicate_similarity=0.9,
        max_good_words=3,
    )
    assert not eval_set.cases and eval_set.summary["critic_failures"] == 1
    assert "critic call failed" in eval_set.rejected[0].provenance.rejected_because[0]


def several_questions(request: dict) -> str:
    """A generator asked for several questions writes three, one of them twice."""
    user = request["messages"][1]["content"]
    if "plain question and its answer" in user:
        question = user.split("<question>")[1].split("</question>")[0].strip()
        return json.dumps({"question": f"{question} Explain why.", "answer": "Because it says so."})
    assert "Do this 3 times" in user
    cases = [
        {"question": "Which exception does a failing assert statement raise?", "answer": "AssertionError."},
        {"question": "Which exception does a failing assert statement raise?", "answer": "Again."},
        {"question": "When is the assert statement skipped by Python?", "answer": "Under -O."},
    ]
    return json.dumps({"cases": cases})


def test_the_generator_writes_several_questions_per_chunk_in_one_call(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=several_questions) as fake:
        with client_for(fake, tmp_path, "openai/generator") as generator:
            plain = generate_candidates(generator, [seed("assert", "simple")], audience="x", questions=3)
            evolved = generate_candidates(generator, [seed("assert", "reasoning")], audience="x", questions=3)
        assert fake.request_count == 1 + 2  # one call per chunk (the same call again: cached), two rewrites
    assert [c.id for c in plain.candidates] == ["simple-assert", "simple-assert-2"]  # the repeat once
    assert plain.candidates[1].question == "When is the assert statement skipped by Python?"
    assert [c.usage.calls for c in plain.candidates] == [1, 0]  # the one call counted once
    assert all(c.question.endswith("Explain why.") for c in evolved.candidates)
    assert [c.seed_question for c in evolved.candidates] == [c.question for c in plain.candidates]


@pytest.mark.parametrize("count", [1, 7, 20, 101])
def test_the_mix_and_the_unanswerable_share_are_exact(count: int) -> None:
    mix = {"simple": 0.4, "reasoning": 0.2, "conditional": 0.2, "multi_context": 0.2}
    kinds = Counter(assign_kinds(count, mix, 0.15, seed=3))
    assert sum(kinds.values()) == count
    assert kinds["unanswerable"] == round(count * 0.15)
    answerable = count - kinds["unanswerable"]
    for name, share in mix.items():
        assert abs(kinds[name] - answerable * share) < 1
    assert allocate(10, {"a": 0.5, "b": 0.5}) == {"a": 5, "b": 5}


def chunks_of(sources: dict[str, int]) -> list[Chunk]:
    return [
        Chunk(source=source, start_index=i * 1000, text=f"{source} text number {i} " * 20)
        for source, count in sources.items()
        for i in range(count)
    ]


def test_even_sampling_spreads_over_sources_and_short_chunks_are_skipped() -> None:
    chunks = [*chunks_of({"big": 30, "small": 2, "tiny": 1}), Chunk(source="short", start_index=0, text="x")]
    even = [chunks[p].source for p in sample_chunks(chunks, 6, sampling="even", seed=0, min_chars=50)]
    assert Counter(even) == {"big": 3, "small": 2, "tiny": 1}
    again = sample_chunks(chunks, 6, sampling="even", seed=0, min_chars=50)
    assert [chunks[p].source for p in again] == even  # seeded
    every = sample_chunks(chunks, 100, sampling="proportional", seed=0, min_chars=50)
    assert len(every) == 33 and "short" not in {chunks[p].source for p in every}


def test_multi_context_takes_a_related_chunk_that_is_not_the_same_text() -> None:
    chunks = [
        Chunk(source="a", start_index=0, text="alpha " * 10),
        Chunk(source="a", start_index=10, text="alpha overlap " * 10),  # overlaps chunk 0
        Chunk(source="b", start_index=0, text="beta " * 10),
        Chunk(source="c", start_index=0, text="gamma " * 10),
    ]
    vectors = np.array([[1, 0, 0], [0.99, 0.14, 0], [0.8, 0.6, 0], [0, 0, 1]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert related_chunk(0, chunks, vectors) == 2


def test_multi_context_prefers_a_related_chunk_of_another_source() -> None:
    chunks = [
        Chunk(source="a", start_index=0, text="alpha " * 10),
        Chunk(source="a", start_index=500, text="alpha later " * 10),  # same source, not overlapping
        Chunk(source="b", start_index=0, text="beta " * 10),
        Chunk(source="c", start_index=0, text="gamma " * 10),
    ]
    vectors = np.array([[1, 0, 0], [0.9, 0.43, 0], [0.7, 0.71, 0], [0, 0, 1]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert related_chunk(0, chunks, vectors) == 2  # b, though a's later chunk is more similar
    assert related_chunk(0, chunks[:2], vectors[:2]) == 1  # no other source: the same source's
    seeds = plan_seeds(
        chunks,
        vectors,
        count=1,
        sampling="proportional",
        seed=0,
        min_chars=0,
        evolutions={"multi_context": 1.0},
        unanswerable_share=0.0,
    )
    assert seeds[0].evolution == "multi_context" and len(seeds[0].chunks) == 2


@pytest.mark.parametrize(
    "question",
    ["According to the passage, what is raised?", "What does the text above define?", "Why?"],
)
def test_questions_that_point_at_the_material_are_invalid(question: str) -> None:
    with pytest.raises(ValueError):
        check_standalone(question)
    with pytest.raises(ValueError):
        GeneratedQA(question=question, answer="x")


def test_good_words_are_verbatim_rare_and_not_from_the_question() -> None:
    passage = "The assert statement raises AssertionError; the -O switch removes every assert statement."
    corpus = [passage, "The statement ends.", "A statement raises things."]
    from ragbench.testset.assemble import corpus_frequency

    words = good_words(
        "It raises AssertionError, and the -O switch removes them entirely.",
        "What does a failing assert raise?",
        [passage],
        corpus_frequency(corpus),
        limit=3,
    )
    assert words[0] == "AssertionError"
    assert "entirely" not in words and "raises" not in words and "assert" not in words


def test_near_duplicates_keep_the_first() -> None:
    vectors = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    assert near_duplicates(vectors, 0.95) == {1: (0, pytest.approx(0.99, abs=1e-3))}
    assert near_duplicates(vectors, 0.999) == {}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("testset.evolutions={simple: 0.5}", "add up to 0.5"),
        ("testset.thresholds={groundedness: 6}", "1-5"),
        ("testset.unanswerable_share=1", "testset.unanswerable_share"),
        ("testset.chunk_size=64", "must be smaller"),
    ],
)
def test_bad_testset_settings_are_refused(override: str, message: str) -> None:
    overrides = [override] + (["testset.chunk_overlap=64"] if "chunk_size" in override else [])
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("testset.evolutions={simple: 0.5, poetic: 0.5}", "unknown type(s) ['poetic']"),
        ("testset.thresholds={tone: 3}", "unknown critic(s) ['tone']"),
    ],
)
def test_unknown_evolutions_and_critics_are_refused_before_any_work(override: str, message: str) -> None:
    with pytest.raises(PreflightError, match=re.escape(message)):
        run_testset_preflight(load_config(None, [override]), plan_only=True)


def test_eval_cases_name_one_source_and_a_version_only_with_an_artifact() -> None:
    with pytest.raises(ConfigError, match="exactly one of path, dataset, artifact or traces"):
        load_config(None, ["eval_cases={path: a.jsonl, artifact: x}"])
    with pytest.raises(ConfigError, match="version applies to an artifact"):
        load_config(None, ["eval_cases={path: a.jsonl, version: 2}"])
    config = load_config(None, ["eval_cases={artifact: my-set, version: 3}"])
    assert config.eval_cases.label == "artifact my-set (version 3)"


def test_the_eval_set_page_escapes_generated_text_and_labels_a_local_critic(
    server, tmp_path, monkeypatch
) -> None:
    eval_set = make_set(server, tmp_path, SEEDS[:1], monkeypatch)
    planted = "<script>alert('planted')</script>"
    case = eval_set.cases[0]
    eval_set.cases[0] = case.model_copy(update={"question": f"Why {planted} here?"})
    page = eval_set.html()
    assert planted not in page and "&lt;script&gt;" in page
    assert "Kept (1)" in page and "groundedness" in page and not eval_set.warnings
    local = eval_set.model_copy(update={"summary": eval_set.summary | {"critic": "local/qwen"}})
    assert "small local model (local/qwen)" in local.warnings[0]
    assert "noisy" in local.html()


def reading_back(request: dict) -> str:
    """The generator as scripted above; as a reader, it gives the assert answer back, gets the loop one
    wrong and declines the unanswerable files question."""
    if not request.get("response_format"):
        question = request["messages"][1]["content"].rsplit("Question:", 1)[-1]
        if "assert" in question:
            return "It raises AssertionError [1]."
        if "loop" in question:
            return "Use continue [1]."
        return "The context does not say."
    return script(request)


def test_roundtrip_alone_decides_and_labels_measure_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    seeds = [seed("assert", "simple"), seed("loops", "simple"), seed("files", "unanswerable")]
    with FakeOpenAIServer(responder=reading_back) as fake:
        with client_for(fake, tmp_path, "openai/fake-generator") as generator:
            candidates = generate_candidates(generator, seeds, audience="Python programmers")
        search = {s.id: [chunk("loops")] for s in seeds}
        with client_for(fake, tmp_path, "openai/fake-critic") as critic:
            checked = roundtrip_filter(critic, candidates, search)
    questions = {c.id: c.question for c in candidates.candidates}
    labels = {
        "simple-assert": CandidateLabel(
            id="simple-assert", question=questions["simple-assert"], human_keep=True, reason="right"
        ),
        "simple-loops": CandidateLabel(
            id="simple-loops", question=questions["simple-loops"], human_keep=True, reason="right too"
        ),
    }
    eval_set = build_eval_set(
        "s",
        candidates,
        None,  # no critic ratings: roundtrip alone decides
        checked,
        thresholds={},
        corpus_texts=list(PASSAGES.values()),
        embed=one_hot,
        duplicate_similarity=0.9,
        max_good_words=3,
        labels=labels,
    )
    assert [case.id for case in eval_set.cases] == ["simple-assert", "unanswerable-files"]
    (loop,) = eval_set.rejected
    assert loop.provenance.rejected_because[0].startswith("roundtrip: answered from the source: disagrees")
    assert [check.passages for check in loop.provenance.roundtrip] == ["source", "search"]
    assert eval_set.summary["filters"] == ["roundtrip"] and eval_set.summary["rejected_by"] == {
        "roundtrip": 1
    }
    assert eval_set.summary["critic"] == "openai/fake-critic"
    roundtrip, combined = eval_set.agreement
    assert (roundtrip.filter, roundtrip.labelled, roundtrip.precision, roundtrip.recall) == (
        "roundtrip",
        2,
        1.0,
        0.5,
    )
    assert combined.false_reject == 1 and roundtrip.unlabelled == 1
    assert "right too" in eval_set.html() and "precision" in eval_set.summary_text()
