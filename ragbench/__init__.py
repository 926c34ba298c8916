"""Framework-free core of the RAG benchmark: everything here is importable and testable without ZenML."""

# The release docs/project/changelog.md describes; `run.py --version` prints it and every run records it
# (with its commit and key packages, `ragbench.provenance`).
__version__ = "0.2.0"

import importlib
from collections.abc import Callable
from types import ModuleType


def submodules_as_attributes(package: str) -> Callable[[str], ModuleType]:
    """A package's module `__getattr__` (PEP 562) that imports a submodule on first attribute access.

    ZenML computes a step's cache key from its module dependencies by loading "pkg.mod" as attribute `mod`
    of `pkg` (it drops that the path names a module), which works only once something imported pkg.mod:
    true in the client's process, false in a fresh step process on another machine."""

    def __getattr__(name: str) -> ModuleType:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__


__getattr__ = submodules_as_attributes(__name__)
