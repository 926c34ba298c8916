"""Inputs: the knowledge base (folders, files, datasets, URIs) as documents, the eval cases and their
sources, and the chunk sets cut from the documents. Everything later reads what this package loads.

May import: ragbench.models. (The chunking tokenizers come from it; the foundation modules of
`ragbench.layering` are imported from anywhere.)"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
