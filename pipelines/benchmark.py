"""Pipeline wiring only: the grid is expanded once (`ragbench.grid.cell`) and fanned out statically, one step
per distinct stage key, with the key's readable id as the step id (plus one BM25 index per chunk set and one
set of ColBERT encodings per reranker and chunk set). An answer step reads the ranking of its cell's
`ranking_stage`: the rerank step's, or the retrieve step's for a cell without a reranker. A step's identity
is its content: it gets what can change its output as parameters and input artifacts (cache-keyed), and
what cannot (the LLMs' concurrency, timeouts and retries, the LLM cache's location, the embedding shard
size and device, the pairwise labels and confidence) in the `operations` artifact its cache key ignores
(`run_operations`). The input artifacts
are keyed on content too: the corpus on its documents, the eval suite on its cases, the reranker choice on
its checkpoint (`materializers.inputs`). The regression gate is the last step; a run that breaks before it
alerts through the failure hook."""

from dataclasses import dataclass, field
from typing import Any

from zenml import pipeline

from materializers.inputs import EvalSuiteMaterializer, RerankerChoiceMaterializer
from pipelines.inputs import client_inputs
from ragbench.analysis.judge_check import card_rubric
from ragbench.analysis.racing import RaceConfig
from ragbench.config.expand import rewriter_settings
from ragbench.config.model import BenchmarkConfig
from ragbench.config.plan import planned_cells
from ragbench.grid.cell import (
    CellSpec,
    cell_labels,
    distinct_at,
    llm_names,
    llm_operations,
    pairwise_pairs,
    reranker_numbers,
    varying_axes,
)
from ragbench.provenance import Checkout, read_checkout
from ragbench.retrieval.follow_up import FollowUpSearch
from ragbench.retrieval.retrievers import lexical_keys, make_retriever, reads_lexical
from ragbench.retrieval.rewriter import RewriteSetup
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
    look_at_race,
    measure_judge_alignment,
    pass_llm_operations,
    regression_gate,
    rerank_cell,
    resolve_references,
    retrieve_cell,
    rewrite_queries_step,
    start_cell_race,
    write_trace_annotations,
)
from steps.caching import Operations
from steps.gate import alert_failed_run
from steps.identity import CellIdentity, LLMIdentity, PluginIdentity
from steps.judge import AlignmentSetup, RubricSet
from steps.results import ResultsSettings


def run_operations(settings: BenchmarkConfig, cells: list[CellSpec]) -> Operations:
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
    rewriter = rewriter_settings(settings)
    return Operations(
        llm=llm_operations(cells) | ({rewriter.result_key: rewriter.operations()} if rewriter else {}),
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
        budget=settings.budget.model_dump(mode="json"),
    )


def rewrite_setup(settings: BenchmarkConfig, mode: str) -> RewriteSetup:
    """The rewrite step's `rewrite` parameter (`RewriteSetup`): the query count only where it acts
    (multi_query), so changing it rewrites no condense or hyde query again."""
    rewriter = rewriter_settings(settings)
    assert rewriter is not None  # a mode is rewritten only when the grid has a query_rewrite other than off
    count = settings.retrieval.multi_query_count if mode == "multi_query" else 1
    return RewriteSetup(rewriter=rewriter.result_fields(), count=count)


def fusion_k(settings: BenchmarkConfig, key: CellSpec) -> int:
    """The reciprocal-rank fusion's k for a case's several queries: the config's for multi_query (the only
    mode that searches several), else the default, which then fuses nothing."""
    return settings.retrieval.rrf_k if key.query_rewrite == "multi_query" else 60


