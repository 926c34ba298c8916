"""Retrieval: FAISS indexes (exact, HNSW, IVF) and BM25, the retrievers (dense, bm25, hybrid and those other
packages register), the query rewrite before the search (an LLM call through the one client), the search of
a cell with its retrieval metrics, and optional ColBERT reranking.

May import: ragbench.grid, ragbench.inputs, ragbench.llm, ragbench.models."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
