"""Runs over time: what a run records for the gate (ragbench.runs.record), the comparison of two runs,
the regression gate's verdict (with the `regression` config section), schedules and the dashboard.

May import: ragbench.analysis, ragbench.report, ragbench.review, ragbench.scoring."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
