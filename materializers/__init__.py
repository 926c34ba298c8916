"""ZenML materializers for the benchmark's artifact types (one file each, no list-of-objects artifacts).

Import them from their modules: a step depends (for its cache key) on every module it imports.
"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
