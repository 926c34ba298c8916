"""A step's identity is its content: a knob that cannot change a step's output is not in its cache key.

The integration tests share one small project (two readers on the loopback fake OpenAI server, a judge,
pairwise judging) and its first run; each then changes one knob and checks that every chunk, index,
retrieve, answer, judge and pairwise step of the new run came from ZenML's cache, that the cells are the
same, and that no LLM was asked anything. The unit tests pin the rules behind it: what the cache-dependency
scan counts, what the testset steps are keyed on, what the input artifacts hash.
"""

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import run
from materializers.inputs import EvalSuiteMaterializer, RerankerChoiceMaterializer
from materializers.json_models import CorpusMaterializer
from ragbench.config.model import BenchmarkConfig
from ragbench.inputs.eval_cases import EvalCase, EvalSuite
from ragbench.inputs.knowledge_base import Corpus, Document
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.testset.settings import TestsetConfig
from steps.caching import core_dependencies
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import THREE_TOPIC_CASES, THREE_TOPICS, newest_run, write_project

STAGES = ("chunk", "index", "retrieve", "answer", "judge", "pairwise")
# The steps whose output no rubric, prompt, HTML helper, LLM client or config module can change.
STEP_MODULES_FREE_OF_PRESENTATION_AND_PROMPTS = (
    "steps.chunk",
    "steps.index",
    "steps.colbert",
    "steps.retrieve",
    "steps.rerank",
)


# --------------------------------------------------------------------------------------------------
# The cache-dependency scan: TYPE_CHECKING imports and visualization code do not count
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "materializer", ["json_models", "vector_index", "lexical_index", "colbert_encodings"]
)
def test_materializers_render_html_outside_the_cache_closure(materializer):
    """Their HTML helpers are imported inside `save_visualizations`, which the scan does not count."""
    assert "ragbench.report.pages" not in core_dependencies(f"materializers.{materializer}")


@pytest.mark.parametrize("step_module", STEP_MODULES_FREE_OF_PRESENTATION_AND_PROMPTS)
def test_chunk_index_colbert_retrieve_and_rerank_steps_depend_on_no_html_helper_and_no_rubric(step_module):
    """Editing a rubric prompt, an HTML helper, the LLM client or the config model recomputes none of
    these steps: none of that code is in their cache closure."""
    closure = set(core_dependencies(step_module))
    unrelated = {
        "ragbench.report.pages",
        "ragbench.scoring.rubrics",
        "ragbench.config.model",
        "ragbench.llm.client",
    }
    assert not unrelated & closure, closure
    assert not {
        m for m in closure if m.startswith(("ragbench.report", "ragbench.scoring", "ragbench.config"))
    }


# --------------------------------------------------------------------------------------------------
# Content hashes of the input artifacts
# --------------------------------------------------------------------------------------------------


def content_hash(materializer: type, data) -> str:
    return materializer(uri="/tmp/unused").compute_content_hash(data)


def test_a_corpus_is_hashed_by_its_documents_only():
    documents = [Document(source="a.md", text="Alpha."), Document(source="b/c.md", text="Gamma.")]
    here = Corpus(documents=documents, fingerprint="f", description="folder /here", skipped=["x.png: type"])
    there = here.model_copy(update={"description": "folder /there", "skipped": []})
    assert content_hash(CorpusMaterializer, here) == content_hash(CorpusMaterializer, there)
    edited = here.model_copy(update={"documents": [documents[0], Document(source="b/c.md", text="Delta.")]})
    assert content_hash(CorpusMaterializer, edited) != content_hash(CorpusMaterializer, here)


def test_an_eval_suite_is_hashed_by_its_cases_not_its_label():
    cases = [EvalCase(id="q", question="Why?")]
    here = EvalSuite.of(cases, "/home/me/cases.jsonl")
    moved = EvalSuite.of(cases, "/srv/evals/renamed.jsonl")
    assert content_hash(EvalSuiteMaterializer, here) == content_hash(EvalSuiteMaterializer, moved)
    other = EvalSuite.of([EvalCase(id="q", question="Why not?")], here.label)
    assert content_hash(EvalSuiteMaterializer, other) != content_hash(EvalSuiteMaterializer, here)


