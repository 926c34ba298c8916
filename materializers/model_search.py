"""The model-based search's record: its data as JSON, the report's "Search: model-based" section as the
dashboard's visualization, and the trial counts and winner as metadata."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.analysis.trials import ModelSearchTrace


class ModelSearchTraceMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (ModelSearchTrace,)

    def save_visualizations(self, data: ModelSearchTrace) -> dict[str, VisualizationType]:
        from ragbench.report.model_search import trials_html  # presentation: no step depends on it
        from ragbench.report.pages import html_page

        page = os.path.join(self.uri, "trials.html")
        with self.artifact_store.open(page, "w") as file:
            file.write(html_page("Search: model-based", [trials_html(data, {})], [], []))
        return {page: VisualizationType.HTML}

    def extract_metadata(self, data: ModelSearchTrace) -> dict[str, Any]:
        return {
            "trials": len(data.trials),
            "pruned": sum(trial.pruned for trial in data.trials),
            "winner": data.winner or "",
            "calls_used": data.calls_used,
            "calls_full": data.calls_full,
        }
