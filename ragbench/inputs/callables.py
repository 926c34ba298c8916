"""What a config names by text and the run resolves where its step runs: a `package.module:function` target
and a JMESPath into a JSON reply. Shared by the user's own RAG systems (`ragbench.generation.systems`) and
the sources of references fetched at run time (`ragbench.inputs.references`)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

import jmespath

_TARGET = re.compile(r"^[\w.]+:[\w.]+$")


def checked_target(target: str | None) -> str | None:
    """`target` when it reads 'package.module:function' (None passes), else ValueError."""
    if target is not None and not _TARGET.match(target):
        raise ValueError(f"python {target!r} is not 'package.module:function'")
    return target


def checked_jmespath(path: str | None) -> str | None:
    """`path` when it compiles as JMESPath (None passes), else ValueError with the parser's reason."""
    if path is not None:
        try:
            jmespath.compile(path)
        except jmespath.exceptions.JMESPathError as error:
            raise ValueError(f"JMESPath {path!r}: {error}") from None
    return path


def load_callable(target: str) -> Callable[..., Any]:
    """The function `target` names, imported here; ImportError says why it cannot be used."""
    module_name, _, attribute = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except Exception as error:  # the user's module may fail to import in any way
        raise ImportError(f"{target}: cannot import it here ({error})") from None
    if not callable(value):
        raise ImportError(f"{target} is not callable")
    return value
