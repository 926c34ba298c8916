"""The cache-keyed identities the steps are given: what can change a step's output, as the core describes
it, typed by what it identifies. Each is the core's own dict (`CellSpec.identity`,
`LLMSettings.result_fields`, `Plugin.identity`, the testset and training sections as
`pipelines.testset.testset_identity` and `pipelines.train_reranker.training_identity` give them), so a
parameter's JSON in a step's cache key is what it was when the steps took dicts; and each is checked
against the model it stands for when the pipeline builds the step, not when the step runs.

A root model of a dict, because ZenML stores a pydantic parameter as its dump: a model of every field
would add the defaults a cell does not use (and an LLM's concurrency) to the key. A step gets the model
itself from `cell()`, `llm()` or `section()`."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, RootModel, model_validator

from ragbench.grid.cell import CellSpec
from ragbench.llm.types import LLMSettings

Section = TypeVar("Section", bound=BaseModel)


class CellIdentity(RootModel[dict[str, Any]]):
    """A stage key (a cell up to a stage) by the axes it uses: `CellSpec.identity()`."""

    @classmethod
    def of(cls, cell: CellSpec) -> CellIdentity:
        return cls(cell.identity())

    @model_validator(mode="after")
    def _is_a_cell(self) -> CellIdentity:
        CellSpec.model_validate(self.root)
        return self

    def cell(self) -> CellSpec:
        return CellSpec.model_validate(self.root)


class LLMIdentity(RootModel[dict[str, Any]]):
    """An LLM by the settings that can change its replies: `LLMSettings.result_fields()`."""

    @classmethod
    def of(cls, llm: LLMSettings) -> LLMIdentity:
        return cls(llm.result_fields())

    @model_validator(mode="after")
    def _is_an_llm(self) -> LLMIdentity:
        LLMSettings.model_validate(self.root)
        return self

    def llm(self) -> LLMSettings:
        return LLMSettings.model_validate(self.root)


class PluginIdentity(RootModel[dict[str, Any]]):
    """A retriever or a scorer by its name, package version, source digest and settings
    (`Plugin.identity()`); `ragbench.retrieval.retrievers.retriever_from_identity` and
    `ragbench.scoring.registry.scorers_from_identities` make it again, checking the version."""


class SectionIdentity(RootModel[dict[str, Any]]):
    """A config section (testset, reranker_training) by every field that can change what its steps make,
    its LLMs by their result settings; `section(Model)` validates it as that section."""

    def section(self, model: type[Section]) -> Section:
        return model.model_validate(self.root)
