"""Pipeline wiring only: the grid is expanded once (`ragbench.grid.cell`) and fanned out statically, one step
per distinct stage key, with the key's readable id as the step id (plus one BM25 index per chunk set and one
set of ColBERT encodings per reranker and chunk set). A step's identity is its content: it gets what can
change its output as parameters and input artifacts (cache-keyed), and what cannot (the LLMs' concurrency,
timeouts and retries, the LLM cache's location, the embedding shard size and device, the pairwise labels
and confidence) in the `operations` artifact its cache key ignores (`run_operations`). The input artifacts
are keyed on content too: the corpus on its documents, the eval suite on its cases, the reranker choice on
its checkpoint (`materializers.inputs`). The regression gate is the last step; a run that breaks before it
alerts through the failure hook."""

from typing import Any

from zenml import pipeline

from materializers.inputs import EvalSuiteMaterializer, RerankerChoiceMaterializer
from pipelines.inputs import eval_cases_snapshot, knowledge_base_snapshot
from ragbench.analysis.judge_check import card_rubric
from ragbench.config.expand import expand_grid
from ragbench.config.model import BenchmarkConfig
from ragbench.grid.cell import (
    CellSpec,
    cell_labels,
    distinct_at,
    lexical_keys,
    llm_names,
    llm_operations,
    pairwise_pairs,
    varying_axes,
)
from ragbench.runs.names import BENCHMARK_PIPELINE
from steps import (
    answer_external_system,
    answer_questions_cell,
    build_approximate_vector_index,
    build_bm25_index,
    build_results_table,
    build_vector_index,
    check_judge_on_planted_errors,
    choose_reranker,
    chunk_knowledge_base,
    encode_chunks_for_reranking,
    ingest_knowledge_base,
    judge_answers_cell,
    judge_pairwise_cell,
    load_eval_suite,
    pass_llm_operations,
    regression_gate,
    retrieve_cell,
)
from steps.caching import Operations
from steps.gate import alert_failed_run


def run_operations(settings: BenchmarkConfig, cells: list[CellSpec]) -> dict[str, Any]:
    """The `operations` artifact of a benchmark run: everything its steps need that cannot change what they
    compute (see `steps.caching.Operations`), so none of it is part of a cache key. A step served from the
    cache keeps what its output was made with: a pairwise comparison the names and the interval level of
    the run that judged it, until its verdicts are judged again."""
    pairwise_labels = {}
    if (comparing := settings.evaluation.pairwise) is not None:
        labels = cell_labels(distinct_at(cells, "answer"), varying_axes(cells))
        judges = distinct_at(cells, "judge")
        for candidate, baseline in pairwise_pairs(cells, comparing.baseline):
            for judge_key in (key for key in judges if key.upto("answer") == candidate):
                pairwise_labels[judge_key.id] = (labels[candidate.id], labels[baseline.id])
    names = llm_names(cells)
    return Operations(
        llm=llm_operations(cells),
        judge_names={
            key.judge.result_key: key.axis_columns(names)["judge"]
            for key in distinct_at(cells, "judge")
            if key.judge is not None
        },
        llm_cache=settings.llm_cache,
        device=settings.embedding.device,
        shard_size=settings.embedding.shard_size,
        pairwise_labels=pairwise_labels,
        confidence=settings.statistics.confidence,
    ).model_dump(mode="json")


