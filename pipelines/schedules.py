"""Schedules that ZenML itself registers, on an orchestrator that schedules (Kubernetes, Airflow, Vertex...).

Whether the active orchestrator can schedule is ZenML's own answer (`orchestrator.config.is_schedulable`),
not a list of flavor names. A config has at most one schedule, named after it (`ragbench-<config name>`),
so installing again replaces it and `--list` / `--remove` find it again. The crontab side (orchestrators
that cannot schedule) is `ragbench.runs.schedule`.

A ZenML schedule freezes the config at install time: the scheduled runs use the config as it was then
(a later edit of the file needs installing again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragbench.runs.names import BENCHMARK_PIPELINE

if TYPE_CHECKING:
    from zenml.models import ScheduleResponse

    from pipelines.inputs import InputSnapshots
    from ragbench.config.model import BenchmarkConfig

PREFIX = "ragbench-"
# ZenML archives a deleted schedule by appending "_<uuid4>" (37 characters) to its name, and a name over
# 255 characters then fails to load; a short cap keeps room for that.
_MAX_NAME = 120


class ZenMLScheduleError(RuntimeError):
    """A ZenML schedule that cannot be installed or replaced safely; the message says what to do."""


@dataclass(frozen=True)
class ScheduleInfo:
    """One ragbench schedule in ZenML, as `--list` shows it."""

    name: str
    cron: str | None
    orchestrator: str  # "<component name> (<flavor>)", or why it is unknown
    active: bool

    def line(self) -> str:
        state = "active" if self.active else "paused"
        return f"zenml: {self.name}  cron {self.cron or '-'}  on {self.orchestrator}  {state}"


@dataclass(frozen=True)
class Removal:
    """What removing a schedule did: ZenML always forgets it; only some orchestrators delete the job."""

    name: str
    orchestrator: str
    deleted_in_orchestrator: bool

    def text(self) -> str:
        if self.deleted_in_orchestrator:
            return f"removed the ZenML schedule {self.name!r} (deleted on {self.orchestrator})"
        return (
            f"removed the ZenML schedule {self.name!r} from ZenML, but {self.orchestrator} cannot delete "
            "schedules through ZenML: the job is still scheduled there, delete it in that orchestrator"
        )


def schedule_name(config_name: str) -> str:
    """The ZenML schedule name of a config: characters safe in a ZenML filter and an orchestrator's
    resource name (no ':' nor spaces), one name per config so a second install finds the first."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in config_name)
    return (PREFIX + safe)[:_MAX_NAME]


def orchestrator_schedules() -> bool:
    """Whether the active stack's orchestrator accepts `Schedule(cron_expression=...)`, as ZenML decides
    it when a pipeline is run with a schedule (it refuses otherwise)."""
    from zenml.client import Client

    return bool(Client().active_stack.orchestrator.config.is_schedulable)


def active_orchestrator() -> str:
    """The active stack's orchestrator for people: "<component name> (<flavor>)"."""
    from zenml.client import Client

    orchestrator = Client().active_stack.orchestrator
    return f"{orchestrator.name} ({orchestrator.flavor})"


def _orchestrator_label(orchestrator_id: object) -> tuple[str, bool]:
    """A schedule's orchestrator for people ("<name> (<flavor>)") and whether it can delete schedules."""
    from zenml.client import Client
    from zenml.enums import StackComponentType
    from zenml.orchestrators import BaseOrchestrator

    if orchestrator_id is None:
        return "an orchestrator no longer registered", False
    try:
        model = Client().get_stack_component(StackComponentType.ORCHESTRATOR, orchestrator_id)
    except KeyError:
        return "an orchestrator no longer registered", False
    label = f"{model.name} ({model.flavor_name})"
    try:
        orchestrator = BaseOrchestrator.from_model(model)
    except Exception as error:  # e.g. its integration is not installed on this machine
        return f"{label} [cannot be loaded here: {error}]", False
    return label, bool(orchestrator.supports_schedule_deletion)


def _info(schedule: ScheduleResponse) -> ScheduleInfo:
    label, _ = _orchestrator_label(schedule.orchestrator_id)
    return ScheduleInfo(schedule.name, schedule.cron_expression, label, schedule.active)


