"""The core's layering, held here and nowhere else: which sub-package may import which, and the foundation
modules every one may import. tests/unit/test_package_layout.py checks the imports against it, and checks that
each sub-package's docstring ("May import: ...") and docs/project/layout.md say what it says, so the prose
cannot drift from the rule.

Imports nothing, so every module (and the tests) may read it.
"""

from __future__ import annotations

# Imported from anywhere: modules that import nothing of ragbench but each other. Every top-level module
# (the section base, the store protocol, the plugin registry, hashing, the cache folders, the code a run ran,
# these rules) and table and URI reading.
FOUNDATION = frozenset(
    {
        "ragbench.section",
        "ragbench.store",
        "ragbench.plugins",
        "ragbench.hashing",
        "ragbench.cache_home",
        "ragbench.layering",
        "ragbench.provenance",
        "ragbench.inputs.tables",
        "ragbench.inputs.uris",
    }
)

# Imported from anywhere, as a whole: sub-packages at the bottom of the stack whose modules import nothing of
# ragbench but the foundation. `stats` holds the statistics primitives every layer reports with.
FOUNDATION_PACKAGES = frozenset({"stats"})

# The composition root: it builds the whole config, so it may import every other sub-package.
ROOT = "config"

# Which sub-packages each one may import, beside the foundation; the composition root may import them all.
_DIRECTIONS: dict[str, frozenset[str]] = {
    "stats": frozenset(),
    "models": frozenset(),
    "inputs": frozenset({"models"}),
    "llm": frozenset({"models"}),
    "grid": frozenset({"llm"}),
    "retrieval": frozenset({"grid", "inputs", "llm", "models"}),
    "generation": frozenset({"grid", "inputs", "llm", "retrieval"}),
    "scoring": frozenset({"generation", "grid", "inputs", "llm", "retrieval"}),
    "review": frozenset({"inputs", "llm", "scoring"}),
    "analysis": frozenset({"generation", "grid", "inputs", "llm", "retrieval", "review", "scoring"}),
    "report": frozenset({"analysis", "grid", "inputs", "retrieval", "review", "scoring"}),
    "runs": frozenset({"analysis", "report", "review", "scoring"}),
    "testset": frozenset({"generation", "inputs", "llm", "report", "retrieval", "scoring"}),
    "training": frozenset({"inputs", "llm", "models", "retrieval", "testset"}),
}
ALLOWED: dict[str, frozenset[str]] = {**_DIRECTIONS, ROOT: frozenset(_DIRECTIONS)}


def may_import(package: str) -> str:
    """The sentence a sub-package's docstring states its directions in."""
    if package == ROOT:
        return "May import: every other sub-package."
    allowed = sorted(ALLOWED[package])
    return f"May import: {', '.join(f'ragbench.{name}' for name in allowed) or 'no other sub-package'}."


def directions_markdown() -> str:
    """The directions as the layout page shows them: one row per sub-package, in import order."""
    rows = [
        f"| `{package}` | {', '.join(f'`{name}`' for name in sorted(ALLOWED[package])) or '(none)'} |"
        for package in [*_DIRECTIONS, ROOT]
    ]
    foundation = ", ".join(
        [f"`{name}`" for name in sorted(FOUNDATION)]
        + [f"every module of `ragbench.{name}`" for name in sorted(FOUNDATION_PACKAGES)]
    )
    return "\n".join(
        [
            "| sub-package | may import (beside the foundation) |",
            "|---|---|",
            *rows,
            "",
            f"Foundation modules, imported from anywhere: {foundation}.",
        ]
    )
