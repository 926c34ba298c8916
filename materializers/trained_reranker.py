"""A trained reranker: its record as JSON and its checkpoint's files, in the artifact store.

Loading copies the files once into the model cache where the step runs (`<cache root>/trained/<artifact
folder hash>/`, written under a temporary name and renamed, so a half-copied folder is never used) and
returns the record with `location` set to that folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from zenml.enums import ArtifactType, VisualizationType
from zenml.materializers.base_materializer import BaseMaterializer

from ragbench.hashing import short_hash
from ragbench.models.provision import cache_root
from ragbench.models.trained import TrainedReranker

RECORD_FILE = "trained_reranker.json"
# The training step writes into a temporary folder of this prefix; saving moves it into the store.
HANDOVER_PREFIX = "ragbench-reranker-"
CHECKPOINT_FOLDER = "checkpoint"


class TrainedRerankerMaterializer(BaseMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (TrainedReranker,)
    ASSOCIATED_ARTIFACT_TYPE: ClassVar[ArtifactType] = ArtifactType.MODEL

    def save(self, data: TrainedReranker) -> None:
        source = Path(data.location)
        self.artifact_store.makedirs(os.path.join(self.uri, CHECKPOINT_FOLDER))
        for path in sorted(source.iterdir()):
            with (
                path.open("rb") as src,
                self.artifact_store.open(os.path.join(self.uri, CHECKPOINT_FOLDER, path.name), "wb") as dst,
            ):
                shutil.copyfileobj(src, dst)
        with self.artifact_store.open(os.path.join(self.uri, RECORD_FILE), "w") as file:
            file.write(data.model_copy(update={"location": ""}).model_dump_json(indent=2))
        if source.parent.name.startswith(HANDOVER_PREFIX):
            shutil.rmtree(source.parent, ignore_errors=True)

    def load(self, data_type: type[Any]) -> TrainedReranker:
        with self.artifact_store.open(os.path.join(self.uri, RECORD_FILE), "r") as file:
            record = TrainedReranker.model_validate_json(file.read())
        folder = cache_root() / "trained" / short_hash(self.uri)
        if not (folder / "model.safetensors").is_file():
            folder.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
            remote = os.path.join(self.uri, CHECKPOINT_FOLDER)
            for name in self.artifact_store.listdir(remote):
                source = os.path.join(remote, str(name))
                with self.artifact_store.open(source, "rb") as src, (staging / str(name)).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            try:
                staging.rename(folder)
            except OSError:  # another process finished the same copy first
                shutil.rmtree(staging, ignore_errors=True)
        return record.model_copy(update={"location": str(folder)})

    def save_visualizations(self, data: TrainedReranker) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        rows = [{"field": key, "value": value} for key, value in data.summary().items()]
        curve = [{"step": step, "validation MRR": mrr} for step, mrr in data.log.get("validation_curve", [])]
        held_out = [{"eval case held out of training": case} for case in data.held_out_cases]
        page = html_page(
            f"Trained reranker {data.name}: {data.label}",
            [rows_to_html_table(rows), rows_to_html_table(curve), rows_to_html_table(held_out)],
        )
        path = os.path.join(self.uri, "summary.html")
        with self.artifact_store.open(path, "w") as file:
            file.write(page)
        return {path: VisualizationType.HTML}

    def extract_metadata(self, data: TrainedReranker) -> dict[str, Any]:
        return data.summary()
