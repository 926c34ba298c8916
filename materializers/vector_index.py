"""A FAISS index stored as the native index file and a manifest; its chunk set is an artifact of its own
(stored once, whatever the number of embeddings and index types), matched by fingerprint."""

from __future__ import annotations

import os
import tempfile
from typing import Any, ClassVar

from zenml.enums import ArtifactType, VisualizationType
from zenml.io import fileio
from zenml.materializers.base_materializer import BaseMaterializer

from ragbench.retrieval.ann import FLAT_INDEX, IndexSpec, configure_search
from ragbench.retrieval.index import IndexManifest, VectorIndex

INDEX_FILE = "index.faiss"
MANIFEST_FILE = "manifest.json"


class VectorIndexMaterializer(BaseMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (VectorIndex,)
    ASSOCIATED_ARTIFACT_TYPE: ClassVar[ArtifactType] = ArtifactType.MODEL

    def load(self, data_type: type[Any]) -> VectorIndex:
        import faiss

        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "r") as file:
            manifest = IndexManifest.model_validate_json(file.read())
        with tempfile.TemporaryDirectory() as folder:
            local_path = os.path.join(folder, INDEX_FILE)
            fileio.copy(os.path.join(self.uri, INDEX_FILE), local_path)
            faiss_index = faiss.read_index(local_path)
        if manifest.index_type != FLAT_INDEX:
            configure_search(faiss_index, IndexSpec.parse(manifest.index_type))
        return VectorIndex(manifest=manifest, faiss_index=faiss_index)

    def save(self, data: VectorIndex) -> None:
        import faiss

        with tempfile.TemporaryDirectory() as folder:
            local_path = os.path.join(folder, INDEX_FILE)
            faiss.write_index(data.faiss_index, local_path)
            fileio.copy(local_path, os.path.join(self.uri, INDEX_FILE), overwrite=True)
        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "w") as file:
            file.write(data.manifest.model_dump_json(indent=2))

    def save_visualizations(self, data: VectorIndex) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        manifest_rows = [{"field": key, "value": value} for key, value in data.manifest.model_dump().items()]
        warnings = []
        if data.manifest.chunks_over_max_length:
            warnings.append(
                f"{data.manifest.chunks_over_max_length} chunks exceed the model's maximum sequence length "
                f"({data.manifest.max_seq_length} tokens) and were truncated when embedded."
            )
        page = html_page(
            f"FAISS index ({data.manifest.index_type}): {data.manifest.embedding_model}, "
            f"chunk size {data.manifest.chunk_size}",
            [rows_to_html_table(manifest_rows)],
            warnings=warnings,
        )
        path = os.path.join(self.uri, "summary.html")
        with self.artifact_store.open(path, "w") as file:
            file.write(page)
        return {path: VisualizationType.HTML}

    def extract_metadata(self, data: VectorIndex) -> dict[str, Any]:
        return data.manifest.model_dump()
