"""A test orchestrator that runs every step as a pod would: in a fresh Python process of its own, in a
working folder and HOME that are not the client's, with none of the client's environment but what ZenML
hands a step (its store, the run's environment and secrets) and the code on PYTHONPATH (as in an image).

Client paths named in `hidden_paths` (the client's knowledge-base folder, say) are moved away while the
steps run and put back afterwards, so a step that still read the client's disk fails instead of passing
by luck. Each step's process is recorded (one JSON line in `record_file`): its pid, cwd and HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from zenml.config.global_config import GlobalConfiguration
from zenml.constants import ENV_ZENML_LOCAL_STORES_PATH
from zenml.entrypoints.step_entrypoint_configuration import StepEntrypointConfiguration
from zenml.orchestrators import SubmissionResult
from zenml.orchestrators.local.local_orchestrator import (
    LocalOrchestrator,
    LocalOrchestratorConfig,
)

from tests.stacks import FlavorForTests

if TYPE_CHECKING:
    from zenml.models import PipelineRunResponse, PipelineSnapshotResponse
    from zenml.stack import Stack

FLAVOR = "ragbench_test_subprocess"
RUN_ID_VARIABLE = "RAGBENCH_TEST_ORCHESTRATOR_RUN_ID"
# What a container image or pod spec would set: the interpreter's own needs, nothing of the user's.
PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HF_HUB_OFFLINE")


class SubprocessOrchestratorConfig(LocalOrchestratorConfig):
    home: str  # the steps' HOME and working folder (a pod's, not the client's)
    code_root: str  # on PYTHONPATH, as the code is in an image
    record_file: str
    hidden_paths: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        return True


class SubprocessOrchestrator(LocalOrchestrator):
    @property
    def config(self) -> SubprocessOrchestratorConfig:
        return self._config  # type: ignore[return-value]

    def get_orchestrator_run_id(self) -> str:
        return os.environ.get(RUN_ID_VARIABLE) or super().get_orchestrator_run_id()

    def submit_pipeline(
        self,
        snapshot: PipelineSnapshotResponse,
        stack: Stack,
        base_environment: dict[str, str],
        step_environments: dict[str, dict[str, str]],
        placeholder_run: PipelineRunResponse | None = None,
    ) -> SubmissionResult | None:
        run_id = str(uuid.uuid4())
        home = Path(self.config.home)
        home.mkdir(parents=True, exist_ok=True)
        with _moved_away([Path(p) for p in self.config.hidden_paths]):
            for step_name in snapshot.step_configurations:
                environment = {
                    **{name: os.environ[name] for name in PASSED_THROUGH if name in os.environ},
                    **base_environment,
                    **step_environments[step_name],
                    "HOME": str(home),
                    "PYTHONPATH": self.config.code_root,
                    RUN_ID_VARIABLE: run_id,
                    # the local artifact store, as local_docker mounts it into its containers
                    ENV_ZENML_LOCAL_STORES_PATH: GlobalConfiguration().local_stores_path,
                }
                arguments = StepEntrypointConfiguration.get_entrypoint_arguments(
                    step_name=step_name, snapshot_id=snapshot.id
                )
                log = home / f"{step_name}.log"
                with log.open("w") as output:
                    process = subprocess.Popen(
                        [sys.executable, "-m", "zenml.entrypoints.entrypoint", *arguments],
                        cwd=home,
                        env=environment,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                    )
                    code = process.wait()
                with Path(self.config.record_file).open("a") as records:
                    record = {"step": step_name, "pid": process.pid, "cwd": str(home), "home": str(home)}
                    records.write(json.dumps(record | {"exit": code}) + "\n")
                if code != 0:
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                    raise RuntimeError(f"step {step_name} failed in its own process (exit {code}):\n{tail}")
        return None


@contextmanager
def _moved_away(paths: list[Path]) -> Iterator[None]:
    moved = []
    try:
        for path in paths:
            hidden = path.with_name(path.name + ".hidden-from-steps")
            path.rename(hidden)
            moved.append((hidden, path))
        yield
    finally:
        for hidden, path in moved:
            hidden.rename(path)


class SubprocessOrchestratorFlavor(FlavorForTests):
    NAME = FLAVOR
    CONFIG = SubprocessOrchestratorConfig
    IMPLEMENTATION = SubprocessOrchestrator
