"""The registry of a run's metrics: the retrieval metrics, every rubric's criteria, every scorer's metrics,
every suite.

The results table, intervals, paired tests, compare, the gate, the report and the dry run all read the
metrics from here, so a rubric, scorer or suite, built-in, a user's or another package's, is a metric
everywhere once declared. Scorers are the built-in Ragas family (`ragbench.scoring.ragas_family`) and those
other installed packages register in the entry point group ``ragbench.scorers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from ragbench.plugins import Registry
from ragbench.scoring.keyword_tests import BUILTIN_SUITES, AssertionSuite, Suite
from ragbench.scoring.metrics import LATENCY, MetricInfo, metric_key, retrieval_metrics
from ragbench.scoring.pairwise import DEFAULT_CRITERION
from ragbench.scoring.ragas_family import RAGAS_FAMILY
from ragbench.scoring.repeats import JudgeRepeatsConfig
from ragbench.scoring.rubrics import BUILTIN_RUBRICS, CustomRubric, Rubric, names_of, select_rubrics
from ragbench.scoring.scorer import Scorer
from ragbench.section import Section

SCORER_ENTRY_POINTS = "ragbench.scorers"
SCORERS: Registry[Scorer] = Registry("metric", SCORER_ENTRY_POINTS, Scorer, RAGAS_FAMILY)


def available_scorers() -> dict[str, type[Scorer]]:
    """Every scorer a config may name: the built-in Ragas family, then each one an installed package
    registers as ``[project.entry-points."ragbench.scorers"] <name> = "package.module:ScorerClass"``."""
    return SCORERS.available()


def make_scorers(names: Sequence[str]) -> tuple[Scorer, ...]:
    """The scorers `names` select, in their order."""
    return tuple(scorer() for scorer in SCORERS.classes(names))


def scorers_from_identities(identities: Sequence[dict]) -> tuple[Scorer, ...]:
    """The scorers a step was given by `Scorer.identity`, found where the step runs (`Registry.checked`)."""
    scorers = make_scorers([identity["name"] for identity in identities])
    return tuple(
        SCORERS.checked(scorer, identity) for scorer, identity in zip(scorers, identities, strict=True)
    )


@dataclass(frozen=True)
class Scoring:
    """What a run scores answers with, and the metrics that makes."""

    rubrics: tuple[Rubric, ...]
    suites: tuple[Suite, ...]
    metrics_k: int
    scorers: tuple[Scorer, ...] = ()

    def __post_init__(self) -> None:
        columns = [metric.column for metric in self.metrics()] + [LATENCY.column]
        if twice := sorted({column for column in columns if columns.count(column) > 1}):
            raise ValueError(f"metric name(s) {', '.join(twice)} used twice: every metric needs its own name")

    def metrics(self) -> list[MetricInfo]:
        """Every metric, in display order: the judge's rubrics', the scorers', the suites', then retrieval."""
        judged = [criterion.metric for rubric in self.rubrics for criterion in rubric.criteria]
        scored = [metric for scorer in self.scorers for metric in scorer.metrics()]
        suites = [suite.metric for suite in self.suites]
        return [*judged, *scored, *suites, *retrieval_metrics(self.metrics_k)]

    def headline(self) -> list[MetricInfo]:
        """The scores a configuration is chosen by, gated and charted, in display order."""
        side = {c.column for rubric in self.rubrics for c in rubric.criteria if not c.headline}
        side |= {suite.column for suite in self.suites if not suite.headline}
        return [metric for metric in self.metrics() if metric.column not in side]

    def tracked_keys(self) -> list[str]:
        """The run-metadata keys the gate compares, which a regression threshold may name."""
        return [metric_key(metric.column) for metric in [*self.headline(), LATENCY]]


def present(metrics: Sequence[MetricInfo], rows: Sequence[dict]) -> list[MetricInfo]:
    """The metrics some row has a value for: what a run actually computed."""
    computed = {column for row in rows for column, value in row.items() if value is not None}
    return [metric for metric in metrics if metric.column in computed]


class PairwiseConfig(Section):
    """Blinded pairwise judging: every answer set against its counterpart with the baseline's values."""

    baseline: dict[str, str] = Field(
        description="the baseline's axis values, e.g. {reader: local/qwen2.5-0.5b-instruct} or "
        "{retriever: dense}; a string is short for {reader: ...}. Each answer set that differs from it on "
        "these axes only is compared with it, case by case, by every judge; {external: <system name>}: "
        "every other answer set against that system's"
    )
    criterion: str = Field(default=DEFAULT_CRITERION, min_length=1, description="what 'better' means")
    seed: int = Field(default=0, description="seed of the order the two answers are shown in")

    @field_validator("baseline", mode="before", json_schema_input_type=dict[str, str] | str)
    @classmethod
    def _reader_shorthand(cls, value: Any) -> Any:
        return {"reader": value} if isinstance(value, str) else value

    @field_validator("baseline")
    @classmethod
    def _not_empty(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("evaluation.pairwise.baseline names no axis")
        return value


class JudgeCheckConfig(Section):
    """The judge card: each judge grades planted errors made from the eval cases' reference answers."""

    cases: int = Field(
        default=8,
        ge=1,
        le=500,
        description="eval cases (with a reference answer) sampled, seeded; each gives the unchanged "
        "reference and one answer per error type that applies (number, entity, negation, unsupported, "
        "refusal)",
    )
    min_detection: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="a judge is labelled unreliable for the rubric, wherever its numbers appear, unless it "
        "catches at least this share of the planted errors and passes at least this share of the "
        "unchanged references (point estimates; their intervals are shown beside them)",
    )
    seed: int = Field(default=0, description="seed of the sampled cases and of the planted errors")


