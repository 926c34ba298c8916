"""Scorers run over a cell's answers: every case's `Scorer.score` (rubrics included, as `RubricScorer`s)
with the run's LLM client and scoring embedding model, cases in flight at the client's concurrency, each
call cached, retried and counted into that case's `Judgement`.

The judge's replies are validated against the scorer's schema; the client re-asks after an invalid reply,
and a reply that is still invalid (or a call that failed) is recorded as a failure of that scorer: its
values stay unset, it is left out of every mean and counted, never turned into a score."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from ragbench.llm.client import LLMClient
from ragbench.llm.types import CallUsage, LLMResult
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import CaseScore, ScoreContext, Scorer, ScorerCallFailed

Embed = Callable[[Sequence[str]], np.ndarray]


class Judgement(CallUsage):
    """The judge's verdicts on one answer.

    Per rubric (or any scorer giving verdicts): its criteria in `scores` (by criterion name; pass/fail as
    1/0) and its `reasoning` when judged; its `errors` entry when the judge failed (call failure or no
    valid JSON after re-asks); its `skipped` entry when it does not apply to the case; nothing when it
    was not requested.
    """

    case_id: str
    scores: dict[str, int] = Field(default_factory=dict)
    reasoning: dict[str, str] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    # Self-consistency (evaluation.judge_samples > 1): the scores of each further sample of the same
    # verdict (criterion -> one score per sample that succeeded), and how many further samples failed.
    # The scores above are the first sample's.
    resampled: dict[str, list[int]] = Field(default_factory=dict)
    resample_failures: int = 0
    # Scorers (`ragbench.scoring.scorer`): a value per metric column, what each scorer found (statements,
    # verdicts, reasons) and, for a case it could not score, why (a field it needs is missing).
    values: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    skipped: dict[str, str] = Field(default_factory=dict)
    # Seconds the judge took over this answer's calls, summed (a cached call keeps its own): the judge
    # card's time per verdict.
    latency_s: float = 0.0

    def add(self, result: LLMResult) -> None:
        super().add(result)
        self.latency_s += result.latency_s


class _CaseContext(ScoreContext):
    """One scoring of one case: its calls through the shared client, asked for `sample` unless the scorer
    names one, their results kept for the case's judgement."""

    def __init__(
        self, client: LLMClient | None, embed: Embed | None, embed_lock: threading.Lock, sample: int
    ):
        self._client, self._embed, self._embed_lock, self._sample = client, embed, embed_lock, sample
        self.results: list[LLMResult] = []

    def ask(
        self, messages: list[dict[str, str]], schema: type[BaseModel], *, sample: int | None = None
    ) -> dict[str, Any]:
        if self._client is None:
            raise ScorerCallFailed("this scorer asked an LLM but the cell has no judge")
        result = self._client.complete(
            messages, response_schema=schema, sample=self._sample if sample is None else sample
        )
        self.results.append(result)
        if result.parsed is None:
            raise ScorerCallFailed(result.error or "no valid reply")
        return result.parsed

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed is None:
            raise ScorerCallFailed("this scorer needs embeddings but no scoring embedding model was given")
        with self._embed_lock:  # one encoder shared by the threads
            return self._embed(list(texts))

    @property
    def samples_differ(self) -> bool:
        return self._client is None or self._client.settings.temperature > 0


@dataclass(frozen=True)
class _Job:
    """One scoring of one case (by position) by one scorer: its first sample, or a further one."""

    index: int
    scorer: Scorer
    sample: int


@dataclass
class _Outcome:
    """What a job produced: the calls it made and its score, or why it failed."""

    results: list[LLMResult] = field(default_factory=list)
    scored: CaseScore | None = None
    error: str | None = None


def _record(judgement: Judgement, job: _Job, outcome: _Outcome) -> None:
    """A job's outcome into its case's judgement: the first sample gives the values, scores, reasoning
    and details (or the error); a further sample only its verdicts (or a resample failure)."""
    for result in outcome.results:
        judgement.add(result)  # usage summed over scorers and samples
    name = job.scorer.name
    if job.sample > 0:
        if outcome.scored is None:
            judgement.resample_failures += 1
        else:
            for criterion, verdict in outcome.scored.verdicts.items():
                judgement.resampled.setdefault(criterion, []).append(verdict)
    elif outcome.scored is None:
        judgement.errors[name] = outcome.error or "no valid reply"
    else:
        scored = outcome.scored
        judgement.values |= {column: float(value) for column, value in scored.values.items()}
        if scored.details:
            judgement.details[name] = scored.details
        judgement.scores |= scored.verdicts
        if scored.reasoning is not None:
            judgement.reasoning[name] = scored.reasoning


def apply_scorers(
    client: LLMClient | None,
    embed: Embed | None,
    inputs: Sequence[JudgeInput],
    scorers: Sequence[Scorer],
    judgements: Sequence[Judgement],
    *,
    desc: str = "score",
    samples: int = 1,
) -> None:
    """Score every input with every scorer into its judgement (same order as `inputs`): a value per metric
    column in `values`, what the scorer found in `details[scorer]`, its verdicts in `scores` and its
    reasoning in `reasoning[scorer]`, a case it cannot score in `skipped[scorer]`, a failed call in
    `errors[scorer]` (never a value).

    With `samples` > 1 a scorer that gives verdicts scores each case that many times (each further sample
    asks with ``sample=s``, cached apart): the first sample gives everything above, the others only
    `resampled` (or `resample_failures`). Outcomes are recorded in job order, whatever order the calls
    finish in. Raises only what the client raises for a setup problem (`LLMConfigError`)."""
    scorable: list[tuple[int, Scorer]] = []
    for index, (item, judgement) in enumerate(zip(inputs, judgements, strict=True)):
        for scorer in scorers:
            if (reason := scorer.missing(item)) is None:
                scorable.append((index, scorer))
            else:
                judgement.skipped[scorer.name] = reason
    jobs = [
        _Job(index, scorer, sample)
        for sample in range(samples)  # every first sample before any repeat, as the calls are planned
        for index, scorer in scorable
        if sample == 0 or scorer.gives_verdicts
    ]
    if not jobs:
        return
    embed_lock = threading.Lock()

    def run(job: _Job) -> _Outcome:
        context = _CaseContext(client, embed, embed_lock, job.sample)
        try:
            scored = job.scorer.score(inputs[job.index], context)
        except ScorerCallFailed as failure:
            return _Outcome(context.results, error=str(failure))
        return _Outcome(context.results, scored=scored)

    workers = max(1, min(client.effective_concurrency if client is not None else 1, len(jobs)))
    pool = ThreadPoolExecutor(workers, thread_name_prefix="ragbench-score")
    try:
        with tqdm(total=len(jobs), desc=desc, unit="case") as bar:
            for job, outcome in zip(jobs, pool.map(run, jobs), strict=True):
                _record(judgements[job.index], job, outcome)
                bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # a setup error stops the calls not yet made