def test_a_reranker_choice_is_hashed_by_the_checkpoint_it_uses():
    """The fallback's reason quotes the Hub's error, which differs between machines and runs."""
    standin = "ragbench/colbert-standin-minilm"
    offline = RerankerChoice(
        requested="colbert-ir/colbertv2.0", used=standin, is_standin=True, reason="offline"
    )
    timeout = offline.model_copy(update={"reason": "'colbert-ir/colbertv2.0' is not available (timed out)"})
    asked = RerankerChoice(requested=standin, used=standin, is_standin=True, reason="requested explicitly")
    hashes = {content_hash(RerankerChoiceMaterializer, choice) for choice in (offline, timeout, asked)}
    assert len(hashes) == 1
    real = RerankerChoice(requested="x", used="colbert-ir/colbertv2.0", is_standin=False, reason="available")
    assert content_hash(RerankerChoiceMaterializer, real) not in hashes


# --------------------------------------------------------------------------------------------------
# What the steps are keyed on
# --------------------------------------------------------------------------------------------------


def parameters_of(step) -> set[str]:
    import inspect

    return set(inspect.signature(step.entrypoint).parameters)


def test_no_cached_step_takes_an_operational_setting_as_a_parameter():
    from steps import (
        answer_questions_cell,
        assemble_eval_set,
        build_vector_index,
        critique_eval_candidates,
        generate_eval_candidates,
        judge_answers_cell,
        judge_pairwise_cell,
        retrieve_cell,
        roundtrip_eval_candidates,
    )

    operational = {"llm_cache", "shard_size", "device", "labels", "confidence"}
    for step in (
        answer_questions_cell,
        judge_answers_cell,
        judge_pairwise_cell,
        build_vector_index,
        retrieve_cell,
        generate_eval_candidates,
        critique_eval_candidates,
        roundtrip_eval_candidates,
        assemble_eval_set,
    ):
        # assemble_eval_set's `labels` are a person's verdicts, which its output reports on: data
        hashed = parameters_of(step) - ({"labels"} if step is assemble_eval_set else set())
        assert not operational & hashed, step.name
        assert "operations" in parameters_of(step)
        assert step.configuration.cache_policy.ignored_inputs == ["operations"], step.name


def test_only_a_hybrid_retrievers_identity_holds_rrf_k():
    """The retrieve step's key holds its retriever's identity: rrf_k for a hybrid cell only (see
    `test_rrf_k_recomputes_no_dense_cell`), and the step makes the same retriever from it."""
    from ragbench.grid.cell import CellSpec
    from ragbench.retrieval.retrievers import RetrievalConfig, make_retriever, retriever_from_identity

    config = RetrievalConfig(rrf_k=7)
    for retriever, settings in ((None, {}), ("bm25", {}), ("hybrid", {"rrf_k": 7})):
        identity = make_retriever(CellSpec(retriever=retriever), config).identity()
        assert identity["settings"] == settings and identity["name"] == (retriever or "dense")
        assert retriever_from_identity(identity).identity() == identity
    changed = make_retriever(CellSpec(retriever="hybrid"), config).identity() | {"version": "0"}
    with pytest.raises(ValueError, match="install the same version"):
        retriever_from_identity(changed)


def pairwise_config(**changes) -> BenchmarkConfig:
    data = {
        "grid": {
            "chunk_size": 64,
            "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
            "reader": ["openai/a", "openai/b", {"model": "openai/b", "temperature": 0.5}],
            "judge": ["openai/j"],
            "top_k": 2,
            "top_n": 1,
        },
        "retrieval": {"metrics_k": 1},
        "evaluation": {"pairwise": {"baseline": "openai/a"}},
    }
    return BenchmarkConfig.model_validate(data | changes)


