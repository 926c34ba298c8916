"""What a run's report shows: the table's rows and headline metrics, the verdicts, the judge's reliability
and every case's answers side by side (the input of ragbench.report.page.render_report)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.judge_reliability import JudgeReliability
from ragbench.analysis.labelled import LabelCorrection
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.reranking import RerankGain
from ragbench.analysis.rewriting import RewriteGain
from ragbench.analysis.search_findings import SearchFindings
from ragbench.analysis.uncertainty import MetricVerdict
from ragbench.review.alignment import JudgeAlignment
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.pairwise import PairwiseResult


class CasePassage(BaseModel):
    source: str
    text: str
    retrieval_rank: int | None = None


class CaseView(BaseModel):
    """One answer of one cell to one eval case, for the side-by-side view."""

    cell: str
    case_id: str
    question: str
    # the conversation the cell's reader saw before the question: {role, content} each, and generate: true
    # on an assistant turn that reader wrote (`ragbench.generation.turns`)
    history: list[dict[str, Any]] = []
    searched: list[str] = []  # what the retriever searched, when a query rewrite changed it
    answer: str | None
    error: str | None = None
    passages: list[CasePassage] = []
    keyword_failures: list[str] = []
    scores: dict[str, str] = {}  # criterion -> the judge's verdict as read (``4 / 5``, ``pass``)
    judge_reasoning: str | None = None
    # scorer -> what it found, one line per statement, question or passage (`scorer_detail_lines`)
    scorer_details: dict[str, list[str]] = {}


class ReportInput(BaseModel):
    title: str
    notes: list[str] = []
    warnings: list[str] = []
    axes: list[str]
    varying_axes: list[str]
    rows: list[dict]
    headline: list[MetricInfo]
    latency_column: str | None = None
    cost_column: str | None = None
    cases: list[CaseView] = []
    keyword_failures: list[dict] = []
    weak_answers: list[dict] = []
    verdicts: list[MetricVerdict] = []
    rerank_gains: list[RerankGain] = []  # per reranking cell and metric: reranked against the first stage
    rewrite_gains: list[RewriteGain] = []  # per rewriting cell, metric and case group: against its `off` twin
    confidence: float = 0.95
    judge_reliability: JudgeReliability | None = None
    judge_cards: list[JudgeCard] = []
    judge_alignments: list[JudgeAlignment] = []
    # per (cell, case type): `label`, `case_type` and each headline score with `_low`, `_high`, `_cases`
    case_type_rows: list[dict] = []
    # per (cell, turn mode): the same with `turns` (given or generated earlier turns) for `case_type`
    turn_mode_rows: list[dict] = []
    pairwise: list[PairwiseResult] = []
    race: RaceTrace | None = None  # search: race, its elimination trace
    search: SearchFindings | None = None  # a staged search's decisions and confirmation
    # references fetched at run time (`reference_from`): case, field, source, value, time, error
    references: list[dict] = []
    label_correction: LabelCorrection | None = None  # judged metrics corrected by a person's sampled labels
    judge_only_verdicts: list[MetricVerdict] = []  # the judge's verdicts where corrected ones replace them
