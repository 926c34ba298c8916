"""A ZenML stack around a test orchestrator flavor, for one test: registered, used, removed again (the
test session shares one ZenML store, so nothing may outlive the test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from zenml.orchestrators import BaseOrchestratorConfig
from zenml.orchestrators.local.local_orchestrator import LocalOrchestrator, LocalOrchestratorFlavor


class FlavorForTests(LocalOrchestratorFlavor):
    """A test flavor is its three class attributes (ZenML finds a flavor by its class's import path)."""

    NAME: str
    CONFIG: type[BaseOrchestratorConfig]
    IMPLEMENTATION: type[LocalOrchestrator]

    @property
    def name(self) -> str:
        return self.NAME

    @property
    def config_class(self) -> type[BaseOrchestratorConfig]:
        return self.CONFIG

    @property
    def implementation_class(self) -> type[LocalOrchestrator]:
        return self.IMPLEMENTATION


@contextmanager
def orchestrator_stack(flavor: str, flavor_class: str, configuration: dict[str, Any]) -> Iterator[Any]:
    """Yields the stack (default artifact store + an orchestrator of `flavor`, defined by the class at
    import path `flavor_class`); activating it is the test's call. Schedules left on its orchestrator, the
    stack, the component and the flavor (if this made it) are deleted, and the stack active before is
    active again."""
    from zenml.client import Client
    from zenml.enums import StackComponentType

    from cli.launch import open_store

    open_store()
    client = Client()
    previous = client.active_stack_model.id
    created_flavor = False
    try:
        client.get_flavor_by_name_and_type(flavor, StackComponentType.ORCHESTRATOR)
    except KeyError:
        client.create_flavor(source=flavor_class, component_type=StackComponentType.ORCHESTRATOR)
        created_flavor = True
    name = f"{flavor}-{uuid.uuid4().hex[:8]}"
    component = client.create_stack_component(
        name=name, flavor=flavor, component_type=StackComponentType.ORCHESTRATOR, configuration=configuration
    )
    stack = client.create_stack(
        name=name,
        components={StackComponentType.ORCHESTRATOR: name, StackComponentType.ARTIFACT_STORE: "default"},
    )
    try:
        yield stack
    finally:
        for leftover in client.list_schedules(orchestrator_id=component.id, is_archived=None, size=1000):
            client.zen_store.delete_schedule(leftover.id, soft=False)
        client.activate_stack(previous)
        client.delete_stack(stack.id)
        client.delete_stack_component(component.id, StackComponentType.ORCHESTRATOR)
        if created_flavor:
            client.delete_flavor(flavor)
