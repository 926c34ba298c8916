"""The offline default generator and critic for real: Qwen2.5-Coder-1.5B in llama.cpp writes a plain and an
unanswerable case from two passages, rates them and answers them back (roundtrip); the cases go through
both filters to an eval set.

Needs llama-cpp-python and the packaged GGUF (provisioned on first use); fails rather than skips.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.config.model import load_config
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.llm.client import LLMClient
from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.testset.assemble import build_eval_set
from ragbench.testset.critique import critique_candidates
from ragbench.testset.generate import generate_candidates
from ragbench.testset.plan import Seed
from ragbench.testset.roundtrip import roundtrip_filter
from ragbench.testset.rubrics import check_standalone, critics_for, thresholds_with_defaults

pytestmark = pytest.mark.slow  # the local generator and critic: about 6 min on a loaded 2-core machine

PASSAGES = [
    SourceChunk(
        source="orchestrators.md",
        start_index=0,
        text="ZenML runs pipelines on the local orchestrator unless the active stack names another one. "
        "The local orchestrator executes every step, one after the other, in the current Python process, "
        "so it needs no extra infrastructure. To run steps in containers on a cluster, register a stack "
        "with the Kubernetes orchestrator and set it active with `zenml stack set`.",
    ),
    SourceChunk(
        source="caching.md",
        start_index=0,
        text="ZenML caches step outputs. A step is skipped and its outputs reused when its code, its "
        "parameters and its input artifacts are unchanged since an earlier run. Caching is on by "
        "default; pass enable_cache=False to a step or a pipeline to turn it off.",
    ),
]


def test_local_generator_and_critic_write_and_rate_cases(tmp_path) -> None:
    settings = load_config(None, [f"testset.generator={DEFAULT_LOCAL_LLM}"]).testset
    seeds = [
        Seed(id="plain", evolution="simple", chunks=[PASSAGES[0]]),
        Seed(id="unanswerable", evolution="unanswerable", chunks=[PASSAGES[1]]),
    ]
    with LLMClient(
        settings.generator_settings(), cache_location=tmp_path / "llm", progress=False
    ) as generator:
        candidates = generate_candidates(generator, seeds, audience=settings.audience)
    assert candidates.failures == 0  # an in-process model has no transport to fail
    written = [c for c in candidates.candidates if c.question is not None]
    assert written, [c.invalid for c in candidates.candidates]
    for candidate in written:
        check_standalone(candidate.question)  # the schema made the model keep to it, re-asks included
        print(f"\n{candidate.evolution}: {candidate.question}\n  answer: {candidate.answer}")

    retrieved = {"unanswerable": [PASSAGES[1]]}
    with LLMClient(settings.critic_settings(), cache_location=tmp_path / "llm", progress=False) as critic:
        critiques = critique_candidates(critic, candidates, retrieved, audience=settings.audience)
    assert critiques.failures == 0
    for candidate in written:
        verdicts = critiques.critiques[candidate.id].critiques
        assert [v.criterion for v in verdicts] == [c.name for c in critics_for(candidate.evolution)]
        rated = [v for v in verdicts if v.rating is not None]
        assert rated, verdicts  # the 1.5B critic gives valid ratings, with its reasoning
        assert all(1 <= v.rating <= 5 and v.reasoning.strip() for v in rated)
        for verdict in verdicts:
            print(f"  {verdict.criterion}: {verdict.rating} {verdict.reasoning} {verdict.error or ''}")

    # roundtrip: the same 1.5B as a reader, from the source and from a "search" (both passages here)
    search = {candidate.id: PASSAGES for candidate in written}
    with LLMClient(settings.critic_settings(), cache_location=tmp_path / "llm", progress=False) as critic:
        roundtrip = roundtrip_filter(critic, candidates, search)
    assert roundtrip.failures == 0
    for candidate in written:
        verdict = roundtrip.verdicts[candidate.id]
        expected = ["search"] if candidate.evolution == "unanswerable" else ["source", "search"]
        assert [check.passages for check in verdict.checks] == expected
        assert all(check.answer and check.answer.strip() and check.method for check in verdict.checks)
        assert verdict.kept == all(check.agrees for check in verdict.checks)
        assert verdict.kept or verdict.reason
        for check in verdict.checks:
            print(f"  roundtrip {check.passages}: {check.method} {check.agrees} {check.answer!r}")

    thresholds = thresholds_with_defaults(settings.thresholds)  # the default config's
    eval_set = build_eval_set(
        "local",
        candidates,
        critiques,
        roundtrip,
        thresholds=thresholds,
        corpus_texts=[p.text for p in PASSAGES],
        embed=lambda texts: np.eye(len(texts), dtype=np.float32),
        duplicate_similarity=settings.duplicate_similarity,
        max_good_words=settings.max_good_words,
    )
    assert len(eval_set.cases) + len(eval_set.rejected) == len(written)
    for case in eval_set.rejected:
        assert case.provenance.rejected_because
    for case in eval_set.cases:
        assert all(v.rating >= thresholds[v.criterion] for v in case.provenance.critiques)
        assert case.provenance.roundtrip and all(check.agrees for check in case.provenance.roundtrip)
        if case.expected_behaviour == "answers":
            assert case.expected_sources == ["orchestrators.md"]
            assert all(word.lower() in PASSAGES[0].text.lower() for word in case.good_words)
