"""Why a model name could not be resolved or provisioned."""

from __future__ import annotations


class ModelResolutionError(RuntimeError):
    """A model cannot be made available: unknown, unreachable, or failed provisioning/verification."""
