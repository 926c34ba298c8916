"""A follow-up searched again after the cell's own earlier turns: the rewrite, retrieve and rerank stages of
one cell run on the questions whose conversation holds an assistant turn that cell's reader wrote
(`ragbench.generation.turns`).

The stages rank every case once per key, before any reader writes a turn, so a query rewrite reads a
conversation's given turns only (`conversation_text` leaves a turn not yet written out). Where the rewrite
reads the conversation (any mode but off), what this cell wrote earlier can change what its follow-up
finds: "and what does it return?" means another function after another answer. So a rewriting cell
searches each such question again, once the turns before it are written, with the same rewrite prompt, the
same retriever over the same indexes and the same reranker as its stages. With rewrite off the question is
searched as it is, the history changes nothing, and the stages' ranking stands.

The stages' own ranking of such a case stays what the retrieval metrics measure (the case with its given
turns); what the reader read after its own turns is in its answer (`ReaderAnswer.contexts`, `searched`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from ragbench.retrieval.colbert_maxsim import ColbertEncodings, PrecomputedColbertReranker
from ragbench.retrieval.rerank import Reranker
from ragbench.retrieval.rerank_stage import rerank_candidates
from ragbench.retrieval.retrievers import Retriever, SearchContext, retriever_from_identity
from ragbench.retrieval.rewrite import QueryRewrite
from ragbench.retrieval.rewriter import RewriteSetup, rewrite_queries
from ragbench.retrieval.search import RetrievedChunk, retrieve_candidates

__all__ = ["FollowUpSearch", "FollowUpSearcher", "SearchedAgain", "follow_up_searcher", "reads_written_turns"]


class FollowUpSearch(BaseModel):
    """What a rewriting cell's answer step is given to search follow-ups again, beside the chunk set and
    indexes (its parameter, in the cache key): the retriever by its identity (`Plugin.identity`), the
    rewriter's settings and query count (`RewriteSetup`) and the fusion's k for several queries."""

    retriever: dict[str, Any]
    rewrite: RewriteSetup
    fusion_k: int = 60


def reads_written_turns(question: EvalCase) -> bool:
    """Whether `question` (a case, or a generated turn's question, as asked) comes after a turn the cell
    wrote: the one kind of question a rewriting cell searches again."""
    return any(turn.generate and not turn.pending for turn in question.history)


@dataclass(frozen=True)
class SearchedAgain:
    """One question's passages after its conversation as written (the cell's top_n, best first), what was
    searched for it, and what its rewrite call cost; `error`: the rewrite failed, nothing was searched."""

    passages: list[RetrievedChunk]
    queries: list[str]
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: no price for the rewriter
    cached: bool = True  # no call sent (served from the LLM cache, or none needed)


@dataclass
class FollowUpSearcher:
    """One cell's rewrite, first stage and rerank, made where its answer step runs: `search` ranks a batch
    of questions as the cell's stages rank a case. `rewriter`: the run's rewriter with its operational
    settings; `reranker`: the cell's, None without one."""

    spec: CellSpec
    rewriter: LLMSettings
    retriever: Retriever
    context: SearchContext
    reranker: Reranker | None
    count: int  # multi_query's queries per question
    fusion_k: int

    def search(self, rewriter: LLMClient, questions: Sequence[EvalCase]) -> list[SearchedAgain]:
        """Each question rewritten after its conversation as written, searched and reranked: its top_n.
        A question whose rewrite failed is not searched (searching its bare question would hide what the
        cell's own turn changed): its error says why, and the case or turn fails."""
        if self.spec.query_rewrite is None or self.spec.top_n is None:
            raise ValueError(f"cell {self.spec.id} does not rewrite: its stages' ranking stands")
        mode: QueryRewrite = self.spec.query_rewrite  # type: ignore[assignment]
        queries = rewrite_queries(
            mode, questions, rewriter, count=self.count, desc=f"rewrite {mode} {self.spec.id} (follow-ups)"
        )
        searched = list(zip(questions, queries, strict=True))
        ranked = [(question, rewritten) for question, rewritten in searched if rewritten.error is None]
        by_case: dict[str, list[RetrievedChunk]] = {}
        if ranked:
            ranked_questions = [question for question, _ in ranked]
            candidates, _ = retrieve_candidates(
                self.spec.upto("retrieve"),
                self.retriever,
                self.context,
                ranked_questions,
                [rewritten for _, rewritten in ranked],
                rrf_k=self.fusion_k,
            )
            if self.reranker is not None:
                candidates = rerank_candidates(
                    candidates,
                    ranked_questions,
                    self.reranker,
                    spec=self.spec.upto("rerank"),
                    progress=False,
                )
            by_case = candidates.by_case
        return [
            SearchedAgain(
                passages=by_case.get(question.id, [])[: self.spec.top_n],
                queries=rewritten.queries,
                error=None
                if rewritten.error is None
                else f"the follow-up's {mode} rewrite: " + rewritten.error,
                prompt_tokens=rewritten.prompt_tokens,
                completion_tokens=rewritten.completion_tokens,
                cost_usd=rewritten.cost_usd,
                cached=rewritten.cached or rewritten.calls == 0,
            )
            for question, rewritten in searched
        ]


def follow_up_searcher(
    spec: CellSpec,
    setup: FollowUpSearch,
    operations: dict[str, dict[str, Any]],
    context: SearchContext,
    encodings: ColbertEncodings | None,
) -> FollowUpSearcher:
    """A rewriting cell's searcher from what its answer step was given: `context`, the chunk set and the
    indexes its retriever reads; `encodings`, its reranker's stored chunk encodings (None without one);
    `operations`, the LLMs' operational settings by result key (the rewriter's among them)."""
    if (spec.reranker is None) != (encodings is None):
        raise ValueError(f"cell {spec.id}: chunk encodings are given exactly when the cell reranks")
    reranker = (
        PrecomputedColbertReranker(
            encodings, choice=encodings.choice, chunk_set_fingerprint=context.chunks.fingerprint
        )
        if encodings is not None
        else None
    )
    return FollowUpSearcher(
        spec=spec,
        rewriter=setup.rewrite.settings(operations),
        retriever=retriever_from_identity(setup.retriever),
        context=context,
        reranker=reranker,
        count=setup.rewrite.count,
        fusion_k=setup.fusion_k,
    )
