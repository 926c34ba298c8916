"""A search's decisions and confirmation: their data as JSON, a page of what each decided as the dashboard's
visualization, and the numbers a run is filtered by as metadata (kept and dropped keys; the winner, its
confirmed mean and the flattery)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from zenml.enums import VisualizationType

from materializers.json_models import JsonModelMaterializer
from ragbench.analysis.holdout import Confirmation
from ragbench.analysis.staged import StageDecision


class StageDecisionMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (StageDecision,)

    def save_visualizations(self, data: StageDecision) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        dropped = {d.key: d for d in data.dropped}
        rows = [
            {
                "key": key,
                f"mean {data.metric}": mean,
                "outcome": "dropped" if key in dropped else "cut" if key in data.cut else "kept",
                "difference from best": dropped[key].difference if key in dropped else None,
                "p": dropped[key].p_value if key in dropped else None,
                "level": dropped[key].threshold if key in dropped else None,
            }
            for key, mean in data.means.items()
        ]
        page = os.path.join(self.uri, "decision.html")
        with self.artifact_store.open(page, "w") as file:
            file.write(html_page(f"The {data.stage} stage", [rows_to_html_table(rows)], [data.summary()]))
        return {page: VisualizationType.HTML}

    def extract_metadata(self, data: StageDecision) -> dict[str, Any]:
        return {
            "stage": data.stage,
            "best": data.best,
            "kept": len(data.kept),
            "dropped": len(data.dropped),
            "cut": len(data.cut),
        }


class ConfirmationMaterializer(JsonModelMaterializer):
    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (Confirmation,)

    def save_visualizations(self, data: Confirmation) -> dict[str, VisualizationType]:
        from ragbench.report.pages import html_page, rows_to_html_table  # presentation: no step depends on it

        rows = [
            {
                "finalist": cell,
                "search estimate": data.search_estimate[cell],
                "confirmed": confirmed.mean,
                "low": confirmed.low,
                "high": confirmed.high,
                "held-out cases": confirmed.n,
            }
            for cell, confirmed in data.confirmed.items()
        ]
        page = os.path.join(self.uri, "confirmation.html")
        with self.artifact_store.open(page, "w") as file:
            file.write(
                html_page("Confirmation on held-out cases", [rows_to_html_table(rows)], [data.summary()])
            )
        return {page: VisualizationType.HTML}

    def extract_metadata(self, data: Confirmation) -> dict[str, Any]:
        winner = data.confirmed[data.winner]
        return {"winner": data.winner, "confirmed_mean": winner.mean, "flattery": data.flattery}
