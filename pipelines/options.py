"""The one place a config's `orchestration` section becomes ZenML run options, so a run by hand, a testset
run and a schedule all reach the steps the same way (image, orchestrator settings, secrets, environment)."""

from typing import Any

from ragbench.config.model import BenchmarkConfig, ConfigError


def docker_settings(config: BenchmarkConfig) -> Any:
    """`orchestration.docker` as ZenML DockerSettings; a wrong field fails here, before any work."""
    from pydantic import ValidationError
    from zenml.config import DockerSettings

    unknown = sorted(set(config.orchestration.docker) - set(DockerSettings.model_fields))
    if unknown:  # DockerSettings itself accepts (and ignores) any key: a typo would silently do nothing
        raise ConfigError(
            f"orchestration.docker: unknown field(s) {', '.join(unknown)}; DockerSettings has "
            f"{', '.join(sorted(DockerSettings.model_fields))}"
        )
    try:
        return DockerSettings.model_validate(config.orchestration.docker)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or 'docker'}: {item['msg']}" for item in error.errors()
        )
        raise ConfigError(f"orchestration.docker: {problems}") from None


def run_options(config: BenchmarkConfig) -> dict[str, Any]:
    """Keyword arguments for `pipeline.with_options(...)`."""
    orchestration = config.orchestration
    settings: dict[str, Any] = {}
    if orchestration.docker:
        settings["docker"] = docker_settings(config)
    if orchestration.orchestrator:
        settings["orchestrator"] = orchestration.orchestrator
    options: dict[str, Any] = {"settings": settings} if settings else {}
    if environment := orchestration.added_environment():
        options["environment"] = environment
    if orchestration.secrets:
        options["secrets"] = list(orchestration.secrets)
    return options


def step_environment(config: BenchmarkConfig) -> dict[str, str]:
    """The variables every step will see, for pre-flight: the local orchestrator runs steps in this process,
    so its environment counts there; elsewhere only what the run gives the steps does: the image's and the
    config's environment and the secrets (named ones, the stack's and its components'). Secret values are
    replaced by a placeholder at once: pre-flight checks names and emptiness, never values."""
    import os

    from zenml.client import Client
    from zenml.config.pipeline_configurations import PipelineConfiguration
    from zenml.utils.env_utils import get_runtime_secret_environment

    client = Client()
    for name in config.orchestration.secrets:
        try:
            client.get_secret(name)
        except KeyError:
            raise ConfigError(
                f"orchestration.secrets: no ZenML secret named {name!r} (create it with `zenml secret create "
                f"{name} --OPENAI_API_KEY=...`, one --KEY=value per variable)"
            ) from None
    stack = client.active_stack
    secrets = get_runtime_secret_environment(
        PipelineConfiguration(name="preflight", secrets=list(config.orchestration.secrets)), stack
    )
    docker = docker_settings(config)
    in_this_process = stack.orchestrator.flavor == "local"
    return {
        **(dict(os.environ) if in_this_process else {}),
        **{name: str(value) for name, value in {**docker.environment, **docker.runtime_environment}.items()},
        **config.orchestration.added_environment(),
        **{name: "<secret>" if str(value).strip() else "" for name, value in secrets.items()},
    }
