"""The pipelines, imported on first use: `pipelines.rag_benchmark` imports the wiring (and with it every
step), while `pipelines.options` or `pipelines.inputs` import only themselves, so a dry run that reads the
orchestration options never imports a step."""

import importlib
from typing import Any

from ragbench import submodules_as_attributes

# Each pipeline function and the module that defines it.
PIPELINES = {
    "rag_benchmark": "pipelines.benchmark",
    "rag_race": "pipelines.benchmark",
    "rag_staged": "pipelines.staged",
    "rag_model_search": "pipelines.model_search",
    "rag_testset": "pipelines.testset",
    "rag_train_reranker": "pipelines.train_reranker",
}

__all__ = list(PIPELINES)


_submodule = submodules_as_attributes(__name__)


def __getattr__(name: str) -> Any:
    if name in PIPELINES:
        return getattr(importlib.import_module(PIPELINES[name]), name)
    return _submodule(name)
