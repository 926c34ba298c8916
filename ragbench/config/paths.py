"""Relative paths in a config resolve against the config file's folder, as docker compose does.

Without this a config naming ``docs/`` works when run by hand from its folder but not under cron,
which starts elsewhere. `resolve_paths` rewrites the raw mapping (as read from YAML, before
validation) against the config's folder; `resolve_override_paths` does the same for one
``--set key=value`` against the current directory, so a path typed on the command line means what
the shell would take it to mean. Both read the one table `PATH_KEYS`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragbench.inputs.uris import is_uri

Resolver = Callable[[str, Path], str]

_EXPLICIT = ("./", "../")
_RERANKER_OFF = "off"


def _relative(value: str) -> bool:
    """A relative filesystem path: not empty, absolute, ``~``-based (left to expanduser) or a URI."""
    return bool(value) and not (value.startswith("~") or is_uri(value) or Path(value).is_absolute())


def _absolute(value: str, base: Path) -> str:
    """`value` under `base`, normalised (``./``, ``..``) without following symlinks."""
    return os.path.abspath(base / value)


def always_path(value: str, base: Path) -> str:
    """A key that only ever names a file or folder: resolved even if it does not exist yet
    (an output folder, or a missing input whose error then names where it was looked for)."""
    return _absolute(value, base) if _relative(value) else value


def maybe_path(value: str, base: Path) -> str:
    """A key that usually names a Hub model or dataset (``owner/name``) but may name a local folder:
    a path only when written as one (``./``, ``../``) or when it exists under `base`. Otherwise it stays,
    so the loader still tries the current directory, then the Hub, as before."""
    if not _relative(value):
        return value
    if value in (".", "..") or value.startswith(_EXPLICIT) or (base / value).exists():
        return _absolute(value, base)
    return value


def reranker_path(value: str, base: Path) -> str:
    """A ColBERT checkpoint name or folder; ``off`` is a keyword, even if a folder ``off`` exists."""
    return value if value == _RERANKER_OFF else maybe_path(value, base)


def labels_path(value: str, base: Path) -> str:
    """The labels of `evaluation.judge_alignment` and `evaluation.label_correction`: a name ending in
    ``.jsonl`` is a labels file (as `pipelines.inputs.review_labels_input` reads it), resolved even if it
    does not exist yet, so its error names where it was looked for; anything else is the name of the
    labels artifact (``review_labels``, ``review_labels:3``) unless written as a path or found under
    `base`."""
    return always_path(value, base) if value.endswith(".jsonl") else maybe_path(value, base)


def local_llm_path(value: str, base: Path) -> str:
    """An LLM model string, with the file it names (if its provider reads one: ``local/<file>.gguf``,
    `ragbench.llm.local.LocalProvider.resolve_model_file`) resolved by the `maybe_path` rule."""
    from ragbench.llm.providers import provider_class  # the LLM package only for a model string

    return provider_class(value).resolve_model_file(value, lambda file: maybe_path(file, base))


# Every config key that may hold a filesystem path, and how it is told from a name. A dotted key
# matches the raw YAML mapping; ``*`` matches every key of a mapping. A list value (a grid axis) has
# each item resolved; a single value written without brackets is resolved as it is. Non-strings
# (null, booleans, inline prompt mappings) are left alone, and an LLM entry may be a mapping whose
# ``model`` is resolved. Adding a path key is one line here.
PATH_KEYS: dict[str, Resolver] = {
    "knowledge_base.path": always_path,
    "knowledge_base.dataset": maybe_path,
    "eval_cases": always_path,  # the shorthand `eval_cases: cases.yaml`
    "eval_cases.path": always_path,
    "eval_cases.dataset": maybe_path,
    "eval_cases.traces.path": always_path,
    "eval_cases.traces.annotations_path": always_path,
    "chunking.tokenizer": maybe_path,
    "grid.embedding_model": maybe_path,
    "grid.reranker": reranker_path,
    "grid.reader": local_llm_path,
    "grid.judge": local_llm_path,
    "prompts.*": always_path,  # a prompt file; an inline {system, user} mapping is not a string
    "testset.embedding_model": maybe_path,
    "testset.generator": local_llm_path,
    "testset.critic": local_llm_path,
    "testset.labels": always_path,
    "evaluation.judge_alignment.labels": labels_path,  # a labels file, or the name of the labels artifact
    "evaluation.label_correction.labels": labels_path,
    "llm_cache_dir": always_path,
    "output_dir": always_path,
}


def _resolve_value(value: Any, resolver: Resolver, base: Path) -> Any:
    """One value of a path key: a string, a list of them (a grid axis), or an LLM mapping."""
    if isinstance(value, str):
        return resolver(value, base)
    if isinstance(value, list):
        return [_resolve_value(item, resolver, base) for item in value]
    if resolver is local_llm_path and isinstance(value, dict) and isinstance(value.get("model"), str):
        return {**value, "model": resolver(value["model"], base)}
    return value


def _resolve_at(node: Any, keys: list[str], resolver: Resolver, base: Path) -> Any:
    """`node` with the value at the dotted `keys` resolved; a missing key or non-mapping is left as is."""
    if not keys:
        return _resolve_value(node, resolver, base)
    if not isinstance(node, dict):
        return node
    head, rest = keys[0], keys[1:]
    names = list(node) if head == "*" else [head] if head in node else []
    return node | {name: _resolve_at(node[name], rest, resolver, base) for name in names}


def resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of the raw config mapping with every relative path of `PATH_KEYS` made absolute against
    `base` (the config file's folder; if relative itself, taken against the current directory).

    Absolute paths, ``~`` paths (expanded later by the loaders), URIs and non-strings are kept, and
    the input is never modified, so a caller may resolve the same mapping against another base."""
    resolved = copy.deepcopy(data)
    for dotted_key, resolver in PATH_KEYS.items():
        resolved = _resolve_at(resolved, dotted_key.split("."), resolver, base)
    return resolved


def resolve_override_paths(key: str, value: Any, cwd: Path) -> Any:
    """One ``--set key=value`` (value already parsed from YAML) with its paths resolved against `cwd`.

    The value is nested under its dotted key and passed through `resolve_paths`, so the same table
    and rules apply whether the override sets a path key itself (``grid.embedding_model``), a section
    above it (``grid``), or a field below it (``testset.generator.model``)."""
    keys = key.split(".")
    nested: Any = value
    for name in reversed(keys):
        nested = {name: nested}
    resolved = resolve_paths(nested, cwd)
    for name in keys:
        resolved = resolved[name]
    return resolved
