"""The eval set artifact: its data as JSON, the kept and rejected cases as an HTML visualization."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.testset.assemble import EvalSet


class EvalSetMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (EvalSet,)

    def save_visualizations(self, data: EvalSet) -> dict[str, VisualizationType]:
        page = os.path.join(self.uri, "eval_set.html")
        with self.artifact_store.open(page, "w") as file:
            file.write(data.html())
        return {page: VisualizationType.HTML}

    def extract_metadata(self, data: EvalSet) -> dict[str, Any]:
        return {"cases": len(data.cases), "rejected": len(data.rejected)}
