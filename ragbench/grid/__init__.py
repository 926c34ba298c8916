"""The grid's cell: one typed cell specification (every axis value, an unambiguous id, readable labels)
read by every stage. Its expansion from the config is ragbench.config.expand.

May import: ragbench.llm."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