def test_pairwise_labels_and_confidence_travel_with_the_operations():
    from pipelines.benchmark import run_operations
    from ragbench.config.expand import expand_grid
    from ragbench.grid.cell import distinct_at

    config = pairwise_config()
    cells = expand_grid(config)
    operations = run_operations(config, cells)
    judges = {key.id for key in distinct_at(cells, "judge")}
    assert set(operations.pairwise_labels) < judges  # every judge key but the baseline's
    labels = set(operations.pairwise_labels.values())
    assert {baseline for _, baseline in labels} == {"openai/a"}
    assert len({candidate for candidate, _ in labels}) == 2  # the two openai/b readers told apart
    assert operations.confidence == 0.95
    tuned = pairwise_config(statistics={"confidence": 0.9}, llm_cache_dir="/elsewhere")
    back = {"confidence": 0.95, "llm_cache": None}
    assert run_operations(tuned, expand_grid(tuned)).model_copy(update=back) == operations


def testset_config(**testset) -> BenchmarkConfig:
    base = {"generator": "openai/gen", "critic": "openai/critic", "chunks": 3, "filters": ["critics"]}
    return BenchmarkConfig.model_validate({"testset": base | testset})


def test_testset_steps_are_keyed_on_what_can_change_the_cases_only():
    from pipelines.testset import testset_identity, testset_operations

    plain = testset_config()
    identity = testset_identity(plain)
    operational = testset_config(
        name="renamed-set",
        labels="labels.jsonl",
        generator={"model": "openai/gen", "concurrency": 9, "timeout_s": 5, "max_retries": 0},
        critic_defaults={"max_tokens": 300, "json_retries": 0, "api_key_env": "MY_KEY"},
    )
    assert testset_identity(operational) == identity
    assert testset_operations(operational) != testset_operations(plain)  # they reach the steps apart
    for change in (
        {"audience": "students"},
        {"seed": 1},
        {"generator_defaults": {"max_tokens": 100}},
        {"critic": {"model": "openai/critic", "temperature": 0.7}},
        {"thresholds": {"groundedness": 5}},
    ):
        assert testset_identity(testset_config(**change)) != identity, change
    # the steps rebuild the same LLMs from the identity, then put the operations back
    rebuilt = TestsetConfig.model_validate(identity)
    assert rebuilt.generator_settings() == plain.testset.generator_settings()
    assert rebuilt.critic_settings() == plain.testset.critic_settings()
    from steps.caching import Operations
    from steps.testset import _operated

    ops = Operations.model_validate(testset_operations(operational))
    generator = _operated(
        TestsetConfig.model_validate(testset_identity(operational)).generator_settings(), ops
    )
    assert (generator.concurrency, generator.timeout_s, generator.max_retries) == (9, 5, 0)


# --------------------------------------------------------------------------------------------------
# Real runs: change a knob, compute nothing again
# --------------------------------------------------------------------------------------------------


def responder(request: dict) -> str:
    user = last_user_text(request)
    if "Answer 1:" in user:  # pairwise
        return json.dumps({"reasoning": "same facts", "verdict": "tie"})
    if not request.get("response_format"):  # a reader
        return f"{request['model']}: {user.rsplit('Question:', 1)[-1].strip()} [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


