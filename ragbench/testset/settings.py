"""`testset` in the config: what `run.py testset` generates, how it filters, which models it uses."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.llm.types import LLMEntry, LLMSettings, llm_settings
from ragbench.section import Section, validation_message


class TestsetConfig(Section):
    """`run.py testset`: generate eval cases from the knowledge base, critique them, keep the good ones.
    See docs/how-to/eval-sets.md."""

    __test__ = False  # not a pytest test class, despite its name

    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="ZenML artifact name of the eval set; default: '<config name>-eval-set'",
    )
    chunks: int = Field(default=20, ge=1, description="chunks sampled; each seeds questions_per_chunk cases")
    questions_per_chunk: int = Field(
        default=1,
        ge=1,
        le=10,
        description="questions the generator writes per sampled chunk, in one call (each is evolved and "
        "filtered on its own; near-duplicates are removed)",
    )
    sampling: Literal["proportional", "even"] = Field(
        default="proportional",
        description="proportional: sources in proportion to their chunks; even: the same from each source",
    )
    min_chunk_chars: int = Field(default=200, ge=0, description="shorter chunks are never sampled")
    seed: int = Field(default=0, description="seed of the chunk sample and the evolution mix")
    chunk_size: int | None = Field(default=None, ge=16, description="default: the largest grid.chunk_size")
    chunk_overlap: float | None = Field(
        default=None, ge=0, description="default: the first grid.chunk_overlap"
    )
    embedding_model: str | None = Field(
        default=None, description="for related chunks, retrieval checks and near-duplicates; default: first"
    )
    generator: LLMEntry = Field(default=DEFAULT_LOCAL_LLM, description="writes questions and answers")
    critic: LLMEntry | None = Field(default=None, description="rates them; default: the generator")
    generator_defaults: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 300}, description="LLM settings shared by the generator"
    )
    critic_defaults: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 300}, description="LLM settings shared by the critic"
    )
    audience: str = Field(
        default="developers who use and look things up in this documentation",
        min_length=1,
        description="who the knowledge base is for: the generator writes for them, the relevance critic "
        "rates for them",
    )
    evolutions: dict[str, float] = Field(
        default_factory=lambda: {"simple": 0.4, "reasoning": 0.2, "conditional": 0.2, "multi_context": 0.2},
        description="share of answerable cases of each evolution type (shares add up to 1; the types are "
        "those of ragbench.testset.rubrics.EVOLUTIONS)",
    )
    unanswerable_share: float = Field(
        default=0.15,
        ge=0.0,
        lt=1.0,
        description="share of all cases whose answer is not in the knowledge base",
    )
    thresholds: dict[str, int] = Field(
        default_factory=dict,
        description="critic -> lowest rating (1-5) a kept case has (default 4 for a critic not named); every "
        "critic that rates a case must pass; the critics are those of ragbench.testset.rubrics.CRITICS",
    )
    retrieved_passages: int = Field(
        default=5, ge=1, description="passages of the whole knowledge base the unanswerable critic sees"
    )
    duplicate_similarity: float = Field(
        default=0.9, gt=0.0, le=1.0, description="questions at least this similar (cosine) are duplicates"
    )
    max_good_words: int = Field(default=3, ge=0, description="keyword candidates per case")
    filters: list[Literal["roundtrip", "critics"]] = Field(
        default=["roundtrip"],
        min_length=1,
        description="what decides which cases are kept (a case must pass every filter listed): "
        "roundtrip, the critic model answering each question back as a reader (docs/how-to/eval-sets.md); "
        "critics, its 1-5 ratings against testset.thresholds",
    )
    roundtrip_f1: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="token F1 from which a reader's answer agrees with the proposed one",
    )
    roundtrip_short_answer_tokens: int = Field(
        default=12,
        ge=1,
        description="a proposed answer of more tokens is long: where word overlap cannot decide, the critic "
        "model says whether two answers state the same facts",
    )
    labels: str | None = Field(
        default=None,
        description="a file of a person's verdicts on candidates ({id, question, human_keep, reason}, "
        "YAML or JSONL): each filter's precision, recall and kappa against them are reported",
    )

    @model_validator(mode="after")
    def _check_mix(self) -> TestsetConfig:
        if any(not math.isfinite(share) or share < 0 for share in self.evolutions.values()):
            raise ValueError("testset.evolutions: shares must be numbers of at least 0")
        if abs(sum(self.evolutions.values()) - 1.0) > 1e-6:
            raise ValueError(f"testset.evolutions: shares add up to {sum(self.evolutions.values()):g}, not 1")
        if any(not 1 <= value <= 5 for value in self.thresholds.values()):
            raise ValueError("testset.thresholds: ratings are 1-5")
        for role, entry, defaults in (
            ("generator", self.generator, self.generator_defaults),
            ("critic", self.critic_entry, self.critic_defaults),
        ):
            try:
                llm_settings(entry, defaults)
            except ValidationError as error:
                raise ValueError(f"testset.{role} {entry!r}: {validation_message(error)}") from None
        return self

    @property
    def critic_entry(self) -> LLMEntry:
        return self.generator if self.critic is None else self.critic

    def generator_settings(self) -> LLMSettings:
        return llm_settings(self.generator, self.generator_defaults)

    def critic_settings(self) -> LLMSettings:
        return llm_settings(self.critic_entry, self.critic_defaults)