class LabelsSection(Section):
    """A section that reads a person's labels from the review page."""

    labels: str = Field(
        default="review_labels",
        description="the labels: the name of the artifact `run.py review` publishes (review_labels, or "
        "review_labels:VERSION), or a labels JSONL file the review page wrote",
    )


class JudgeAlignmentConfig(LabelsSection):
    """`evaluation.judge_alignment`: align every judge of the run with a person's labels
    (`ragbench.review.alignment`)."""

    examples: int = Field(
        default=4,
        ge=0,
        le=20,
        description="labelled answers shown to the judge per call (disagreements first); 0 measures the "
        "judge against the labels without aligning it",
    )


class LabelCorrectionConfig(LabelsSection):
    """`evaluation.label_correction`: correct the judged metrics with a person's labels of a random
    sample of the run's answers, drawn on the review page's `sample` orders (`ragbench.analysis.labelled`)."""

    min_labels: int = Field(
        default=10,
        ge=2,
        le=1000,
        description="fewer labelled answers than this give no corrected interval (the report says so)",
    )
    target_width: float = Field(
        default=0.2,
        gt=0.0,
        le=1.0,
        description="the interval width (on the metric's 0-1 scale) the labels-needed figures plan for",
    )


class EvaluationConfig(Section):
    """How answers are scored: keyword tests and the LLM judge."""

    keyword_tests: bool = Field(
        default=True, description="run the built-in keyword suites (the cases' words) on every answer"
    )
    judge: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 300},
        description="LLMSettings fields applied to every judge in grid.judge (an entry's own fields win)",
    )
    metrics: list[str] = Field(
        default_factory=list,
        description="scorers, each a metric of its own name: the Ragas family (faithfulness, "
        "answer_relevancy, context_precision, context_recall, answer_similarity, answer_correctness; "
        "docs/concepts/metrics.md) or one another installed package registers in the entry point group "
        "ragbench.scorers",
    )
    embedding_model: str | None = Field(
        default=None,
        description="the embedding model scorers compare texts with (answer_relevancy, answer_similarity, "
        "answer_correctness); default: the grid's first embedding model",
    )
    rubrics: list[str] = Field(
        default=["correctness", "context"],
        description=f"built-in judge rubrics, any of {', '.join(BUILTIN_RUBRICS)}: correctness against the "
        "reference answer; context: faithfulness to the passages, relevance, helpfulness, toxicity",
    )
    custom_rubrics: list[CustomRubric] = Field(
        default_factory=list,
        description="your own judge rubrics, each {name, criteria, inputs, scale, anchors, tags, "
        "higher_is_better}: a metric named after it (docs/how-to/metrics.md)",
    )
    custom_suites: list[AssertionSuite] = Field(
        default_factory=list,
        description="your own deterministic checks, each {name, assert, value, match, tags, label}: "
        "assert is contains, contains-any, contains-all, starts-with, regex, max-length or is-json, "
        "or not-<any of them>; a metric fail_<name>",
    )
    pairwise: PairwiseConfig | None = Field(
        default=None, description="blinded pairwise judging against a baseline (docs/how-to/pairwise.md)"
    )
    judge_check: JudgeCheckConfig | None = Field(
        default_factory=JudgeCheckConfig,
        description="the judge card: each judge tested on planted errors every run (the calls are cached, "
        "so later runs pay nothing); null turns it off (docs/concepts/judge-card.md)",
    )
    judge_samples: int = Field(
        default=1,
        ge=1,
        le=20,
        description="verdicts per answer and rubric: more than 1 measures the judge's self-consistency "
        "and needs judge temperature > 0",
    )
    judge_repeats: JudgeRepeatsConfig | None = Field(
        default=None,
        description="ask a seeded sample of each cell's verdicts again: {count, sample, reorder_share}; "
        "the flip rate at the pass threshold, the position effect and the judge's variance are reported "
        "(docs/concepts/uncertainty.md#judge-repeats)",
    )
    judge_alignment: JudgeAlignmentConfig | None = Field(
        default=None,
        description="align every judge with a person's labels from the review page (run.py review): "
        "{labels, examples}; the agreement before and after, on held-out labels, is in the report "
        "(docs/how-to/review.md)",
    )
    label_correction: LabelCorrectionConfig | None = Field(
        default=None,
        description="correct every judged metric with a person's labels of a random sample of the answers "
        "(the review page's sample orders): {labels, min_labels, target_width}; each cell's mean gets a "
        "prediction-powered estimate and the verdicts use it (docs/concepts/label-correction.md)",
    )

    @field_validator("rubrics")
    @classmethod
    def _known_rubrics(cls, names: list[str]) -> list[str]:
        if unknown := [name for name in names if name not in BUILTIN_RUBRICS]:
            raise ValueError(
                f"unknown rubric(s) {', '.join(unknown)}; built in: {', '.join(BUILTIN_RUBRICS)}"
            )
        return names

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, names: list[str]) -> list[str]:
        make_scorers(names)
        if len(set(names)) != len(names):
            raise ValueError(f"evaluation.metrics names a metric twice: {names}")
        return names

    @model_validator(mode="after")
    def _custom_names_are_not_builtin(self) -> EvaluationConfig:
        """A custom metric never takes a built-in's name, whether or not that built-in is on: a run that
        turns it on later, or a reader of the results, would take one for the other."""
        builtin = (
            names_of(BUILTIN_RUBRICS.values())
            | {suite.name for suite in BUILTIN_SUITES}
            | {column for scorer in make_scorers(list(available_scorers())) for column in _names(scorer)}
        )
        custom = [rubric.name for rubric in self.custom_rubrics] + [
            suite.name for suite in self.custom_suites
        ]
        if taken := sorted(builtin.intersection(custom)):
            raise ValueError(
                f"custom metric name(s) {', '.join(taken)} belong to built-in metrics (built in: "
                f"{', '.join(sorted(builtin))}): choose another name"
            )
        return self

    @model_validator(mode="after")
    def _one_labels_source(self) -> EvaluationConfig:
        """Alignment and correction read one set of labels: two sources would make a run whose judge learns
        from one person's labels while its numbers are corrected by another's."""
        alignment, correction = self.judge_alignment, self.label_correction
        if alignment is not None and correction is not None and alignment.labels != correction.labels:
            raise ValueError(
                f"evaluation.judge_alignment.labels ({alignment.labels}) and "
                "evaluation.label_correction.labels "
                f"({correction.labels}) differ: give both the same labels"
            )
        return self

    @property
    def labels_source(self) -> str | None:
        """Where the run's labels come from, if alignment or correction asks for them."""
        section = self.label_correction or self.judge_alignment
        return section.labels if section is not None else None

    def scoring(self, metrics_k: int) -> Scoring:
        """The registry of the metrics these settings make, with retrieval's at `metrics_k`."""
        return Scoring(
            rubrics=tuple(select_rubrics(self.rubrics, self.custom_rubrics)),
            suites=(*(BUILTIN_SUITES if self.keyword_tests else ()), *self.custom_suites),
            metrics_k=metrics_k,
            scorers=make_scorers(self.metrics),
        )


def _names(scorer: Scorer) -> set[str]:
    """A scorer's name and its metric columns."""
    return {scorer.name, *(metric.column for metric in scorer.metrics())}
