"""Statistics primitives every layer reports with: intervals, paired tests, multiple-comparison correction and
rater agreement (inference), the sign-flip permutation test (permutation), prediction-powered inference
(ppi), and how an interval is written (formatting). A foundation package: its modules import nothing of
ragbench but the section base and each other, so scoring, review and analysis all read them without
importing upward.

May import: no other sub-package."""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
