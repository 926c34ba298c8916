"""Scorers run over a cell's answers: every case's `Scorer.score` with the run's LLM client and scoring
embedding model, cases in flight at the client's concurrency, each call cached, retried and counted into
that case's `Judgement` like a rubric's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from pydantic import BaseModel
from tqdm.auto import tqdm

from ragbench.llm.client import LLMClient
from ragbench.scoring.judge import Judgement
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import ScoreContext, Scorer, ScorerCallFailed

Embed = Callable[[Sequence[str]], np.ndarray]


class _CaseContext(ScoreContext):
    """One case's calls: through the shared client, their usage summed into the case's judgement."""

    def __init__(
        self, client: LLMClient | None, embed: Embed | None, judgement: Judgement, lock: threading.Lock
    ):
        self._client, self._embed, self._judgement, self._lock = client, embed, judgement, lock

    def ask(
        self, messages: list[dict[str, str]], schema: type[BaseModel], *, sample: int = 0
    ) -> dict[str, Any]:
        if self._client is None:
            raise ScorerCallFailed("this scorer asked an LLM but the cell has no judge")
        result = self._client.complete(messages, response_schema=schema, sample=sample)
        with self._lock:
            self._judgement.add(result)
        if result.parsed is None:
            raise ScorerCallFailed(result.error or "no valid reply")
        return result.parsed

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed is None:
            raise ScorerCallFailed("this scorer needs embeddings but no scoring embedding model was given")
        with self._lock:  # one encoder shared by the threads
            return self._embed(list(texts))

    @property
    def samples_differ(self) -> bool:
        return self._client is None or self._client.settings.temperature > 0


def apply_scorers(
    client: LLMClient | None,
    embed: Embed | None,
    inputs: Sequence[JudgeInput],
    scorers: Sequence[Scorer],
    judgements: Sequence[Judgement],
    *,
    desc: str = "score",
) -> None:
    """Score every input with every scorer into its judgement (same order as `inputs`): a value per metric
    column in `values`, what the scorer found in `details[scorer]`, a missing field in `skipped[scorer]`, a
    failed call in `errors[scorer]` (never a value)."""
    if not scorers or not inputs:
        return
    lock = threading.Lock()
    jobs = [
        (item, judgement, scorer)
        for item, judgement in zip(inputs, judgements, strict=True)
        for scorer in scorers
    ]
    workers = max(1, min(client.effective_concurrency if client is not None else 1, len(jobs)))

    def run(job: tuple[JudgeInput, Judgement, Scorer]) -> None:
        item, judgement, scorer = job
        if (reason := scorer.missing(item)) is not None:
            with lock:
                judgement.skipped[scorer.name] = reason
            return
        try:
            scored = scorer.score(item, _CaseContext(client, embed, judgement, lock))
        except ScorerCallFailed as failure:
            with lock:
                judgement.errors[scorer.name] = str(failure)
            return
        with lock:
            judgement.values |= {column: float(value) for column, value in scored.values.items()}
            judgement.details[scorer.name] = scored.details

    with tqdm(total=len(jobs), desc=desc, unit="case") as bar, ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(run, jobs):
            bar.update(1)
