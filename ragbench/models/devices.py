"""Where torch work runs: one reading of a `device` setting (auto, cpu, cuda) for every model that loads."""

from __future__ import annotations

from typing import Literal

Device = Literal["auto", "cpu", "cuda"]


def torch_device(device: str, key: str) -> str:
    """`device` as torch names it where this step runs: auto = a GPU if the step has one; cuda without one
    is refused, naming the config `key` that asked for it."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{key} is cuda, but torch sees no CUDA device where this step runs")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
