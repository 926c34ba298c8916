"""The grid's cell: one typed cell specification (every axis value, an unambiguous id, readable labels)
read by every stage, and its axes, each declared once (`axes`: stage, values, id and label text,
consumer; another package registers its own). Its expansion from the config is ragbench.config.expand.

May import: ragbench.llm."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