def _benchmark_schedules(name: str | None = None) -> list[ScheduleResponse]:
    """Unarchived schedules of the benchmark pipeline named with ragbench's prefix (or exactly `name`)."""
    from zenml.client import Client
    from zenml.utils.pagination_utils import depaginate

    client = Client()
    try:
        pipeline_id = client.get_pipeline(BENCHMARK_PIPELINE).id
    except KeyError:  # never registered: nothing was scheduled either
        return []
    return depaginate(
        client.list_schedules,
        name=name if name is not None else f"startswith:{PREFIX}",
        pipeline_id=pipeline_id,
        hydrate=True,
    )


def list_schedules() -> list[ScheduleInfo]:
    """ragbench's ZenML schedules, on whatever orchestrator they were registered (not only the active one)."""
    return [_info(schedule) for schedule in _benchmark_schedules()]


def find_schedule(config_name: str) -> ScheduleInfo | None:
    found = _benchmark_schedules(schedule_name(config_name))
    return _info(found[0]) if found else None


def remove_schedule(config_name: str) -> Removal | None:
    """Delete the config's ZenML schedule; None when it has none. ZenML asks the schedule's orchestrator
    to delete the job only when that orchestrator implements it (0.98: Kubernetes); otherwise it only
    archives its own record and the orchestrator keeps running the job, which `Removal.text` says."""
    from zenml.client import Client

    found = _benchmark_schedules(schedule_name(config_name))
    if not found:
        return None
    schedule = found[0]
    label, deletes = _orchestrator_label(schedule.orchestrator_id)
    try:
        Client().delete_schedule(schedule.id)
    except Exception as error:  # the orchestrator failed to delete its job: ZenML kept its record
        raise ZenMLScheduleError(
            f"could not delete the schedule {schedule.name!r} on {label}: {error}"
        ) from error
    return Removal(schedule.name, label, deletes)


def schedule_to_replace(config_name: str) -> ScheduleInfo | None:
    """The config's schedule that installing would replace (None: it has none). A schedule whose
    orchestrator cannot delete it is refused, not replaced: ZenML would forget it while its job kept
    running, and the config would then run twice."""
    previous = _benchmark_schedules(schedule_name(config_name))
    if not previous:
        return None
    found = previous[0]
    label, deletes = _orchestrator_label(found.orchestrator_id)
    if not deletes:
        raise ZenMLScheduleError(
            f"{config_name!r} already has the ZenML schedule {found.name!r} on {label}, which ZenML "
            "cannot delete: delete it in that orchestrator, then `run.py schedule --remove` and install again"
        )
    return ScheduleInfo(found.name, found.cron_expression, label, found.active)


def install_schedule(
    config: BenchmarkConfig, cron: str, snapshots: InputSnapshots | None = None
) -> tuple[ScheduleInfo, Removal | None]:
    """Register the benchmark of `config` on the active orchestrator, replacing the config's schedule.

    The pipeline is compiled and handed to the orchestrator, which schedules it instead of running it;
    a schedule it cannot replace is refused (`schedule_to_replace`). `snapshots`: the client's inputs as
    the install's plan stored them (`pipelines.inputs.plan_snapshots`; read and stored while the pipeline
    compiles when not given): every scheduled run reads those versions."""
    from zenml.config.schedule import Schedule

    from pipelines import rag_benchmark
    from pipelines.options import run_options
    from ragbench.runs.compare import config_tag

    name = schedule_name(config.name)
    removal = remove_schedule(config.name) if schedule_to_replace(config.name) is not None else None
    rag_benchmark.with_options(
        schedule=Schedule(name=name, cron_expression=cron),
        tags=[config_tag(config.name), *config.tags],
        **run_options(config),
    )(
        config=config.model_dump(mode="json"),
        snapshots=snapshots.model_dump(mode="json") if snapshots is not None else None,
    )
    installed = find_schedule(config.name)
    if installed is None:  # the orchestrator's submission failed and ZenML deleted the record again
        raise ZenMLScheduleError(f"the orchestrator did not keep the schedule {name!r}")
    return installed, removal