@dataclass
class Wiring:
    """What the stages before answering made, shared by the fixed-sample and the raced pipeline: the step
    outputs by step id, and the artifacts every later step reads."""

    settings: BenchmarkConfig
    cells: list[CellSpec]
    corpus: Any
    suite: Any
    operations: Any
    outputs: dict = field(default_factory=dict)  # step id -> its output artifact
    retrievals: list = field(default_factory=list)
    reranks: list = field(default_factory=list)  # each rerank step's metrics (`RerankResult`)
    rerankers: dict[str, Any] = field(default_factory=dict)  # reranker as configured -> its choice artifact
    review_labels: Any = None  # a person's labels the judges are aligned with (evaluation.judge_alignment)
    references: Any = None  # what the run fetched for the cases' reference_from (`resolve_references`)
    rewrites: list = field(default_factory=list)  # each query_rewrite mode's queries (`rewrite_queries_step`)

    def answer(self, key: CellSpec, *, first: int = 0, stop: int | None = None, id: str | None = None) -> Any:
        """The answer step of one answer key, over cases `first` to `stop` of the seeded order (default:
        the fixed sample)."""
        settings = self.settings
        if key.external is not None:
            return answer_external_system(
                self.suite,
                spec=CellIdentity.of(key),
                system=next(s for s in settings.systems if s.name == key.external),
                sample_size=settings.generation.sample_size,
                seed=settings.generation.seed,
                metrics_k=settings.retrieval.metrics_k,
                llm_cache=settings.llm_cache,
                budget=settings.budget,
                id=key.step_id("answer"),
            )
        return answer_questions_cell(
            self.outputs[key.step_id(key.ranking_stage)],
            self.suite,
            self.rerankers[key.reranker] if key.reranker is not None else None,
            self.operations,
            spec=CellIdentity.of(key),
            sample_size=settings.generation.sample_size if stop is None else stop,
            seed=settings.generation.seed,
            first=first,
            id=id or key.step_id("answer"),
            **self.follow_up_stages(key),
        )

    def follow_up_stages(self, key: CellSpec) -> dict[str, Any]:
        """What a rewriting cell's answer step searches a follow-up again with, after a turn its reader
        wrote (`ragbench.retrieval.follow_up`): its retriever and rewriter, its chunk set, the indexes its
        retriever reads and its reranker's encodings, the very artifacts its stages read. Nothing for a
        cell that searches each question as it is (rewrite off): no conversation changes its ranking."""
        if key.query_rewrite is None:
            return {}
        outputs, settings = self.outputs, self.settings
        return {
            "follow_up": FollowUpSearch(
                retriever=make_retriever(key, settings.retrieval).identity(),
                rewrite=rewrite_setup(settings, key.query_rewrite),
                fusion_k=fusion_k(settings, key),
            ),
            "chunks": outputs[key.step_id("chunk")],
            "dense_index": outputs[key.step_id("index")] if key.uses_dense_index else None,
            "exact_index": outputs[key.exact_index_key.step_id("index")] if key.index is not None else None,
            "lexical_index": outputs[key.lexical_step_id] if reads_lexical(key) else None,
            "encodings": outputs[key.encodings_step_id(reranker_numbers(self.cells)[key.reranker])]
            if key.reranker is not None
            else None,
        }

    def race(self, cells: list[CellSpec], search: RaceConfig) -> tuple[Any, list, list]:
        """Race `cells` on the first `search.max_cases` cases of the seeded order, round by round until
        the race stops: every survivor answers and is judged on the round's cases, one step per key and
        round (`<step id>_r<round>`, cached like any step), then a look stops the cells significantly
        behind. Returns the last look's trace and every round's answer sets and verdicts."""
        settings = self.settings
        trace = start_cell_race(
            self.suite,
            cells=[cell.id for cell in cells],
            search=search,
            metric=settings.race_metric(),
            seed=settings.generation.seed,
        )
        state = trace.load()
        answer_sets: list = []
        judged: list = []
        while (span := state.next_cases()) is not None:
            first, stop = span
            number = len(state.looks) + 1
            racing = [cell for cell in cells if cell.id in set(state.survivors)]
            answers = {
                key.id: self.answer(key, first=first, stop=stop, id=f"{key.step_id('answer')}_r{number}")
                for key in distinct_at(racing, "answer")
            }
            answer_sets += answers.values()
            judged += [
                self.judge(key, answers[key.upto("answer").id], id=f"{key.step_id('judge')}_r{number}")
                for key in distinct_at(racing, "judge")
            ]
            trace = look_at_race(
                trace,
                self.suite,
                answer_sets,
                judged,
                cells=[CellIdentity.of(cell) for cell in cells],
                evaluation=settings.evaluation,
                metrics_k=settings.retrieval.metrics_k,
                statistics=settings.statistics,
                id=f"race_look_r{number}",
            )
            state = trace.load()
        return trace, answer_sets, judged

    def judge(self, key: CellSpec, answers: Any, *, id: str | None = None) -> Any:
        """The judge step of one judge key over `answers`."""
        scoring = self.settings.scoring()
        alignment = self.settings.evaluation.judge_alignment
        return judge_answers_cell(
            answers,
            self.suite,
            self.operations,
            spec=CellIdentity.of(key),
            rubrics=RubricSet(rubrics=list(scoring.rubrics)),
            scorers=[PluginIdentity(scorer.identity()) for scorer in scoring.scorers],
            embedding_model=self.settings.scoring_embedding_model,
            samples=self.settings.evaluation.judge_samples,
            repeats=self.settings.evaluation.judge_repeats,
            seed=self.settings.generation.seed if self.settings.evaluation.judge_repeats else 0,
            review_labels=self.review_labels if alignment is not None and alignment.examples else None,
            alignment=AlignmentSetup(judge=self.judge_name(key), examples=alignment.examples)
            if alignment is not None and alignment.examples
            else None,
            id=id or key.step_id("judge"),
        )

    def judge_name(self, key: CellSpec) -> str:
        """The judge as the results table names it (and the review page records its verdicts under)."""
        return key.axis_columns(llm_names(self.cells))["judge"]

    def judge_alignments(self) -> list:
        """Each judge against the person's labels, as it is and aligned, when the config asks for it."""
        if (alignment := self.settings.evaluation.judge_alignment) is None:
            return []
        judges = {key.judge.result_key: key.judge for key in distinct_at(self.cells, "judge") if key.judge}
        return [
            measure_judge_alignment(
                self.review_labels,
                self.operations,
                judge=LLMIdentity.of(judge),
                rubrics=RubricSet(rubrics=list(self.settings.scoring().rubrics)),
                examples=alignment.examples,
                statistics=self.settings.statistics,
                id=f"judge_alignment_{number}",
            )
            for number, judge in enumerate(judges.values())
        ]

    def judge_cards(self) -> list:
        """One judge card per judge, when the config asks for them."""
        settings = self.settings
        if (check := settings.evaluation.judge_check) is None:
            return []
        judges = {key.judge.result_key: key.judge for key in distinct_at(self.cells, "judge") if key.judge}
        rubric = card_rubric(settings.scoring().rubrics)
        return [
            check_judge_on_planted_errors(
                self.corpus,
                self.suite,
                self.operations,
                judge=LLMIdentity.of(judge),
                rubric=rubric,
                check=check,
                id=f"judge_card_{number}",
            )
            for number, judge in enumerate(judges.values())
        ]

    def results_and_gate(
        self,
        answer_sets: list,
        judged: list,
        pairwise: list,
        judge_cards: list,
        race: Any = None,
        planned: dict | None = None,
        search: list | None = None,
        checkout: dict | None = None,
    ) -> None:
        """The results table and report, then the regression gate: the last steps of every pipeline.
        `planned`: the plan the run started with, shown beside what it spent; `search`: a search's
        decisions, trials and confirmation (its artifacts), for the report's search section; `checkout`:
        the client's git checkout it was planned from (`ragbench.provenance.Checkout`), read here when not
        given."""
        settings = self.settings
        findings = [
            *pairwise,
            *judge_cards,
            *self.judge_alignments(),
            *([race] if race is not None else []),
            *(search or []),
            *self.rewrites,
            self.references,
        ]
        results, records, _ = build_results_table(
            ResultsSettings(
                cells=[CellSpec.model_validate(cell.identity()) for cell in self.cells],
                title=f"RAG benchmark: {settings.name}",
                config_name=settings.name,
                metrics_k=settings.retrieval.metrics_k,
                evaluation=settings.evaluation,
                sample_size=settings.generation.sample_size,
                seed=settings.generation.seed,
                statistics=settings.statistics,
                planned=planned,
                checkout=Checkout.model_validate(checkout) if checkout is not None else read_checkout(),
            ),
            self.corpus,
            self.suite,
            [*self.retrievals, *self.reranks, *answer_sets, *judged],
            findings,
            self.review_labels if settings.evaluation.label_correction is not None else None,
        )
        after = []
        if (
            traces := settings.eval_cases.traces
        ) is not None:  # the logged answers' scores, back to the spans
            logged = {system.name for system in settings.systems if system.traces}
            write_trace_annotations(
                records,
                self.suite,
                cells=[cell.id for cell in self.cells if cell.external in logged],
                rubrics=RubricSet(rubrics=list(settings.scoring().rubrics)),
                path=traces.annotations_path,
                phoenix=traces.phoenix,
                id="trace_annotations",
            )
            after = ["trace_annotations"]  # written before the gate, which may fail the run
        regression_gate(
            results,
            config_name=settings.name,
            regression=settings.regression,
            statistics=settings.statistics,
            after=after,
        )


