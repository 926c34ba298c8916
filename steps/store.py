"""The ZenML store behind `ragbench.store.ArtifactStore`: the one place that asks ZenML's client for runs and
artifact versions on the core's behalf, and where `steps.history` and the pipelines' input snapshots ask
too. It lives beside the steps, outside the framework-free core, because the steps package is imported by
every process that runs a step or builds a pipeline: that import gives the core this store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from zenml.client import Client


class ZenMLStore:
    """`ragbench.store.ArtifactStore` over the active ZenML client (its configured server or local store)."""

    def artifact(self, name: str, version: str | None = None) -> Any:
        # A list, not `get_artifact_version`: in a pipeline definition that one returns a lazy placeholder.
        found = Client().list_artifact_versions(
            artifact=name,
            sort_by="desc:created",
            size=1,
            hydrate=True,
            **({"version": version} if version is not None else {}),
        )
        if not found.items:
            raise KeyError(name if version is None else f"{name}:{version}")
        return found.items[0]

    def artifact_by_id(self, artifact_id: str) -> Any:
        return Client().get_artifact_version(artifact_id)

    def keep(
        self, name: str, value: Any, digest_key: str, digest: str, metadata: Mapping[str, Any] | None = None
    ) -> Any:
        from zenml import save_artifact

        try:
            newest = self.artifact(name)
        except KeyError:
            newest = None
        if newest is not None and newest.run_metadata.get(digest_key) == digest:
            return newest
        return save_artifact(value, name=name, user_metadata={digest_key: digest, **(metadata or {})})

    def runs(self, pipeline: str | None, tags: Sequence[str] = (), size: int = 50) -> list[Any]:
        client = Client()
        where: dict[str, Any] = {"tags": list(tags)} if tags else {}
        if pipeline is not None:
            try:
                where["pipeline_id"] = client.get_pipeline(pipeline).id
            except KeyError:
                return []
        return client.list_pipeline_runs(sort_by="desc:created", size=size, **where).items

    def run(self, name_or_id: str | UUID) -> Any:
        return Client().get_pipeline_run(name_or_id)


def this_run() -> Any:
    """The run of the step calling it, as the store holds it now (its steps' statuses, its metadata)."""
    from zenml import get_step_context

    return ZenMLStore().run(get_step_context().pipeline_run.id)
