"""What `build_results` reads beside the cells' stage results, as one typed bundle: the run's title and
scoring, its notes and warnings so far, and the run-level findings (pairwise comparisons, judge cards,
judge alignments, a race's trace, a model-based search's trials, fetched references, a person's labels)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.search_findings import SearchFindings
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.inputs.references import ReferenceResolutions
from ragbench.review.alignment import JudgeAlignment
from ragbench.review.labels import ReviewLabels
from ragbench.scoring.pairwise import PairwiseResult
from ragbench.scoring.registry import LabelCorrectionConfig, Scoring
from ragbench.stats.inference import StatisticsConfig


@dataclass(frozen=True)
class ResultsInputs:
    """`eval_suite`: gives each case its type for the breakdown by case type (none: no breakdown);
    `labels_given` and `label_correction`: a person's labels and how they correct the judge's numbers."""

    title: str
    scoring: Scoring
    statistics: StatisticsConfig
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reused_cells: set[str] = field(default_factory=set)
    eval_suite: EvalSuite | None = None
    knowledge_base_fingerprint: str = ""
    pairwise: Sequence[PairwiseResult] = ()
    judge_cards: Sequence[JudgeCard] = ()
    race: RaceTrace | None = None
    search: SearchFindings | None = None  # a search's decisions and confirmation (staged)
    judge_alignments: Sequence[JudgeAlignment] = ()
    references: ReferenceResolutions | None = None
    labels_given: ReviewLabels | None = None
    label_correction: LabelCorrectionConfig | None = None
