"""Analysis: a run's results table assembled from its stage results, the intervals and paired tests behind
every number, each axis's effect, and how far the judge can be trusted. Presentation lives in
ragbench.report; ragbench.stats.inference and ragbench.stats.permutation (statistics primitives) import
nothing of ragbench but the section base and each other.

May import: ragbench.generation, ragbench.grid, ragbench.inputs, ragbench.llm, ragbench.retrieval,
ragbench.review, ragbench.scoring."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