def wire_retrieval(settings: BenchmarkConfig, snapshots: dict[str, Any] | None) -> Wiring:
    """The inputs, chunk sets, indexes, retrieval and reranking of every cell (on every case): the same
    steps, with the same ids and cache keys, in either pipeline. The cells are the run plan's and the
    client's inputs the versions it stored (`snapshots`), when the CLI planned the run."""
    cells = planned_cells(settings)
    knowledge_base, eval_cases, review_labels = client_inputs(settings, snapshots)
    corpus = ingest_knowledge_base(knowledge_base=settings.knowledge_base, snapshot=knowledge_base)
    defined = load_eval_suite.with_options(output_materializers=EvalSuiteMaterializer)(
        eval_cases=settings.eval_cases, snapshot=eval_cases
    )
    operations = pass_llm_operations(operations=run_operations(settings, cells))
    readers = [cell.reader for cell in cells if cell.reader is not None]
    suite, references = resolve_references.with_options(
        output_materializers={"eval_cases_resolved": EvalSuiteMaterializer}
    )(defined, operations, writer=readers[0] if readers else None)
    numbers = reranker_numbers(cells)
    wiring = Wiring(
        settings=settings,
        cells=cells,
        corpus=corpus,
        suite=suite,
        operations=operations,
        references=references,
        review_labels=review_labels,
        rerankers={
            name: choose_reranker.with_options(output_materializers=RerankerChoiceMaterializer)(
                checkpoint=name, id=f"reranker_{number}"
            )
            for name, number in numbers.items()
        },
    )
    outputs = wiring.outputs
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
                wiring.operations,
                embedding_model=key.embedding_model,
                id=exact.step_id("index"),
            )
        if key.index is not None:
            outputs[key.step_id("index")] = build_approximate_vector_index(
                outputs[exact.step_id("index")], index_type=key.index, id=key.step_id("index")
            )
    for key in lexical_keys(cells):
        outputs[key.lexical_step_id] = build_bm25_index(outputs[key.step_id("chunk")], id=key.lexical_step_id)
    for mode in dict.fromkeys(key.query_rewrite for key in distinct_at(cells, "retrieve")):
        if mode is not None:  # once per mode, read by every retrieve key of the mode
            outputs[f"rewrite_{mode}"] = rewrite_queries_step(
                suite,
                wiring.operations,
                mode=mode,
                rewrite=rewrite_setup(settings, mode),
                id=f"rewrite_{mode}",
            )
            wiring.rewrites.append(outputs[f"rewrite_{mode}"])
    for key in distinct_at(cells, "retrieve"):
        outputs[key.step_id("retrieve")], result = retrieve_cell(
            outputs[key.step_id("chunk")],
            suite,
            outputs[key.step_id("index")] if key.uses_dense_index else None,
            outputs[key.exact_index_key.step_id("index")] if key.index is not None else None,
            outputs[key.lexical_step_id] if reads_lexical(key) else None,
            wiring.operations,
            spec=CellIdentity.of(key),
            retriever=PluginIdentity(make_retriever(key, settings.retrieval).identity()),
            metrics_k=settings.retrieval.metrics_k,
            queries=outputs[f"rewrite_{key.query_rewrite}"] if key.query_rewrite is not None else None,
            fusion_k=fusion_k(settings, key),
            id=key.step_id("retrieve"),
        )
        wiring.retrievals.append(result)
    for key in distinct_at(cells, "rerank"):
        assert key.reranker is not None
        encodings_id = key.encodings_step_id(numbers[key.reranker])
        if encodings_id not in outputs:
            outputs[encodings_id] = encode_chunks_for_reranking(
                outputs[key.step_id("chunk")], wiring.rerankers[key.reranker], id=encodings_id
            )
        outputs[key.step_id("rerank")], result = rerank_cell(
            outputs[key.step_id("retrieve")],
            suite,
            outputs[encodings_id],
            spec=CellIdentity.of(key),
            metrics_k=settings.retrieval.metrics_k,
            id=key.step_id("rerank"),
        )
        wiring.reranks.append(result)
    return wiring


