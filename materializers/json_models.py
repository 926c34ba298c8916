"""Corpora and chunk sets stored as one JSON file each (one file, not one sub-artifact per item).

The HTML helpers are imported inside `save_visualizations` only, so that the steps these materializers
serve do not depend on presentation code for their cache keys (`steps.caching`).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, ClassVar

from pydantic import BaseModel
from zenml.enums import ArtifactType, VisualizationType
from zenml.materializers.base_materializer import BaseMaterializer

from ragbench.hashing import canonical_json, sha256_hex
from ragbench.inputs.chunking import ChunkSet
from ragbench.inputs.knowledge_base import Corpus, documents_digest

DATA_FILE = "data.json"
PREVIEW_ROWS = 20


class JsonModelMaterializer(BaseMaterializer):
    """Shared save/load/hash for pydantic models; subclasses add visualizations and metadata."""

    SKIP_REGISTRATION: ClassVar[bool] = True
    ASSOCIATED_ARTIFACT_TYPE: ClassVar[ArtifactType] = ArtifactType.DATA

    def load(self, data_type: type[Any]) -> BaseModel:
        with self.artifact_store.open(os.path.join(self.uri, DATA_FILE), "r") as file:
            return data_type.model_validate_json(file.read())

    def save(self, data: BaseModel) -> None:
        with self.artifact_store.open(os.path.join(self.uri, DATA_FILE), "w") as file:
            file.write(data.model_dump_json())

    def compute_content_hash(self, data: BaseModel) -> str:
        return sha256_hex([type(self).__name__, "\0", canonical_json(data.model_dump(mode="json"))])


class SummaryPage(BaseModel):
    """What a summary page shows: a title, a table (one dict per row), notes and warnings."""

    title: str
    rows: list[dict[str, Any]]
    notes: list[str] = []
    warnings: list[str] = []


class _SummaryPageMaterializer(JsonModelMaterializer):
    """A JSON model with one HTML summary page in the dashboard."""

    SKIP_REGISTRATION: ClassVar[bool] = True

    def summary(self, data: Any) -> SummaryPage:
        raise NotImplementedError

    def save_visualizations(self, data: Any) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        page = self.summary(data)
        path = os.path.join(self.uri, "summary.html")
        with self.artifact_store.open(path, "w") as file:
            file.write(html_page(page.title, [rows_to_html_table(page.rows)], page.notes, page.warnings))
        return {path: VisualizationType.HTML}


class CorpusMaterializer(_SummaryPageMaterializer):
    """A corpus's content hash is the hash of its documents (source names and texts) only: where the
    knowledge base was read from (`description`) and which files were skipped are shown, never keyed on,
    so a moved folder recomputes no chunk set."""

    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (Corpus,)

    def compute_content_hash(self, data: Corpus) -> str:
        return sha256_hex([type(self).__name__, "\0", documents_digest(data.documents)])

    def summary(self, data: Corpus) -> SummaryPage:
        rows = [
            {"source": document.source, "characters": len(document.text), "start": document.text[:160]}
            for document in data.documents[:PREVIEW_ROWS]
        ]
        notes = [
            f"{data.description}: {len(data.documents)} documents, {data.total_characters} characters, "
            f"fingerprint {data.fingerprint}. First {len(rows)} documents shown."
        ]
        warnings = [f"skipped {reason}" for reason in data.skipped]
        return SummaryPage(title="Knowledge base", rows=rows, notes=notes, warnings=warnings)

    def extract_metadata(self, data: Corpus) -> dict[str, Any]:
        return {
            "documents": len(data.documents),
            "characters": data.total_characters,
            "skipped_files": len(data.skipped),
            "fingerprint": data.fingerprint,
            "description": data.description,
        }


class ChunkSetMaterializer(_SummaryPageMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (ChunkSet,)

    def summary(self, data: ChunkSet) -> SummaryPage:
        per_source = Counter(chunk.source for chunk in data.chunks)
        rows = [
            {"source": chunk.source, "start_index": chunk.start_index, "text": chunk.text}
            for chunk in data.chunks[:PREVIEW_ROWS]
        ]
        notes = [
            f"{len(data.chunks)} chunks of at most {data.chunk_size} tokens ({data.tokenizer} tokenizer, "
            f"special tokens included), overlap {data.chunk_overlap}, from {len(per_source)} sources; "
            f"{data.duplicates_removed} exact duplicates removed. First {len(rows)} chunks shown."
        ]
        return SummaryPage(title=f"Chunk set (size {data.chunk_size})", rows=rows, notes=notes)

    def extract_metadata(self, data: ChunkSet) -> dict[str, Any]:
        return {
            "chunk_size": data.chunk_size,
            "chunk_overlap": data.chunk_overlap,
            "chunks": len(data.chunks),
            "duplicates_removed": data.duplicates_removed,
            "tokenizer": data.tokenizer,
            "fingerprint": data.fingerprint,
        }
