"""Whether a model name resolves, checked without downloading: a local path, a packaged model, the local
Hugging Face cache, or (unless HF_HUB_OFFLINE is set) an answer from the Hub."""

from __future__ import annotations

import os
from pathlib import Path

from ragbench.models.errors import ModelResolutionError
from ragbench.models.registry import _packaged_listing, find_packaged_model

_HUB_TIMEOUT_S = 5.0


def _local_path(name: str) -> Path | None:
    """`name` as an existing local file or folder (which wins over any registry or Hub name), else None."""
    path = Path(name).expanduser()
    return path if name and path.exists() else None


def resolvable_offline(name: str) -> bool:
    """Whether `name` resolves without the network: a local path, a packaged model, or in the local Hugging
    Face cache (what a dry run can check; a Hub name otherwise needs a real run's check)."""
    return _local_path(name) is not None or find_packaged_model(name) is not None or _in_hf_cache(name)


def check_model_available(name: str) -> None:
    """Cheap pre-flight run before expensive work, so a run fails in seconds rather than after indexing.

    Local paths and packaged names pass without downloading anything. Other names pass if they are
    in the local Hugging Face cache, or, unless HF_HUB_OFFLINE is set, if the Hub answers for them.
    """
    if _local_path(name) is not None:
        return
    if find_packaged_model(name) is not None:
        return
    if _in_hf_cache(name):
        return
    if hub_offline():
        raise ModelResolutionError(
            f"Model {name!r} is not a local path, not a packaged offline model and not in the local "
            f"Hugging Face cache, and HF_HUB_OFFLINE is set.\n{_packaged_listing()}"
        )
    problem = _hub_problem(name)
    if problem is not None:
        raise ModelResolutionError(
            f"Model {name!r} is not a local path, not a packaged offline model, not in the local "
            f"Hugging Face cache, and the Hub check failed: {problem}\n{_packaged_listing()}"
        )


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set: a name the machine does not have cannot resolve."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(v.strip().upper() in {"1", "ON", "YES", "TRUE"} for v in flags)


def _in_hf_cache(name: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=name, local_files_only=True)
    except Exception:
        return False
    return True


def _hub_problem(name: str) -> str | None:
    """None if the Hub knows ``name``; otherwise a short reason. Bounded by a short timeout."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError
    except ImportError as exc:
        return f"huggingface_hub is not installed ({exc})"
    try:
        HfApi().model_info(name, timeout=_HUB_TIMEOUT_S)
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        return f"the Hub has no accessible model {name!r} ({type(exc).__name__})"
    except OSError as exc:  # requests' connection errors and timeouts are OSErrors
        return f"the Hub could not be reached ({type(exc).__name__}, timeout {_HUB_TIMEOUT_S:.0f} s)"
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}"[:300]
    return None
