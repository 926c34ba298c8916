from typing import Annotated

from zenml import get_step_context, log_metadata, step

from ragbench.generation.answers import AnswerSet, answer_cell, external_cell, sample_cases
from ragbench.generation.systems import ExternalSystem
from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.llm.budget import BudgetConfig
from ragbench.retrieval.colbert_maxsim import ColbertEncodings
from ragbench.retrieval.follow_up import FollowUpSearch, follow_up_searcher
from ragbench.retrieval.index import VectorIndex
from ragbench.retrieval.lexical import LexicalIndex
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.retrieval.retrievers import SearchContext
from ragbench.retrieval.search import RetrievedCandidates
from steps.caching import OPERATIONS, Operations, cached_step, never_reuse_this_step_run
from steps.identity import CellIdentity
from steps.spend import step_spending


# The LLMs' concurrency, timeouts and retries: they change how a provider is reached, never an answer.
@step(enable_cache=False)
def pass_llm_operations(operations: Operations) -> Annotated[Operations, OPERATIONS]:
    """Hands a run's operational settings (`steps.caching.Operations`: the LLMs' concurrency, timeouts and
    retries, the LLM cache, the embedding device and shard size, the pairwise labels and confidence) to its
    steps as an artifact their cache keys ignore: a parameter would be hashed."""
    return operations


@cached_step(ignored_inputs=(OPERATIONS,))
def answer_questions_cell(
    candidates: RetrievedCandidates,
    eval_suite: EvalSuite,
    reranker: RerankerChoice | None,
    operations: Operations,
    spec: CellIdentity,
    sample_size: int | None,
    seed: int,
    first: int = 0,
    follow_up: FollowUpSearch | None = None,
    chunks: ChunkSet | None = None,
    dense_index: VectorIndex | None = None,
    exact_index: VectorIndex | None = None,
    lexical_index: LexicalIndex | None = None,
    encodings: ColbertEncodings | None = None,
) -> Annotated[AnswerSet, "answers"]:
    """Answer cases `first` to `sample_size` of the seeded order (a race's round: the cases after those
    answered before) from the ranking the cell reads: its rerank step's, or its retrieve step's without a
    reranker (`reranker`: the checkpoint that ranked them, recorded with the answers). The LLM cache (named
    in the `operations`, outside the cache key) makes a re-run after a crash cheap. A rewriting cell of a
    suite with generated turns is given its stages (`follow_up`: the retriever and rewriter; the chunk set,
    the indexes its retriever reads and its reranker's encodings) to search each question after a turn it
    wrote again (`ragbench.retrieval.follow_up`)."""
    cell = spec.cell().with_operations(operations.llm)
    searcher = None
    if follow_up is not None:
        if chunks is None:
            raise ValueError(f"cell {spec.root}: a follow-up search needs the cell's chunk set")
        context = SearchContext(
            chunks, dense=dense_index, exact=exact_index, lexical=lexical_index, device=operations.device
        )
        searcher = follow_up_searcher(cell, follow_up, operations.llm, context, encodings)
    with step_spending(operations):
        answers = answer_cell(
            cell,
            candidates,
            sample_cases(eval_suite.cases, sample_size, seed)[first:],
            reranker=reranker,
            llm_cache=operations.llm_cache,
            follow_ups=searcher,
        )
    failures = sum(answer.answer is None for answer in answers.answers)
    log_metadata(
        {"answers": len(answers.answers), "reader_failures": failures, "reranker": answers.reranker_label}
    )
    if failures:
        never_reuse_this_step_run()
    return answers


@step(enable_cache=False)
def answer_external_system(
    eval_suite: EvalSuite,
    spec: CellIdentity,
    system: ExternalSystem,
    sample_size: int | None,
    seed: int,
    metrics_k: int,
    llm_cache: str | None,
    budget: BudgetConfig,
) -> Annotated[AnswerSet, "answers"]:
    """Ask a system the team already runs. Never reused from ZenML's cache: the deploy behind it changes
    between runs (its version may come from the environment this step runs in); its calls are cached by
    system, version and question instead, so an unchanged deploy is not asked twice (a system without a
    version is asked anew by every run). `budget`: the run's spend cap, each call sent charged to it."""
    with step_spending(Operations(llm_cache=llm_cache, budget=budget.model_dump(mode="json"))):
        answers = external_cell(
            spec.cell(),
            system,
            eval_suite.cases,
            sample_size=sample_size,
            seed=seed,
            metrics_k=metrics_k,
            llm_cache=llm_cache,
            run_scope=str(get_step_context().pipeline_run.id),
        )
    external = answers.external
    assert external is not None
    log_metadata(external.model_dump(mode="json", exclude={"retrieval"}, exclude_none=True))
    return answers