@pipeline(name=BENCHMARK_PIPELINE, on_failure=alert_failed_run)
def rag_benchmark(
    config: dict,
    planned: dict | None = None,
    snapshots: dict[str, Any] | None = None,
    checkout: dict | None = None,
):
    """`config` is a `BenchmarkConfig` as JSON: the whole run follows from it, so a run started from
    Python or by a schedule makes the same artifacts as `run.py`. Every cell answers the fixed sample.
    What the CLI's run plan (`ragbench.config.plan`) hands on: `planned`, its spend (`PlannedSpend`),
    read only by the never-cached results step; `snapshots`, the artifact version ids of the inputs it
    read on the client (`pipelines.inputs.InputSnapshots`; read and stored here when not given);
    `checkout`, the client's git commit and modified flag (`ragbench.provenance.Checkout`; read here, on
    the client that compiles the pipeline, when not given)."""
    settings = BenchmarkConfig.model_validate(config)
    wiring = wire_retrieval(settings, snapshots)
    cells = wiring.cells
    answers = {key.id: wiring.answer(key) for key in distinct_at(cells, "answer")}
    judged = [wiring.judge(key, answers[key.upto("answer").id]) for key in distinct_at(cells, "judge")]
    judge_cards = wiring.judge_cards()
    pairwise = []
    if (comparing := settings.evaluation.pairwise) is not None:
        judges = distinct_at(cells, "judge")
        for candidate, baseline in pairwise_pairs(cells, comparing.baseline):
            for judge_key in (key for key in judges if key.upto("answer") == candidate):
                pairwise.append(
                    judge_pairwise_cell(
                        answers[candidate.id],
                        answers[baseline.id],
                        wiring.suite,
                        wiring.operations,
                        spec=CellIdentity.of(judge_key),
                        criterion=comparing.criterion,
                        seed=comparing.seed,
                        id=f"pairwise_{judge_key.id}",
                    )
                )
    wiring.results_and_gate(
        list(answers.values()), judged, pairwise, judge_cards, planned=planned, checkout=checkout
    )


