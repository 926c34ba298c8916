"""The answers of one grid cell: the reader answers from the first top_n passages of the ranking its cell
reads (the rerank stage's or the first stage's, `CellSpec.ranking_stage`), or an external RAG system
answers by itself; `ragbench.scoring.cells` scores them."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any

from pydantic import BaseModel, Field

from ragbench.generation.external import ExternalClient, ExternalContext, ExternalReply, ExternalResult
from ragbench.generation.reader import ReaderAnswer
from ragbench.generation.systems import ExternalSystem
from ragbench.generation.turns import (
    WrittenTurns,
    answer_conversations,
    asked_after,
    external_turns,
    write_turns,
)
from ragbench.grid.cell import CellSpec
from ragbench.hashing import seeded_rank
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.retrieval.follow_up import FollowUpSearcher
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.retrieval.search import (
    RetrievalResult,
    RetrievedCandidates,
    RetrievedChunk,
    SearchStats,
    retrieval_metrics,
)
from ragbench.section import Section


class GenerationConfig(Section):
    """Which cases run end to end, and the LLM settings every reader of the grid shares."""

    sample_size: int | None = Field(
        default=None, ge=1, description="cases answered end to end: the first N of one seeded case order"
    )
    seed: int = Field(default=42, description="seed of the end-to-end case order")
    reader: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 200},
        description="LLMSettings fields applied to every reader in grid.reader (an entry's own fields win)",
    )


def case_order(cases: Sequence[EvalCase], seed: int) -> list[EvalCase]:
    """Every case in one seeded order, the same for every cell, so any prefix is a fair sample and a
    larger sample only adds cases. A case's place hangs on its id and the seed alone (`seeded_rank`), so
    adding cases to the set keeps the others' relative order, and reordering the file changes nothing."""
    return sorted(cases, key=lambda case: seeded_rank(seed, case.id))


def order_slice(cases: Sequence[EvalCase], seed: int, start: int, stop: int) -> list[EvalCase]:
    """Cases `start:stop` of the seeded order: answering round by round, slice after slice, the cases
    answered so far are always a prefix of the order, the sample a larger `sample_size` would give."""
    return case_order(cases, seed)[start:stop]


def sample_cases(cases: Sequence[EvalCase], sample_size: int | None, seed: int) -> list[EvalCase]:
    """The first `sample_size` cases of the seeded order (all of them with None), the same in every cell,
    so cells are compared on equal cases and raising the size keeps the cases already answered."""
    return order_slice(cases, seed, 0, len(cases) if sample_size is None else sample_size)


class ExternalAnswers(BaseModel):
    """What an external system's cell adds to its answers: which system and deploy answered, how its calls
    went, and the retrieval metrics of the sources it returned (None: it returned none)."""

    name: str
    kind: str
    endpoint: str
    version: str | None
    cases_asked: int
    calls_made: int  # not served from the cache, the generated turns' included
    failures: int  # cases without an answer (their call, or one of their generated turns, failed)
    retries: int
    returned_contexts: bool  # False: answer-only metrics (nothing to measure retrieval or faithfulness on)
    retrieval: RetrievalResult | None  # None: no passages, or passages without sources


class AnswerSet(BaseModel):
    """Every answer of one answer-stage key with the passages the reader saw, so any score traces back to
    its case. Judges grade it; they never re-answer."""

    spec: CellSpec
    reranker: RerankerChoice | None
    answers: list[ReaderAnswer]
    external: ExternalAnswers | None = None

    @property
    def reranker_label(self) -> str:
        return self.reranker.label if self.reranker else "off"

    @classmethod
    def joined(cls, parts: Sequence[AnswerSet]) -> AnswerSet:
        """One key's answers made in rounds (a race answers each round's cases in a step of its own), in
        round order; a case answered twice keeps its first answer."""
        if len({part.spec.id for part in parts}) != 1 or any(part.external for part in parts):
            raise ValueError("only answer sets of one grid key, none of an external system, join")
        answers = {answer.case_id: answer for part in reversed(parts) for answer in part.answers}
        ordered = dict.fromkeys(answer.case_id for part in parts for answer in part.answers)
        return parts[0].model_copy(update={"answers": [answers[case] for case in ordered]})


