"""One registry for every kind of plugin (scorers, retrievers): a class with a name, found by that name among
the built-in ones and those installed packages register in the kind's entry point group, as
lm-evaluation-harness has one registry for its tasks, metrics and models. A step gets a plugin by its
`Plugin.identity` (part of the step's cache key) and makes it again where it runs, so another process or
machine uses the code the run was planned with, or refuses to run.

Imports nothing of ragbench but the hashing helper, so every sub-package may import it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from abc import ABC
from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, TypeVar

from ragbench.hashing import short_hash

logger = logging.getLogger(__name__)


class Plugin(ABC):
    """What every plugin has: a name (the one its entry point and the config use) and an identity."""

    # The name a config selects the plugin by; its entry point registers it under the same name.
    name: ClassVar[str]
    # Bump when the results change in a way the class's source does not show: it is part of the cache key.
    version: ClassVar[str] = "1"

    def identity(self) -> dict[str, Any]:
        """What decides this plugin's results: its name, version, source and settings, as a step's cache key
        sees it (a built-in's module is a source dependency of its steps anyway; another package's is not)."""
        return {
            "name": self.name,
            "class": f"{type(self).__module__}:{type(self).__qualname__}",
            "version": self.version,
            "source": short_hash(inspect.getsource(type(self))),
            "settings": self.settings(),
        }

    def settings(self) -> dict[str, Any]:
        """The plugin's own parameters (none by default)."""
        return {}


P = TypeVar("P", bound=Plugin)


class Registry(Generic[P]):
    """The plugins of one kind: `builtins`, then each class an installed package registers as
    ``[project.entry-points."<group>"] <name> = "package.module:Class"``, then each class `register`ed in this
    process (by code that embeds ragbench, or a test)."""

    def __init__(self, kind: str, group: str, base: type[P], builtins: Mapping[str, type[P]]) -> None:
        self.kind, self.group, self.base, self.builtins = kind, group, base, dict(builtins)
        self._registered: dict[str, type[P]] = {}

    def register(self, plugin: type[P]) -> type[P]:
        """Make `plugin` available by its name in this process, without an entry point; returns it, so it
        also serves as a class decorator. A name already taken by another class is refused."""
        if not (isinstance(plugin, type) and issubclass(plugin, self.base)):
            raise TypeError(f"{plugin!r} is not a ragbench {self.base.__name__} class")
        taken = self.available().get(plugin.name)
        if taken is not None and taken is not plugin:
            raise ValueError(
                f"{self.kind} {plugin.name} is registered twice ({taken.__module__}, {plugin.__module__})"
            )
        self._registered[plugin.name] = plugin
        return plugin

    def unregister(self, name: str) -> None:
        """Forget a class `register` added (a test's, when it ends); built-ins and entry points stay."""
        self._registered.pop(name, None)

    def available(self) -> dict[str, type[P]]:
        """Every class a config may name, by name; entry points are scanned once per import path (what is
        installed is what is on it). An entry point that cannot be loaded was reported by name and is
        left out: one broken package must not stop every other plugin."""
        found = dict(self.builtins)
        for point, plugin in _loaded(self.group, tuple(sys.path)):
            if not (isinstance(plugin, type) and issubclass(plugin, self.base)):
                raise ValueError(
                    f"entry point {point.name} = {point.value} is not a ragbench {self.base.__name__} class"
                )
            if plugin.name != point.name:
                raise ValueError(
                    f"entry point {point.name} names a {self.kind} called {plugin.name}: use one name"
                )
            if point.name in found and found[point.name] is not plugin:
                raise ValueError(f"{self.kind} {point.name} ({point.value}) is registered twice")
            found[point.name] = plugin
        return found | self._registered

    def classes(self, names: Sequence[str]) -> list[type[P]]:
        """The classes `names` select, in their order, once each; unknown names are refused all at once."""
        known = self.available()
        if unknown := [name for name in names if name not in known]:
            raise ValueError(
                f"unknown {self.kind}(s) {', '.join(unknown)}; available: {', '.join(sorted(known))} "
                f"(another package's {self.kind} registers in the entry point group {self.group})"
            )
        return [known[name] for name in dict.fromkeys(names)]

    def checked(self, plugin: P, identity: dict[str, Any]) -> P:
        """`plugin`, made where a step runs from the `identity` the run was planned with; code there that
        differs is an error, not silently another result."""
        if plugin.identity() != identity:
            raise ValueError(
                f"{self.kind} {plugin.name} here is {plugin.identity()}, the run was planned with "
                f"{identity}: install the same version where the steps run"
            )
        return plugin


@functools.lru_cache(maxsize=8)
def _loaded(group: str, import_path: tuple[str, ...]) -> tuple[tuple[EntryPoint, Any], ...]:
    """The entry points of `group` on `import_path` (the cache key: the scan reads sys.path), loaded; one that
    fails to load (its package is broken or half installed) is reported with its error, once, and skipped."""
    loaded = []
    for point in entry_points(group=group):
        try:
            loaded.append((point, point.load()))
        except Exception as error:  # any failure of someone else's import: report it, load the others
            logger.warning(
                "skipped the %s entry point %s = %s: it cannot be loaded (%s: %s)",
                group,
                point.name,
                point.value,
                type(error).__name__,
                error,
            )
    return tuple(loaded)
