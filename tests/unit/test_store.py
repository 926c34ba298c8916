"""The core reads earlier runs' artifacts through `ragbench.store` and never through ZenML: a fake store
given with `use_store` is all these need (the ZenML adapter, steps/store.py, is exercised by the pipeline
tests)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from ragbench import store
from ragbench.inputs.eval_cases import EvalCase, EvalCaseError, EvalCasesConfig, load_eval_suite_from
from ragbench.models.errors import ModelResolutionError
from ragbench.retrieval.rerank import resolve_reranker
from ragbench.runs import review


@dataclass
class FakeArtifact:
    version: str
    value: Any
    run_metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str = "artifact-id"

    def load(self) -> Any:
        return self.value


@dataclass
class FakeStore:
    artifacts: dict[tuple[str, str | None], FakeArtifact] = field(default_factory=dict)
    pipeline_runs: list[Any] = field(default_factory=list)

    def artifact(self, name: str, version: str | None = None) -> FakeArtifact:
        return self.artifacts[(name, version)]

    def artifact_by_id(self, artifact_id: str) -> FakeArtifact:
        return next(a for a in self.artifacts.values() if a.id == artifact_id)

    def keep(self, name: str, value: Any, digest_key: str, digest: str, metadata: Any = None) -> Any:
        raise AssertionError("not used here")

    def runs(self, pipeline: str | None, tags: Sequence[str] = (), size: int = 50) -> list[Any]:
        return [run for run in self.pipeline_runs if run.pipeline.name == pipeline][:size]

    def run(self, name_or_id: str) -> Any:
        for run in self.pipeline_runs:
            if run.name == name_or_id:
                return run
        raise KeyError(name_or_id)


@pytest.fixture
def fake() -> Iterator[FakeStore]:
    given = FakeStore()
    replaced = store.use_store(given)
    yield given
    store.use_store(replaced)


def test_an_eval_set_artifact_is_read_from_the_given_store(fake: FakeStore) -> None:
    cases = [EvalCase(id="a", question="why?"), EvalCase(id="b", question="how?")]
    fake.artifacts[("gen-set", "2")] = FakeArtifact("2", SimpleNamespace(cases=cases, summary={}))
    suite = load_eval_suite_from(EvalCasesConfig(artifact="gen-set", version=2, limit=1))
    assert [case.id for case in suite.cases] == ["a"]
    assert suite.label == "artifact gen-set version 2"
    with pytest.raises(EvalCaseError, match="no artifact 'other'"):
        load_eval_suite_from(EvalCasesConfig(artifact="other"))


def test_a_trained_reranker_is_resolved_from_the_given_store(fake: FakeStore) -> None:
    metadata = {"label": "trained on docs", "held_out_case_ids": ["q1"]}
    fake.artifacts[("reranker-docs", None)] = FakeArtifact("3", None, metadata, id="id-3")
    choice = resolve_reranker("trained:docs")
    assert (choice.used, choice.trained_artifact) == ("trained:docs@3", "id-3")
    assert choice.held_out_cases == ("q1",)
    with pytest.raises(ModelResolutionError, match="no version 9 of trained reranker 'docs'"):
        resolve_reranker("trained:docs@9")


def test_the_run_to_review_is_the_newest_completed_one_of_its_pipeline(fake: FakeStore) -> None:
    def run(name: str, status: str, pipeline: str = "rag_benchmark") -> Any:
        return SimpleNamespace(
            name=name, status=SimpleNamespace(value=status), pipeline=SimpleNamespace(name=pipeline)
        )

    fake.pipeline_runs = [run("newest", "failed"), run("done", "completed"), run("set", "completed", "x")]
    assert review._run(None, "rag_benchmark").name == "done"
    with pytest.raises(review.ReviewSourceError, match="newest is not a completed rag_benchmark run"):
        review._run("newest", "rag_benchmark")
    with pytest.raises(review.ReviewSourceError, match="no run named 'gone'"):
        review._run("gone", "rag_benchmark")
    fake.pipeline_runs = []
    with pytest.raises(review.ReviewSourceError, match="no completed rag_benchmark run"):
        review._run(None, "rag_benchmark")
