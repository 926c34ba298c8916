"""The gate's verdict artifact: its data as JSON; the verdict page, its Markdown summary and its JUnit XML
beside it in the artifact store (the first two the dashboard's visualizations)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.runs.gate import GateResult


class GateResultMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (GateResult,)

    def save_visualizations(self, data: GateResult) -> dict[str, VisualizationType]:
        """The verdict page and its Markdown summary as the dashboard's visualizations, and its JUnit XML
        beside them (`GateResult.files`, the files `run.py` copies to the run's folder)."""
        shown = {"gate.html": VisualizationType.HTML, "gate.md": VisualizationType.MARKDOWN}
        visualizations = {}
        for name, content in data.files().items():
            path = os.path.join(self.uri, name)
            with self.artifact_store.open(path, "w") as file:
                file.write(content)
            if name in shown:
                visualizations[path] = shown[name]
        return visualizations

    def extract_metadata(self, data: GateResult) -> dict[str, Any]:
        return data.metadata()
