"""The one place a config's `orchestration` section becomes ZenML run options, so a run by hand, a testset
run and a schedule all reach the steps the same way (image, orchestrator settings, secrets, environment).
ZenML is imported only where it is asked: a dry run on a machine where ZenML never ran (`store_exists`)
opens no store and creates none."""

import os
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

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


def zenml_config_folder() -> Path:
    """ZenML's global configuration folder (`ZENML_CONFIG_PATH`, else the user's zenml folder), found as
    ZenML's `get_global_config_directory` finds it, without importing ZenML."""
    import click

    return Path(os.environ.get("ZENML_CONFIG_PATH") or click.get_app_dir("zenml"))


def store_exists() -> bool:
    """Whether ZenML has a store here: a store URL in the environment, or the global configuration ZenML
    writes when it first opens one (`zenml_config_folder`). Without one there is no earlier run, no secret
    and no stack but ZenML's default (the local orchestrator)."""
    if any(name.startswith("ZENML_STORE_") for name in os.environ):
        return True
    return (zenml_config_folder() / "config.yaml").is_file()


class StackEnvironment(NamedTuple):
    """What the active stack gives every step beside the config: whether its orchestrator runs the steps in
    this process (the local one: this process's environment counts there), and the variables of the named
    secrets and of the stack's and its components' secrets, each value replaced by `<secret>` (or "" when
    empty): pre-flight checks names and emptiness, never values, and none is kept."""

    in_this_process: bool
    secrets: dict[str, str]


def stack_environment(config: BenchmarkConfig) -> StackEnvironment:
    """The active stack's `StackEnvironment`, asked of ZenML; a named secret the store lacks fails here."""
    from zenml.client import Client
    from zenml.config.pipeline_configurations import PipelineConfiguration
    from zenml.utils.env_utils import get_runtime_secret_environment

    client = Client()
    for name in config.orchestration.secrets:
        try:
            client.get_secret(name)
        except KeyError:
            _missing_secret(name)
    stack = client.active_stack
    secrets = get_runtime_secret_environment(
        PipelineConfiguration(name="preflight", secrets=list(config.orchestration.secrets)), stack
    )
    return StackEnvironment(
        in_this_process=stack.orchestrator.flavor == "local",
        secrets={name: "<secret>" if str(value).strip() else "" for name, value in secrets.items()},
    )


def step_environment(config: BenchmarkConfig, stack: StackEnvironment | None = None) -> dict[str, str]:
    """The variables every step will see, for pre-flight: the local orchestrator runs steps in this process,
    so its environment counts there; elsewhere only what the run gives the steps does: the image's and the
    config's environment and the secrets (named ones, the stack's and its components'), as placeholders
    (`StackEnvironment`). `stack`: the active stack's, when the caller has it (the dry run's, remembered
    beside the store: `cli.store_memo`); else ZenML is asked. Where ZenML has no store yet (`store_exists`),
    the stack is its default one: the local orchestrator, no secret."""
    docker: dict[str, Any] = {}
    if config.orchestration.docker:
        settings = docker_settings(config)
        docker = {**settings.environment, **settings.runtime_environment}
    if not store_exists():
        if config.orchestration.secrets:
            _missing_secret(config.orchestration.secrets[0])
        return {
            **os.environ,
            **{name: str(value) for name, value in docker.items()},
            **config.orchestration.added_environment(),
        }
    stack = stack_environment(config) if stack is None else stack
    return {
        **(dict(os.environ) if stack.in_this_process else {}),
        **{name: str(value) for name, value in docker.items()},
        **config.orchestration.added_environment(),
        **stack.secrets,
    }


def _missing_secret(name: str) -> NoReturn:
    raise ConfigError(
        f"orchestration.secrets: no ZenML secret named {name!r} (create it with `zenml secret create "
        f"{name} --OPENAI_API_KEY=...`, one --KEY=value per variable)"
    ) from None
