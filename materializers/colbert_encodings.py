"""ColBERT chunk encodings stored as .npy arrays (vectors, offsets, encoded lengths) and a JSON manifest."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel
from zenml.enums import ArtifactType, VisualizationType
from zenml.materializers.base_materializer import BaseMaterializer

from ragbench.retrieval.colbert_maxsim import ColbertEncodings
from ragbench.retrieval.rerank import RerankerChoice

MANIFEST_FILE = "manifest.json"
ARRAYS = ("vectors", "offsets", "encoded_lengths")


class _Manifest(BaseModel):
    """The non-array fields of `ColbertEncodings`."""

    choice: RerankerChoice
    chunk_set_fingerprint: str
    doc_maxlen: int


class ColbertEncodingsMaterializer(BaseMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (ColbertEncodings,)
    ASSOCIATED_ARTIFACT_TYPE: ClassVar[ArtifactType] = ArtifactType.DATA

    def load(self, data_type: type[Any]) -> ColbertEncodings:
        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "r") as file:
            manifest = _Manifest.model_validate_json(file.read())
        arrays = {}
        for name in ARRAYS:
            with self.artifact_store.open(os.path.join(self.uri, f"{name}.npy"), "rb") as file:
                arrays[name] = np.load(file, allow_pickle=False)
        return ColbertEncodings(**dict(manifest), **arrays)

    def save(self, data: ColbertEncodings) -> None:
        for name in ARRAYS:
            with self.artifact_store.open(os.path.join(self.uri, f"{name}.npy"), "wb") as file:
                np.save(file, getattr(data, name), allow_pickle=False)
        manifest = _Manifest(
            choice=data.choice, chunk_set_fingerprint=data.chunk_set_fingerprint, doc_maxlen=data.doc_maxlen
        )
        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "w") as file:
            file.write(manifest.model_dump_json(indent=2))

    def save_visualizations(self, data: ColbertEncodings) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        rows = [{"field": key, "value": value} for key, value in data.summary().items()]
        warnings = [f"{data.choice.label}: {data.choice.reason}"] if data.choice.is_standin else []
        page = html_page(
            f"ColBERT chunk encodings: {data.choice.label}", [rows_to_html_table(rows)], warnings=warnings
        )
        path = os.path.join(self.uri, "summary.html")
        with self.artifact_store.open(path, "w") as file:
            file.write(page)
        return {path: VisualizationType.HTML}

    def extract_metadata(self, data: ColbertEncodings) -> dict[str, Any]:
        return data.summary()
