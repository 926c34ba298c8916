"""The pipelines, imported on first use: `pipelines.rag_benchmark` imports the wiring (and with it every
step), while `pipelines.options` or `pipelines.inputs` import only themselves, so a dry run that reads the
orchestration options never imports a step."""

import importlib
from typing import Any

# Each pipeline function and the module that defines it.
PIPELINES = {
    "rag_benchmark": "pipelines.benchmark",
    "rag_race": "pipelines.benchmark",
    "rag_testset": "pipelines.testset",
    "rag_train_reranker": "pipelines.train_reranker",
}

__all__ = list(PIPELINES)


def __getattr__(name: str) -> Any:
    if name in PIPELINES:
        return getattr(importlib.import_module(PIPELINES[name]), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
