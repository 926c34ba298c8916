"""A BM25 index stored as bm25s's own files (sparse term weights, vocabulary, parameters) plus a manifest.

bm25s saves to and loads from a local folder, so its files pass through a temporary one on the way to and
from the artifact store, which may be remote.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, ClassVar

from zenml.enums import ArtifactType, VisualizationType
from zenml.io import fileio
from zenml.materializers.base_materializer import BaseMaterializer

from ragbench.retrieval.lexical import LexicalIndex, LexicalIndexManifest

BM25_FOLDER = "bm25s"
MANIFEST_FILE = "manifest.json"


class LexicalIndexMaterializer(BaseMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (LexicalIndex,)
    ASSOCIATED_ARTIFACT_TYPE: ClassVar[ArtifactType] = ArtifactType.MODEL

    def load(self, data_type: type[Any]) -> LexicalIndex:
        import bm25s

        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "r") as file:
            manifest = LexicalIndexManifest.model_validate_json(file.read())
        stored = os.path.join(self.uri, BM25_FOLDER)
        with tempfile.TemporaryDirectory() as folder:
            for name in fileio.listdir(stored):
                fileio.copy(os.path.join(stored, name), os.path.join(folder, name))
            retriever = bm25s.BM25.load(folder, show_progress=False)
        return LexicalIndex(manifest=manifest, retriever=retriever)

    def save(self, data: LexicalIndex) -> None:
        stored = os.path.join(self.uri, BM25_FOLDER)
        fileio.makedirs(stored)
        with tempfile.TemporaryDirectory() as folder:
            data.retriever.save(folder, show_progress=False)
            for name in sorted(os.listdir(folder)):
                fileio.copy(os.path.join(folder, name), os.path.join(stored, name), overwrite=True)
        with self.artifact_store.open(os.path.join(self.uri, MANIFEST_FILE), "w") as file:
            file.write(data.manifest.model_dump_json(indent=2))

    def save_visualizations(self, data: LexicalIndex) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        manifest_rows = [{"field": key, "value": value} for key, value in data.manifest.model_dump().items()]
        page = html_page(
            f"BM25 index: chunk size {data.manifest.chunk_size}, {data.manifest.chunk_count} chunks",
            [rows_to_html_table(manifest_rows)],
            notes=["Questions are tokenized exactly like the chunks; only chunks sharing a term are hits."],
        )
        path = os.path.join(self.uri, "summary.html")
        with self.artifact_store.open(path, "w") as file:
            file.write(page)
        return {path: VisualizationType.HTML}

    def extract_metadata(self, data: LexicalIndex) -> dict[str, Any]:
        return data.manifest.model_dump()
