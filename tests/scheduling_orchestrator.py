"""A stand-in orchestrator that schedules, for tests only: the real ones (Kubernetes, Airflow...) need a
cluster. A scheduled snapshot is recorded (one JSON line in `record_file`) instead of run; without a
schedule it runs like the local orchestrator; deleting a schedule is recorded too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from zenml.orchestrators import SubmissionResult
from zenml.orchestrators.local.local_orchestrator import (
    LocalOrchestrator,
    LocalOrchestratorConfig,
)

from tests.stacks import FlavorForTests

if TYPE_CHECKING:
    from zenml.models import PipelineRunResponse, PipelineSnapshotResponse, ScheduleResponse
    from zenml.stack import Stack

FLAVOR = "ragbench_test_scheduling"


class SchedulingOrchestratorConfig(LocalOrchestratorConfig):
    """Local and synchronous like the local orchestrator, but ZenML lets it take a `Schedule`."""

    record_file: str

    @property
    def is_schedulable(self) -> bool:
        return True


class SchedulingOrchestrator(LocalOrchestrator):
    @property
    def config(self) -> SchedulingOrchestratorConfig:
        return self._config  # type: ignore[return-value]

    def _record(self, **event: object) -> None:
        with Path(self.config.record_file).open("a", encoding="utf-8") as records:
            records.write(json.dumps(event) + "\n")

    def submit_pipeline(
        self,
        snapshot: PipelineSnapshotResponse,
        stack: Stack,
        base_environment: dict[str, str],
        step_environments: dict[str, dict[str, str]],
        placeholder_run: PipelineRunResponse | None = None,
    ) -> SubmissionResult | None:
        """A scheduled snapshot is recorded, as a real orchestrator would create its cron job, not run."""
        if snapshot.schedule:
            self._record(
                event="schedule",
                name=snapshot.schedule.name,
                cron=snapshot.schedule.cron_expression,
                pipeline=snapshot.pipeline_configuration.name,
                tags=[
                    t if isinstance(t, str) else t.name for t in snapshot.pipeline_configuration.tags or []
                ],
            )
            return None
        return super().submit_pipeline(
            snapshot, stack, base_environment, step_environments, placeholder_run=placeholder_run
        )

    def delete_schedule(self, schedule: ScheduleResponse) -> None:
        """Defining it is what makes ZenML's `supports_schedule_deletion` true."""
        self._record(event="delete", name=schedule.name, cron=schedule.cron_expression)


class SchedulingOrchestratorFlavor(FlavorForTests):
    NAME = FLAVOR
    CONFIG = SchedulingOrchestratorConfig
    IMPLEMENTATION = SchedulingOrchestrator
