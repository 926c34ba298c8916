"""Generation: the reader that answers from passages and the answer sets of a cell (a reader over the
retrieved passages, or an external RAG system asked over HTTP or in Python, as `systems` declares it).

May import: ragbench.grid, ragbench.inputs, ragbench.llm, ragbench.retrieval."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
