"""`orchestration` in the config: where the steps run and what they get there (image, orchestrator
settings, secrets, environment), with credentials refused."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    model_validator,
)

from ragbench.llm.redaction import is_secret_name
from ragbench.models.provision import MODEL_CACHE_ENV_VAR
from ragbench.section import Section


class OrchestrationConfig(Section):
    """Where the steps run and what they get there: on the local orchestrator every field may stay empty;
    on a team's stack (Kubernetes, Vertex, local_docker...) these reach every step. See
    docs/how-to/team-stack.md."""

    docker: dict[str, Any] = Field(
        default_factory=dict,
        description="ZenML DockerSettings fields for the pipeline's image, e.g. {parent_image: "
        "ragbench:local, skip_build: true}; docker/README.md builds that image",
    )
    orchestrator: dict[str, Any] = Field(
        default_factory=dict,
        description="settings of the active orchestrator, passed to ZenML as settings['orchestrator'] "
        "(e.g. local_docker {run_args: {volumes: ...}}, kubernetes {pod_settings: ...})",
    )
    secrets: list[str] = Field(
        default_factory=list,
        description="ZenML secrets whose keys become environment variables in every step (API keys, "
        "PGPASSWORD); preflight checks that they exist and hold the keys the models need",
    )
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="plain environment variables for every step; names that look like credentials are "
        "refused (use secrets)",
    )
    model_cache: str | None = Field(
        default=None,
        description="folder inside the steps where models are provisioned and verified (a mounted volume on "
        "a cluster); default: $RAGBENCH_CACHE_DIR/models where the step runs",
    )

    @model_validator(mode="after")
    def _check_environment(self) -> OrchestrationConfig:
        """Environment variables given here are stored with the run's configuration (and baked into an
        image for docker's): a key or password belongs in a ZenML secret named in `secrets` instead."""
        for where, variables in (
            ("orchestration.environment", self.environment),
            ("orchestration.docker.environment", self.docker.get("environment") or {}),
            ("orchestration.docker.runtime_environment", self.docker.get("runtime_environment") or {}),
        ):
            leaking = sorted(name for name in variables if is_secret_name(name))
            if leaking:
                raise ValueError(
                    f"{where}: {', '.join(leaking)} look like credentials; put them in a ZenML secret "
                    "and name it in orchestration.secrets"
                )
        return self

    def added_environment(self) -> dict[str, str]:
        """The variables this section adds to every step's environment, secrets aside."""
        cache = {MODEL_CACHE_ENV_VAR: self.model_cache} if self.model_cache else {}
        return {**self.environment, **cache}