def answer_cell(
    spec: CellSpec,
    candidates: RetrievedCandidates,
    cases: Sequence[EvalCase],
    *,
    reranker: RerankerChoice | None,
    llm_cache: str | None = None,
    follow_ups: FollowUpSearcher | None = None,
) -> AnswerSet:
    """Answer with the reader from the first `spec.top_n` passages of `candidates`, the ranking the cell
    reads: its rerank key's (`reranker` is the checkpoint that ranked them) or, without a reranker, its
    retrieve key's. The rerank stage reranked every case, and the questions their generated turns answer,
    which the reader answers first from their own top_n passages (`ragbench.generation.turns`).
    `follow_ups`: a rewriting cell's stages, which search each question after a turn the cell wrote again
    (`ragbench.retrieval.follow_up`); without it the stages' ranking of every question stands."""
    if spec.reader is None or spec.top_n is None or spec.prompt is None:
        raise ValueError(f"cell {spec.id} has no reader: nothing to answer")
    if candidates.spec != spec.upto("rerank"):
        raise ValueError(f"candidates of {candidates.spec.id} given to cell {spec.id}")
    if (reranker is None) != (spec.reranker is None):
        raise ValueError(f"cell {spec.id}: the reranker choice is given exactly when the cell reranks")
    contexts = [chunks[: spec.top_n] for chunks in candidates.for_cases(cases)]
    turn_passages = {
        question.id: candidates.by_case[question.id][: spec.top_n]
        for case in cases
        for question in case.turn_questions()
    }
    if follow_ups is not None and follow_ups.spec != spec:
        raise ValueError(f"the follow-up search of {follow_ups.spec.id} given to cell {spec.id}")
    rewriting = LLMClient(follow_ups.rewriter, cache_location=llm_cache) if follow_ups else nullcontext()
    with LLMClient(spec.reader, cache_location=llm_cache) as client, rewriting as rewriter:
        answers = answer_conversations(
            client,
            cases,
            contexts,
            turn_passages,
            prompt=spec.prompt,
            desc=f"reader {spec.id}",
            search_again=partial(follow_ups.search, rewriter) if follow_ups else None,
        )
    answers = [
        answer
        if answer.searched_again
        else answer.model_copy(update={"searched": candidates.searched.get(answer.case_id, [])})
        for answer in answers
    ]
    return AnswerSet(spec=spec, reranker=reranker, answers=answers)


