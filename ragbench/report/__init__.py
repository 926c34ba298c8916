"""Report: presentation only. The HTML report of a run (its sections, charts and inlined scripts, kept as
package data), and the page helpers every HTML output uses; content from documents and LLMs is escaped
on the way in.

May import: ragbench.analysis, ragbench.grid, ragbench.inputs, ragbench.retrieval, ragbench.review,
ragbench.scoring."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
