"""The composition root: the whole config model, the grid's expansion, loading with overrides, the checks
before a run (preflight, dry run), the starter config and the generated reference. Only this package
(and the CLI, steps and pipelines) builds the composed config; each domain owns its own section.

May import: every other sub-package."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
