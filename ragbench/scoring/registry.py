"""The registry of a run's metrics: the retrieval metrics, every rubric's criteria, every suite.

The results table, intervals, paired tests, compare, the gate, the report and the dry run all read the
metrics from here, so a rubric or suite, built-in or a user's, is a metric everywhere once declared.
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

from ragbench.scoring.keyword_tests import BUILTIN_SUITES, AssertionSuite, Suite
from ragbench.scoring.metrics import LATENCY, MetricInfo, metric_key, retrieval_metrics
from ragbench.scoring.pairwise import DEFAULT_CRITERION
from ragbench.scoring.rubrics import BUILTIN_RUBRICS, CustomRubric, Rubric, names_of, select_rubrics
from ragbench.section import Section


@dataclass(frozen=True)
class Scoring:
    """What a run scores answers with, and the metrics that makes."""

    rubrics: tuple[Rubric, ...]
    suites: tuple[Suite, ...]
    metrics_k: int

    def __post_init__(self) -> None:
        columns = [metric.column for metric in self.metrics()] + [LATENCY.column]
        if twice := sorted({column for column in columns if columns.count(column) > 1}):
            raise ValueError(f"metric name(s) {', '.join(twice)} used twice: every metric needs its own name")

    def metrics(self) -> list[MetricInfo]:
        """Every metric, in display order: the judge's, the suites', then retrieval."""
        judged = [criterion.metric for rubric in self.rubrics for criterion in rubric.criteria]
        return [*judged, *(suite.metric for suite in self.suites), *retrieval_metrics(self.metrics_k)]

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

    @field_validator("baseline", mode="before")
    @classmethod
    def _reader_shorthand(cls, value: Any) -> Any:
        return {"reader": value} if isinstance(value, str) else value

    @field_validator("baseline")
    @classmethod
    def _not_empty(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("evaluation.pairwise.baseline names no axis")
        return value


class EvaluationConfig(Section):
    """How answers are scored: keyword tests and the LLM judge."""

    keyword_tests: bool = Field(
        default=True, description="run the built-in keyword suites (the cases' words) on every answer"
    )
    judge: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 320},
        description="LLMSettings fields applied to every judge in grid.judge (an entry's own fields win)",
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
    judge_samples: int = Field(
        default=1,
        ge=1,
        le=20,
        description="verdicts per answer and rubric: more than 1 measures the judge's self-consistency "
        "and needs judge temperature > 0",
    )

    @field_validator("rubrics")
    @classmethod
    def _known_rubrics(cls, names: list[str]) -> list[str]:
        if unknown := [name for name in names if name not in BUILTIN_RUBRICS]:
            raise ValueError(
                f"unknown rubric(s) {', '.join(unknown)}; built in: {', '.join(BUILTIN_RUBRICS)}"
            )
        return names

    @model_validator(mode="after")
    def _custom_names_are_not_builtin(self) -> EvaluationConfig:
        """A custom metric never takes a built-in's name, whether or not that built-in is on: a run that
        turns it on later, or a reader of the results, would take one for the other."""
        builtin = names_of(BUILTIN_RUBRICS.values()) | {suite.name for suite in BUILTIN_SUITES}
        custom = [rubric.name for rubric in self.custom_rubrics] + [
            suite.name for suite in self.custom_suites
        ]
        if taken := sorted(builtin.intersection(custom)):
            raise ValueError(
                f"custom metric name(s) {', '.join(taken)} belong to built-in metrics (built in: "
                f"{', '.join(sorted(builtin))}): choose another name"
            )
        return self

    def scoring(self, metrics_k: int) -> Scoring:
        """The registry of the metrics these settings make, with retrieval's at `metrics_k`."""
        return Scoring(
            rubrics=tuple(select_rubrics(self.rubrics, self.custom_rubrics)),
            suites=(*(BUILTIN_SUITES if self.keyword_tests else ()), *self.custom_suites),
            metrics_k=metrics_k,
        )