@pipeline(name=BENCHMARK_PIPELINE, on_failure=alert_failed_run)
def rag_benchmark(config: dict):
    """`config` is a `BenchmarkConfig` as JSON: the whole run follows from it, so a run started from
    Python or by a schedule makes the same artifacts as `run.py`."""
    settings = BenchmarkConfig.model_validate(config)
    cells = expand_grid(settings)
    corpus = ingest_knowledge_base(
        knowledge_base=settings.knowledge_base.model_dump(mode="json"),
        snapshot=knowledge_base_snapshot(settings),
    )
    suite = load_eval_suite.with_options(output_materializers=EvalSuiteMaterializer)(
        eval_cases=settings.eval_cases.model_dump(mode="json"), snapshot=eval_cases_snapshot(settings)
    )
    reranker_numbers = {
        name: number
        for number, name in enumerate(dict.fromkeys(c.reranker for c in cells if c.reranker is not None))
    }
    rerankers = {
        name: choose_reranker.with_options(output_materializers=RerankerChoiceMaterializer)(
            checkpoint=name, id=f"reranker_{number}"
        )
        for name, number in reranker_numbers.items()
    }
    operations = pass_llm_operations(operations=run_operations(settings, cells))
    outputs: dict = {}  # step id -> its output artifact
    for key in distinct_at(cells, "chunk"):
        outputs[key.step_id("chunk")] = chunk_knowledge_base(
            corpus,
            chunk_size=key.chunk_size,
            chunk_overlap=key.chunk_overlap,
            tokenizer=settings.chunking_tokenizer,
            id=key.step_id("chunk"),
        )
    for key in distinct_at(cells, "index"):  # the exact index first: approximate ones read its vectors
        exact = key.exact_index_key
        if exact.step_id("index") not in outputs:
            outputs[exact.step_id("index")] = build_vector_index(
                outputs[key.step_id("chunk")],
                operations,
                embedding_model=key.embedding_model,
                id=exact.step_id("index"),
            )
        if key.index is not None:
            outputs[key.step_id("index")] = build_approximate_vector_index(
                outputs[exact.step_id("index")], index_type=key.index, id=key.step_id("index")
            )
    for key in lexical_keys(cells):
        outputs[key.lexical_step_id] = build_bm25_index(outputs[key.step_id("chunk")], id=key.lexical_step_id)
    retrievals = []
    for key in distinct_at(cells, "retrieve"):
        outputs[key.step_id("retrieve")], result = retrieve_cell(
            outputs[key.step_id("chunk")],
            suite,
            outputs[key.step_id("index")] if key.uses_dense_index else None,
            outputs[key.exact_index_key.step_id("index")] if key.index is not None else None,
            outputs[key.lexical_step_id] if key.uses_lexical_index else None,
            operations,
            spec=key.identity(),
            metrics_k=settings.retrieval.metrics_k,
            rrf_k=settings.retrieval.rrf_k if key.retriever == "hybrid" else None,  # only fusion uses it
            id=key.step_id("retrieve"),
        )
        retrievals.append(result)
    systems = {system.name: system for system in settings.systems}
    for key in distinct_at(cells, "answer"):
        if key.external is not None:
            outputs[key.step_id("answer")] = answer_external_system(
                suite,
                spec=key.identity(),
                system=systems[key.external].model_dump(mode="json"),
                sample_size=settings.generation.sample_size,
                seed=settings.generation.seed,
                metrics_k=settings.retrieval.metrics_k,
                llm_cache=settings.llm_cache,
                id=key.step_id("answer"),
            )
            continue
        encodings = None
        if key.reranker is not None:
            encodings_id = f"colbert_{reranker_numbers[key.reranker]}_{key.upto('chunk').id}"
            if encodings_id not in outputs:
                outputs[encodings_id] = encode_chunks_for_reranking(
                    outputs[key.step_id("chunk")], rerankers[key.reranker], id=encodings_id
                )
            encodings = outputs[encodings_id]
        outputs[key.step_id("answer")] = answer_questions_cell(
            outputs[key.step_id("retrieve")],
            suite,
            encodings,
            operations,
            spec=key.identity(),
            sample_size=settings.generation.sample_size,
            seed=settings.generation.seed,
            id=key.step_id("answer"),
        )
    scoring = settings.scoring()
    rubrics = [rubric.model_dump(mode="json") for rubric in scoring.rubrics]
    scorers = [scorer.identity() for scorer in scoring.scorers]
    judged = [
        judge_answers_cell(
            outputs[key.step_id("answer")],
            suite,
            operations,
            spec=key.identity(),
            rubrics=rubrics,
            scorers=scorers,
            embedding_model=settings.scoring_embedding_model,
            samples=settings.evaluation.judge_samples,
            id=key.step_id("judge"),
        )
        for key in distinct_at(cells, "judge")
    ]
    judge_cards = []
    if (check := settings.evaluation.judge_check) is not None:
        judges = {key.judge.result_key: key.judge for key in distinct_at(cells, "judge") if key.judge}
        rubric = card_rubric(scoring.rubrics).model_dump(mode="json")
        for number, judge in enumerate(judges.values()):
            judge_cards.append(
                check_judge_on_planted_errors(
                    corpus,
                    suite,
                    operations,
                    judge=judge.result_fields(),
                    rubric=rubric,
                    check=check.model_dump(mode="json"),
                    id=f"judge_card_{number}",
                )
            )
    pairwise = []
    if (comparing := settings.evaluation.pairwise) is not None:
        judges = distinct_at(cells, "judge")
        for candidate, baseline in pairwise_pairs(cells, comparing.baseline):
            for judge_key in (key for key in judges if key.upto("answer") == candidate):
                pairwise.append(
                    judge_pairwise_cell(
                        outputs[candidate.step_id("answer")],
                        outputs[baseline.step_id("answer")],
                        suite,
                        operations,
                        spec=judge_key.identity(),
                        criterion=comparing.criterion,
                        seed=comparing.seed,
                        id=f"pairwise_{judge_key.id}",
                    )
                )
    results, _ = build_results_table(
        cells=[cell.identity() for cell in cells],
        corpus=corpus,
        eval_suite=suite,
        retrievals=retrievals,
        answer_sets=[outputs[key.step_id("answer")] for key in distinct_at(cells, "answer")],
        judged=judged,
        pairwise=pairwise,
        judge_cards=judge_cards,
        title=f"RAG benchmark: {settings.name}",
        config_name=settings.name,
        metrics_k=settings.retrieval.metrics_k,
        evaluation=settings.evaluation.model_dump(mode="json"),
        sample_size=settings.generation.sample_size,
        seed=settings.generation.seed,
        statistics=settings.statistics.model_dump(mode="json"),
    )
    regression_gate(
        results,
        config_name=settings.name,
        regression=settings.regression.model_dump(mode="json"),
        statistics=settings.statistics.model_dump(mode="json"),
    )