@pipeline(name=BENCHMARK_PIPELINE, dynamic=True, on_failure=alert_failed_run)
def rag_race(
    config: dict,
    planned: dict | None = None,
    snapshots: dict[str, Any] | None = None,
    checkout: dict | None = None,
):
    """The same run with `search` set: the cells race. Dynamic (ZenML decides the next round from the last
    look's output): each round, every surviving cell answers and is judged on the next batch of the seeded
    case order, one step per key and round (cached like any step), then a look stops the cells that are
    significantly behind. Retrieval runs on every case as in the fixed-sample pipeline. Registered under
    the same pipeline name, so history, compare and the gate see a raced run like any other. `planned`,
    `snapshots` and `checkout` as for `rag_benchmark` (a checkout not given is read where this body runs:
    a dynamic pipeline's runs on its orchestrator, the client's machine for the local one)."""
    settings = BenchmarkConfig.model_validate(config)
    search = settings.search
    if search is None:
        raise ValueError("rag_race needs a config with `search`")
    search = search.model_copy(update={"max_cases": search.max_cases or settings.generation.sample_size})
    wiring = wire_retrieval(settings, snapshots)
    cells = wiring.cells
    judge_cards = wiring.judge_cards()
    trace, answer_sets, judged = wiring.race(cells, search)
    wiring.results_and_gate(
        answer_sets, judged, [], judge_cards, race=trace, planned=planned, checkout=checkout
    )
