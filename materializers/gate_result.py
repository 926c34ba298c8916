"""The gate's verdict artifact: its data as JSON, the verdict page as the dashboard's visualization."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.runs.gate import GateResult


class GateResultMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (GateResult,)

    def save_visualizations(self, data: GateResult) -> dict[str, VisualizationType]:
        page = os.path.join(self.uri, "gate.html")
        with self.artifact_store.open(page, "w") as file:
            file.write(data.html())
        return {page: VisualizationType.HTML}

    def extract_metadata(self, data: GateResult) -> dict[str, Any]:
        return data.metadata()
