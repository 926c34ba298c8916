"""Retrieval: FAISS indexes (exact, HNSW, IVF) and BM25, the search of a cell (dense, bm25, hybrid) with
its retrieval metrics, and optional ColBERT reranking.

May import: ragbench.grid, ragbench.inputs, ragbench.models."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
