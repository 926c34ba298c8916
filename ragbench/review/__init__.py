"""Review: a person in the loop. The review page for answers and eval-set candidates, the labels it
writes, the judge's agreement with them, and a judge aligned by them.

May import: ragbench.inputs, ragbench.llm, ragbench.scoring."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
