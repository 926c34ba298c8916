"""`reranker_training` in the config: what `run.py train-reranker` writes, mines and trains."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, model_validator

from ragbench.llm.local import DEFAULT_LOCAL_LLM
from ragbench.llm.types import LLMEntry, LLMSettings, llm_settings
from ragbench.models.devices import Device
from ragbench.section import Section, validation_message
from ragbench.training.colbert import TrainingRecipe

TRAINED_PREFIX = "trained:"


class RerankerTrainingConfig(Section):
    """`run.py train-reranker`: a ColBERT reranker fine-tuned on questions written from the knowledge base.
    Use it in the grid as `reranker: [off, trained:<name>]`. See docs/how-to/train-reranker.md."""

    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="what `trained:<name>` calls it (the checkpoint artifact is 'reranker-<name>'); "
        "default: the config's name",
    )
    chunks: int = Field(
        default=120, ge=0, description="chunks the generator writes one question for (0: none, cloze only)"
    )
    min_chunk_chars: int = Field(default=200, ge=0, description="shorter chunks get no generator question")
    cloze: bool = Field(
        default=True,
        description="add an inverse-cloze pseudo-question for every chunk of 3+ sentences (no LLM call)",
    )
    seed: int = Field(default=0, description="seed of the chunk sample, the validation split and training")
    chunk_size: int | None = Field(default=None, ge=16, description="default: the largest grid.chunk_size")
    chunk_overlap: float | None = Field(
        default=None, ge=0, description="default: the first grid.chunk_overlap"
    )
    embedding_model: str | None = Field(
        default=None, description="mines negatives and validation candidates; default: the first grid one"
    )
    generator: LLMEntry = Field(default=DEFAULT_LOCAL_LLM, description="writes the questions")
    generator_defaults: dict[str, Any] = Field(
        default_factory=lambda: {"max_tokens": 80}, description="LLM settings of the generator"
    )
    audience: str = Field(
        default="developers who use and look things up in this documentation",
        min_length=1,
        description="who the knowledge base is for: the generator asks as they would",
    )
    roundtrip_top_k: int = Field(
        default=20,
        ge=1,
        description="a question is kept when BM25 or the dense index ranks its chunk this high",
    )
    negatives: int = Field(default=1, ge=0, le=16, description="mined hard negatives per question")
    validation_share: float = Field(
        default=0.15,
        ge=0.0,
        lt=1.0,
        description="share of sources held out for validation and early stopping",
    )
    candidates_k: int = Field(default=10, ge=2, description="dense candidates a validation question reranks")
    epochs: int = Field(default=6, ge=1, description="passes over the training pairs at most")
    batch_size: int = Field(default=8, ge=2, description="questions per step (each with its negatives)")
    learning_rate: float = Field(default=1e-5, gt=0, description="AdamW peak rate (linear warm-up and decay)")
    doc_maxlen: int = Field(default=300, ge=32, le=508, description="document tokens seen in training")
    validate_every: int = Field(default=24, ge=1, description="steps between validations")
    patience: int = Field(default=4, ge=1, description="validations without a gain before training stops")
    max_minutes: float = Field(default=40.0, gt=0, description="training stops here at the latest")
    device: Device = Field(default="auto", description="auto: a GPU if the step has one, else the CPU")

    @model_validator(mode="after")
    def _check_generator(self) -> RerankerTrainingConfig:
        try:
            self.generator_settings()
        except ValidationError as error:
            raise ValueError(
                f"reranker_training.generator {self.generator!r}: {validation_message(error)}"
            ) from None
        return self

    def generator_settings(self) -> LLMSettings:
        return llm_settings(self.generator, self.generator_defaults)

    def recipe(self) -> TrainingRecipe:
        return TrainingRecipe(
            epochs=self.epochs,
            batch_size=self.batch_size,
            negatives=self.negatives,
            learning_rate=self.learning_rate,
            doc_maxlen=self.doc_maxlen,
            validate_every=self.validate_every,
            patience=self.patience,
            max_minutes=self.max_minutes,
            seed=self.seed,
        )
