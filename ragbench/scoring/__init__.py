"""Scoring: what turns an answer into numbers. Judge rubrics and keyword suites as declarations, the
judge and the pairwise judge that run them through the LLM client, a cell's answers scored, the metric
declarations, and the registry (with the `evaluation` config section) every table, test, gate and
report reads.

May import: ragbench.generation, ragbench.grid, ragbench.inputs, ragbench.llm, ragbench.retrieval."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
