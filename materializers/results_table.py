"""The results table artifact: its data as JSON, and the CSV and the HTML report as visualizations."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.analysis.results import ResultsTable


class ResultsTableMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (ResultsTable,)

    def save_visualizations(self, data: ResultsTable) -> dict[str, VisualizationType]:
        report, table = os.path.join(self.uri, "report.html"), os.path.join(self.uri, "results.csv")
        with self.artifact_store.open(report, "w") as file:
            file.write(data.report_html)
        with self.artifact_store.open(table, "w") as file:
            file.write(data.csv())
        return {report: VisualizationType.HTML, table: VisualizationType.CSV}

    def extract_metadata(self, data: ResultsTable) -> dict[str, Any]:
        return {"cells": len(data.rows), "warnings": len(data.warnings)}