@dataclass
class Project:
    root: Path
    server: FakeOpenAIServer
    first: object  # the first run (a ZenML pipeline run response)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("identity") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch, FakeOpenAIServer(responder=responder) as server:
        patch.chdir(root)
        patch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
        base = server.base_url
        write_project(
            root,
            THREE_TOPICS,
            THREE_TOPIC_CASES,
            "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, "
            f"top_n: 1, reader: [{{model: openai/reader-a, api_base: {base}}}, "
            f"{{model: openai/reader-b, api_base: {base}}}], "
            f"judge: [{{model: openai/fake-judge, api_base: {base}}}]}}\n"
            "retrieval: {metrics_k: 1}\n"
            "generation: {reader: {max_retries: 0}}\n"
            "evaluation: {judge: {max_retries: 0}, rubrics: [correctness], "
            "pairwise: {baseline: openai/reader-a}}\n"
            "regression: {baseline: none}\n"
            "llm_cache_dir: llm-cache\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
        first = newest_run()
        assert server.request_count > 0
        yield Project(root, server, first)


def assert_nothing_recomputed(project: Project, *overrides: str):
    """Run with `overrides`; every stage step of the run was cached, the cells are the same, and no LLM
    was asked anything. Returns the run."""
    before = project.server.request_count
    assert run.main(["--config", "config.yaml", *(f"--set={item}" for item in overrides)]) == 0
    second = newest_run()
    assert project.server.request_count == before  # nothing asked again
    statuses = {name: step.status.value for name, step in second.steps.items() if name.startswith(STAGES)}
    assert {name.split("_")[0] for name in statuses} == set(STAGES), sorted(statuses)
    assert set(statuses.values()) == {"cached"}, statuses
    assert second.run_metadata["cell_ids"] == project.first.run_metadata["cell_ids"]
    return second


def test_first_run_hands_every_operational_setting_over_outside_the_step_parameters(project):
    hashed = {
        name: set(step.config.parameters)
        for name, step in project.first.steps.items()
        if name.startswith(STAGES)
    }
    operational = {"llm_cache", "shard_size", "device", "labels", "confidence"}
    assert hashed and not any(operational & parameters for parameters in hashed.values()), hashed
    (pairwise,) = project.first.run_metadata["pairwise"]
    assert (pairwise["candidate"], pairwise["baseline"]) == (
        "openai/reader-b",
        "openai/reader-a",
    )


def test_moving_the_llm_cache_or_making_it_a_database_reanswers_nothing(project):
    assert_nothing_recomputed(project, f"llm_cache_dir={project.root / 'another-llm-cache'}")
    database = project.root / "llm-cache.db"
    assert_nothing_recomputed(project, "llm_cache_dir=null", f"llm_cache_url=sqlite:///{database}")


def test_the_embedding_shard_size_re_embeds_nothing(project):
    assert_nothing_recomputed(project, "embedding.shard_size=1")


def test_the_embedding_device_re_embeds_nothing(project):
    """The first run encodes on `auto` (this machine's CPU); `cpu` is the same vectors."""
    assert BenchmarkConfig().embedding.device == "auto"
    assert_nothing_recomputed(project, "embedding.device=cpu")


def test_rrf_k_recomputes_no_dense_cell(project):
    second = assert_nothing_recomputed(project, "retrieval.rrf_k=7")
    retrieve_steps = [step for name, step in second.steps.items() if name.startswith("retrieve")]
    assert retrieve_steps and all(
        step.config.parameters["retriever"]["settings"] == {} for step in retrieve_steps
    )


def test_the_pairwise_confidence_rejudges_nothing(project):
    assert_nothing_recomputed(project, "statistics.confidence=0.9")


def test_a_moved_knowledge_base_is_neither_chunked_nor_embedded_again(project):
    shutil.copytree(project.root / "kb", project.root / "moved" / "docs")
    second = assert_nothing_recomputed(project, "knowledge_base.path=moved/docs")
    corpus = second.steps["ingest_knowledge_base"].outputs["corpus"][0]
    assert "moved" in corpus.run_metadata["description"]  # shown where it was read from


def test_a_moved_and_renamed_eval_file_retrieves_and_answers_nothing_again(project):
    (project.root / "elsewhere").mkdir()
    shutil.copy(project.root / "cases.jsonl", project.root / "elsewhere" / "renamed-cases.jsonl")
    second = assert_nothing_recomputed(project, "eval_cases=elsewhere/renamed-cases.jsonl")
    assert "renamed-cases.jsonl" in second.run_metadata["eval_set"]  # the report names the file it used
