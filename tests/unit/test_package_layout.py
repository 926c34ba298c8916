"""The core package's shape holds: sub-packages named after the stages, imports that run one way between
them, no import circle, no file over 500 lines, and domain code that never reads the composed config."""

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from ragbench.layering import ALLOWED, FOUNDATION, FOUNDATION_PACKAGES, directions_markdown, may_import

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "ragbench"
LAYOUT_PAGE = ROOT / "docs" / "project" / "layout.md"
MAX_LINES = 500


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(CORE.parent).with_suffix("").parts).removesuffix(".__init__")


def imports_of(path: Path) -> set[str]:
    """Every ragbench module a module's import statements name (lazy ones inside functions included;
    `if TYPE_CHECKING:` blocks left out, as the cache closures leave them out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("ragbench")
        ):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # a submodule, where it is one
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("ragbench")}
    return found


MODULES = {module_name(path): path for path in CORE.rglob("*.py")}
GRAPH = {name: {m for m in imports_of(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (CORE / parts[1]).is_dir() else None


def test_no_module_imports_itself_round_a_circle():
    try:
        TopologicalSorter(GRAPH).prepare()
    except CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")


def test_the_allowed_directions_have_no_circle_and_name_every_sub_package():
    TopologicalSorter(ALLOWED).prepare()
    packages = {path.name for path in CORE.iterdir() if (path / "__init__.py").is_file()}
    assert packages == set(ALLOWED)


def is_foundation(module: str) -> bool:
    return module in FOUNDATION or package_of(module) in FOUNDATION_PACKAGES


def test_sub_packages_import_each_other_in_the_allowed_directions_only():
    wrong = []
    for module, imported in GRAPH.items():
        source = package_of(module)
        for target in imported:
            other = package_of(target)
            if is_foundation(target):
                continue
            if source and other and other != source and other not in ALLOWED[source]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layering (ragbench/layering.py ALLOWED):\n" + "\n".join(wrong)


def test_foundation_modules_import_no_other_part_of_ragbench():
    foundation = [module for module in MODULES if is_foundation(module)]
    assert {package_of(module) for module in foundation} >= set(FOUNDATION_PACKAGES)
    for module in foundation:
        outside = {target for target in GRAPH[module] if target != "ragbench" and not is_foundation(target)}
        assert not outside, (module, outside)


def test_domain_code_never_imports_the_composed_config():
    readers = {m for m, imported in GRAPH.items() if "ragbench.config.model" in imported}
    assert {package_of(m) for m in readers} <= {"config"}, sorted(readers)


def test_every_sub_package_says_what_it_may_import_as_the_rules_do():
    wrong = {}
    for package in ALLOWED:
        docstring = ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text())) or ""
        if may_import(package) not in " ".join(docstring.split()):
            wrong[package] = may_import(package)
    assert not wrong, f"ragbench/<package>/__init__.py docstrings should say (ragbench/layering.py): {wrong}"


def test_the_layout_page_shows_the_rules():
    assert directions_markdown() in LAYOUT_PAGE.read_text(encoding="utf-8"), (
        f"docs/project/layout.md should hold, as it is (ragbench/layering.py):\n{directions_markdown()}"
    )


def test_the_layout_page_names_every_core_module():
    """A module the page does not name is one a newcomer cannot find from it."""
    page = LAYOUT_PAGE.read_text()
    unnamed = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "ragbench").rglob("*.py"))
        if path.name != "__init__.py" and not re.search(rf"\b{re.escape(path.stem)}\b", page)
    ]
    assert not unnamed, f"docs/project/layout.md names none of {unnamed}"


def test_every_top_level_module_is_a_foundation_module():
    top_level = {name for name in MODULES if name.count(".") == 1 and package_of(name) is None}
    assert top_level <= FOUNDATION, sorted(top_level - FOUNDATION)


def test_the_core_never_imports_zenml():
    """The store is reached through `ragbench.store` (the adapter is steps/store.py); lazy imports count."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{name}: {imported}" for imported in names if imported.split(".")[0] == "zenml"]
    assert not found, found


def test_no_core_file_is_over_500_lines():
    long = {
        name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long
