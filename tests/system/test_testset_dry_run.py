"""`run.py testset --dry-run` bounds what a run really calls: every call of the generator and of each
configured filter (the roundtrip filter's reads and equivalence checks, the critics), counted against a
run on a tiny knowledge base with the loopback fake server replying as badly as the bound assumes."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import run
from ragbench.config import pipeline_plans
from ragbench.config.model import BenchmarkConfig, load_config
from ragbench.inputs.chunking import Chunk
from ragbench.llm.client import LLMClient
from ragbench.testset.critique import critique_candidates
from ragbench.testset.generate import generate_candidates
from ragbench.testset.plan import plan_for, source_chunk
from ragbench.testset.roundtrip import EQUIVALENCE_SYSTEM, roundtrip_filter
from tests.fake_openai_server import FakeOpenAIServer
from tests.projects import write_knowledge_base

TOPICS = ["assert", "break", "with", "import", "yield", "lambda", "global", "raise"]
DOCUMENTS = {
    f"{topic}.md": f"# The {topic} statement\n"
    + f"The {topic} statement has a precise meaning in Python programs and its own rules. " * 3
    for topic in TOPICS
}
# A proposed answer longer than the default 12 tokens: word overlap with a read may not decide it.
LONG_ANSWER = (
    "It is evaluated at run time by the interpreter, which then applies the documented rules of the "
    "language to every statement of that kind"
)


def worst_case(request: dict) -> str:
    """Every question valid (so every candidate is checked), every reader answering something else (so
    every read of a long answer needs the equivalence question), every rating and equivalence valid."""
    messages = request["messages"]
    system = messages[0]["content"]
    user = messages[1]["content"] if len(messages) > 1 else ""
    number = hashlib.sha256(user.encode()).hexdigest()[:8]  # distinct texts for distinct requests
    if system.startswith("You write test questions"):
        count = int(match.group(1)) if (match := re.search(r"Do this (\d+) times", user)) else 1
        if "does NOT answer" in user:
            cases = [{"question": f"How fast is variant {number}-{i} on huge inputs?"} for i in range(count)]
        else:
            cases = [
                {"question": f"How does variant {number}-{i} behave at run time?", "answer": LONG_ANSWER}
                for i in range(count)
            ]
        return json.dumps({"cases": cases} if count > 1 else cases[0])
    if system.startswith("You check test questions"):
        return json.dumps({"reasoning": "scripted", "rating": 5})
    if system.startswith(EQUIVALENCE_SYSTEM):
        return json.dumps({"reasoning": "scripted", "same": True})
    return f"Zebras of herd {number} graze on the savanna [1]."  # the reader: another fact, per read


def role_of(request: dict) -> str:
    system = request["messages"][0]["content"]
    if system.startswith("You write test questions"):
        return "generator"
    if system.startswith("You check test questions"):
        return "critics"
    if system.startswith(EQUIVALENCE_SYSTEM):
        return "roundtrip equivalence"
    assert not request.get("response_format"), system
    return "roundtrip reads"


@pytest.fixture
def server():
    with FakeOpenAIServer(responder=worst_case) as srv:
        yield srv


def write_config(tmp_path: Path, server: FakeOpenAIServer, filters: str) -> Path:
    write_knowledge_base(tmp_path, DOCUMENTS)
    llm = f"{{api_base: {server.base_url}, max_retries: 0, json_retries: 0}}"
    path = tmp_path / "config.yaml"
    path.write_text(
        "name: dry\noutput_dir: out\nknowledge_base: {kind: folder, path: kb}\n"
        "testset: {chunks: 6, questions_per_chunk: 2, sampling: even, min_chunk_chars: 50, "
        "unanswerable_share: 0.34, evolutions: {simple: 0.3, reasoning: 0.2, multi_context: 0.25, "
        "follow_up: 0.25}, "
        f"generator: openai/fake-generator, critic: openai/fake-critic, filters: {filters}, "
        f"generator_defaults: {llm}, critic_defaults: {llm}}}\n"
        f"llm_cache_dir: {tmp_path / 'llm-cache'}\n"
    )
    return path


def real_calls(config: BenchmarkConfig, chunks: list[Chunk], server: FakeOpenAIServer) -> Counter:
    """The calls a run makes, by role: the pipeline's steps, minus ZenML and the embedding model (random
    unit vectors plan the seeds; the first passages stand in for a whole-KB search)."""
    settings = config.testset
    vectors = np.random.default_rng(0).normal(size=(len(chunks), 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    seeds = plan_for(settings, chunks, vectors)
    with LLMClient(settings.generator_settings(), cache_location=config.llm_cache, progress=False) as client:
        candidates = generate_candidates(
            client, seeds, audience=settings.audience, questions=settings.questions_per_chunk
        )
    assert candidates.failures == 0 and all(c.question for c in candidates.candidates)
    searched = [source_chunk(chunk) for chunk in chunks[: settings.retrieved_passages]]
    retrieved = {candidate.id: searched for candidate in candidates.candidates}
    with LLMClient(settings.critic_settings(), cache_location=config.llm_cache, progress=False) as client:
        if "critics" in settings.filters:
            critique_candidates(client, candidates, retrieved, audience=settings.audience)
        if "roundtrip" in settings.filters:
            roundtrip_filter(
                client,
                candidates,
                retrieved,
                f1_threshold=settings.roundtrip_f1,
                short_answer_tokens=settings.roundtrip_short_answer_tokens,
            )
    return Counter(role_of(request) for request in server.requests)


def tiny_chunks() -> list[Chunk]:
    return [Chunk(text=text, source=name, start_index=0) for name, text in DOCUMENTS.items()]


@pytest.mark.parametrize(
    ("filters", "roles"),
    [
        ("[roundtrip]", ["generator", "roundtrip reads", "roundtrip equivalence"]),
        ("[critics]", ["generator", "critics"]),
        ("[critics, roundtrip]", ["generator", "roundtrip reads", "roundtrip equivalence", "critics"]),
    ],
)
def test_the_dry_run_bounds_every_call_of_every_configured_filter(
    tmp_path, monkeypatch, server, filters, roles
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    config = load_config(str(write_config(tmp_path, server, filters)), [])
    chunks = tiny_chunks()
    rows = pipeline_plans.testset_plan_rows(config, available_chunks=len(chunks))
    assert server.request_count == 0  # the dry run calls nothing
    assert [row["role"] for row in rows] == roles
    for row in rows:  # each line says which filter makes it
        assert row["filter"] == ("" if row["role"] == "generator" else row["role"].split()[0])
    bound = {row["role"]: row["calls"] for row in rows}

    made = real_calls(config, chunks, server)
    assert set(made) == set(roles), made
    for role in roles:
        assert 0 < made[role] <= bound[role], (role, made[role], bound[role])
    assert sum(made.values()) <= sum(bound.values())
    # the fake replies are the worst case the bound assumes, so it is reached: the bound is not loose
    assert dict(made) == bound


def test_the_cli_dry_run_names_each_filters_calls_and_totals_them(tmp_path, monkeypatch, capsys, server):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, server, "[critics, roundtrip]")
    assert run.main(["testset", "--dry-run", "--config", "config.yaml"]) == 0
    out = capsys.readouterr().out
    assert server.request_count == 0
    table = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    calls = []
    for role, name in [
        ("generator", ""),
        ("roundtrip reads", "roundtrip"),
        ("roundtrip equivalence", "roundtrip"),
        ("critics", "critics"),
    ]:
        assert role in table, out
        assert name in table[role]
        calls.append(int(re.search(r"openai/fake-\w+\s+(\d+)\s", table[role]).group(1)))
    assert f"At most {sum(calls)} LLM calls" in out