def external_cell(
    spec: CellSpec,
    system: ExternalSystem,
    cases: Sequence[EvalCase],
    *,
    sample_size: int | None,
    seed: int,
    metrics_k: int,
    llm_cache: str | None = None,
    run_scope: str | None = None,
) -> AnswerSet:
    """Ask the system every case once: its sources give the retrieval metrics (over every case with
    expected sources, as a grid cell's do) and the sampled cases' answers are tested and judged like a
    reader's, with the passages it returned as the judge's passages. `run_scope`: the run's id, which
    scopes the answers of a system without a version to this run. A case's generated turns are the
    system's own answers, asked first (`ragbench.generation.turns`); a case whose turn failed is not asked."""
    if spec.external != system.name:
        raise ValueError(f"system {system.name} given to cell {spec.id}")
    written: dict[str, WrittenTurns] = {}
    if system.traces:  # what the deployed system logged: nothing is asked
        results = [logged_result(case) for case in cases]
        by_case = {case.id: result for case, result in zip(cases, results, strict=True)}
        version = None
    else:
        with ExternalClient(system, cache_location=llm_cache, run_scope=run_scope) as client:
            written = write_turns(cases, external_turns(client, f"external {system.name}"))
            asked = [
                asked_after(case, written)
                for case in cases
                if case.id not in written or not written[case.id].error
            ]
            results = client.ask_many(
                [case.question for case in asked],
                histories=[[turn.message() for turn in case.history] for case in asked],
                desc=f"external {system.name}",
            )
            version = client.version
        by_case = {case.id: result for case, result in zip(asked, results, strict=True)}
    for case_id, turns in written.items():  # a failed turn fails its case, never asked
        if turns.error is not None:
            question = next(case.question for case in cases if case.id == case_id)
            by_case[case_id] = ExternalResult(question=question, reply=None, error=turns.error)
    contexts = {case.id: external_contexts(by_case[case.id]) for case in cases}
    answers = []
    for case in sample_cases(cases, sample_size, seed):
        result = by_case[case.id]
        answers.append(
            ReaderAnswer(
                case_id=case.id,
                question=case.question,
                history=asked_after(case, written).history,  # as the system received them
                answer=result.reply.answer.strip() if result.reply is not None else None,
                error=result.error,
                contexts=contexts[case.id],
                prompt_tokens=case.logged.prompt_tokens if case.logged else 0,
                completion_tokens=case.logged.completion_tokens if case.logged else 0,
                latency_s=result.latency_s,
                cost_usd=None,  # what the system's own calls cost is not visible from outside
                retries=result.retries,
                cached=result.cached,
                retried_earlier_failure=result.retried_earlier_failure,
            )
        )
    with_sources = [case for case in cases if case.expected_sources]
    returned_sources = any(chunk.source for chunks in contexts.values() for chunk in chunks)
    retrieval = None
    if with_sources and returned_sources:
        ranked = [
            [
                chunk.model_copy(update={"source": system.source_match.source_id(chunk.source)})
                for chunk in contexts[case.id]
            ]
            for case in with_sources
        ]
        expected = [
            case.model_copy(
                update={
                    "expected_sources": [system.source_match.expected_id(s) for s in case.expected_sources]
                }
            )
            for case in with_sources
        ]
        deepest = max((len(chunks) for chunks in contexts.values()), default=0)
        retrieval = RetrievalResult(
            spec=spec.upto("retrieve"),
            chunk_count=0,
            index=None,
            lexical=None,
            search=SearchStats(queries=len(with_sources), ms_per_query=0.0),
            retrieval=retrieval_metrics(expected, ranked, metrics_k, deepest),
        )
    external = ExternalAnswers(
        name=system.name,
        kind=system.kind,
        endpoint=system.endpoint,
        version=version,
        cases_asked=len(results),
        calls_made=0
        if system.traces
        else sum(not result.cached for result in results)
        + sum(turns.calls_sent for turns in written.values()),
        failures=sum(result.reply is None for result in by_case.values()),
        retries=sum(result.retries for result in results) + sum(turns.retries for turns in written.values()),
        returned_contexts=any(contexts.values()),
        retrieval=retrieval,
    )
    return AnswerSet(spec=spec, reranker=None, answers=answers, external=external)


def external_contexts(result: ExternalResult) -> list[RetrievedChunk]:
    """The passages a system returned, in its order, as the reader's passages (no index row; the score its
    trace logged, else 0)."""
    if result.reply is None:
        return []
    return [
        RetrievedChunk(
            position=-1,
            source=context.source or "",
            score=context.score or 0.0,
            text=context.text,
            retrieval_rank=rank,
        )
        for rank, context in enumerate(result.reply.contexts, start=1)
    ]


def logged_result(case: EvalCase) -> ExternalResult:
    """A case's answer as the deployed system logged it in its trace (`case.logged`): the answer, the
    documents its retriever returned (their ids as sources) and its latency; never asked again."""
    if case.logged is None:
        return ExternalResult(
            question=case.question, reply=None, error="no logged answer: the case was not read from a trace"
        )
    reply = ExternalReply(
        answer=case.logged.answer,
        contexts=[
            ExternalContext(text=document.text, source=document.id, score=document.score)
            for document in case.logged.documents
        ],
    )
    return ExternalResult(question=case.question, reply=reply, latency_s=case.logged.latency_s)
