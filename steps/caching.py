"""ZenML's cache key covers a step's own source only; these policies add the project code it imports.

The dependencies are derived from the import statements, so a step's cache cannot outlive an edit to a
module it uses just because nobody remembered to list that module. Every import statement of a project
module counts (module level or lazy, inside a function), except two kinds that cannot change what a step
computes:

- imports under ``if TYPE_CHECKING:``, which never run;
- imports inside a function named ``save_visualizations`` (`PRESENTATION_FUNCTIONS`): a materializer's
  visualizations are what the dashboard shows of an artifact, never its data or its content hash. So a
  materializer imports its rendering helpers (``ragbench.report.pages``) there, not at module level, and an
  edit
  to an HTML table helper recomputes no chunk set and no index. (A step that is cached keeps the page its
  artifact was saved with.)

What a step needs but its output cannot depend on (where its LLM cache is, how many chunks one embedding
shard holds, on which device it encodes, how a comparison is labelled) reaches it in the `OPERATIONS`
artifact, an input its cache key ignores (`@cached_step(ignored_inputs=(OPERATIONS,))`); see `Operations`.

A cached step is declared with `@cached_step(...)` instead of `@step(cache_policy=...)`: its policy is
computed the first time ZenML reads the step's configuration (when a pipeline builds the step, or a test
inspects it), not when the module is imported, so importing the steps (every CLI command, every dry run)
walks and parses no import closure.
"""

import ast
import functools
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from zenml.config.cache_policy import CachePolicy
from zenml.config.source import Source
from zenml.steps import BaseStep
from zenml.steps.decorated_step import _DecoratedStep

PROJECT_PACKAGES: frozenset[str] = frozenset({"ragbench", "materializers"})
# Functions whose imports do not count (see the module docstring).
PRESENTATION_FUNCTIONS: frozenset[str] = frozenset({"save_visualizations"})

# The input that carries a run's `Operations` to its steps; every step that takes it ignores it in its key.
OPERATIONS = "operations"


class Operations(BaseModel):
    """What steps need to know but what cannot change their outputs: handed to them as one artifact (made by
    `pass_llm_operations`) that their cache keys ignore, so changing any of it recomputes nothing. A field a
    pipeline does not use keeps its default."""

    model_config = ConfigDict(extra="forbid")

    llm: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="each LLM's concurrency, timeouts and retries, by `LLMSettings.result_key` "
        "(`ragbench.grid.cell.llm_operations`)",
    )
    llm_cache: str | None = Field(default=None, description="the LLM cache: a folder or a database URL")
    device: str = Field(default="auto", description="where embeddings (of chunks and of questions) are made")
    shard_size: int = Field(default=2048, ge=1, description="chunks embedded per checkpointed shard")
    pairwise_labels: dict[str, tuple[str, str]] = Field(
        default_factory=dict,
        description="pairwise step's judge key id -> (candidate, baseline) as the report names them",
    )
    confidence: float = Field(
        default=0.95, gt=0.0, lt=1.0, description="level of the pairwise win-rate and judge-card intervals"
    )
    judge_names: dict[str, str] = Field(
        default_factory=dict,
        description="each judge's name as the report shows it, by `LLMSettings.result_key` (judge cards)",
    )
    budget: dict[str, Any] = Field(
        default_factory=dict,
        description="the run's spend cap (`config.budget`: a `ragbench.llm.budget.BudgetConfig`, as JSON so "
        "that every step's cache key does not depend on the LLM code; `steps.spend` reads it)",
    )


def core_dependencies(module_name: str, packages: frozenset[str] = PROJECT_PACKAGES) -> list[str]:
    """Every module of `packages` that importing `module_name` may load, found without importing anything.

    Every import statement counts, lazy ones inside functions included, except those under `if TYPE_CHECKING:`
    and those inside `PRESENTATION_FUNCTIONS` (see the module docstring). Imports made by modules outside
    `packages` are not followed: in particular the step's own package `__init__` (which imports every step)
    is not counted.
    """
    return list(_dependency_closure(module_name, packages))


def step_cache_policy(step_module: str, ignored_inputs: tuple[str, ...] = ()) -> CachePolicy:
    """The cache policy of every step in `step_module` (what `cached_step` gives its steps when they are
    built); `ignored_inputs`: input artifacts that cannot change the output (operational settings).

    Sources are given by name, not as module objects: ZenML resolves a module object against its source root,
    which fails where there is none (`python -c`) and names a package `pkg.__init__`, a second copy of it.
    """
    dependencies = core_dependencies(step_module)
    # A name that does not import fails here, when the step is built, not when a run computes its key.
    for name in dependencies:
        importlib.import_module(name)
    return CachePolicy(
        source_dependencies=[Source.from_import_path(name, is_module_path=True) for name in dependencies],
        ignored_inputs=list(ignored_inputs) or None,
    )


class LazilyCachedStep(_DecoratedStep):
    """A decorated step whose `step_cache_policy` is set the first time its configuration is read: by the
    pipeline that builds it (`_finalize_configuration`), by `configuration`, or by a copy of it made with
    `with_options` (which copies the pending state). A policy configured explicitly (other than ZenML's
    default) is kept."""

    IGNORED_INPUTS: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cache_policy_pending = True

    def _settle_cache_policy(self) -> None:
        if not getattr(self, "_cache_policy_pending", False):
            return  # settled, or still in `__init__` (which configures the step)
        self._cache_policy_pending = False
        if self._configuration.cache_policy == CachePolicy.default():
            policy = step_cache_policy(self.entrypoint.__module__, self.IGNORED_INPUTS)
            self._configuration = self._configuration.model_copy(update={"cache_policy": policy})

    @property
    def configuration(self) -> Any:  # zenml's PartialStepConfiguration
        self._settle_cache_policy()
        return self._configuration

    def _finalize_configuration(self, *args: Any, **kwargs: Any) -> Any:
        self._settle_cache_policy()
        return super()._finalize_configuration(*args, **kwargs)

    def _get_step_decorator_name(self) -> str | None:
        """The decorator's name in the step's module, so that its line stays out of the step's code hash as
        `@step`'s does."""
        names = [key for key, value in self.entrypoint.__globals__.items() if value is cached_step]
        return names[0] if names else super()._get_step_decorator_name()


def cached_step(
    *, ignored_inputs: tuple[str, ...] = (), **options: Any
) -> Callable[[Callable[..., Any]], BaseStep]:
    """`@step(**options)` with the `step_cache_policy` of the step's module, computed when the step is built:
    `@cached_step(ignored_inputs=(OPERATIONS,), output_materializers=...)`."""

    def decorate(function: Callable[..., Any]) -> BaseStep:
        step_class = type(
            function.__name__,
            (LazilyCachedStep,),
            {
                "entrypoint": staticmethod(function),
                "__module__": function.__module__,
                "__doc__": function.__doc__,
                "IGNORED_INPUTS": tuple(ignored_inputs),
            },
        )
        return step_class(name=options.pop("name", None) or function.__name__, **options)

    return decorate


@functools.cache
def _dependency_closure(module_name: str, packages: frozenset[str]) -> tuple[str, ...]:
    """A tuple, so the cached result cannot be changed by a caller."""
    if _find_spec(module_name) is None:
        raise ModuleNotFoundError(f"No module named {module_name!r}", name=module_name)
    found = set(_with_parent_packages(module_name, packages))
    pending = [module_name, *found]
    while pending:
        for imported in _imported_modules(pending.pop(), packages, module_name.partition(".")[0]):
            if imported not in found:
                found.add(imported)
                pending.append(imported)
    found.discard(module_name)
    return tuple(sorted(found))


@functools.cache
def _imported_modules(module_name: str, packages: frozenset[str], step_package: str) -> tuple[str, ...]:
    """The modules of `packages`, with their parent packages, that the import statements of a module load;
    and helper modules of the step's own package (`steps.history`), without that package's `__init__`.
    Each module is parsed once however many step closures hold it."""
    return tuple(_scan_imports(module_name, packages, step_package))


def _scan_imports(module_name: str, packages: frozenset[str], step_package: str) -> Iterator[str]:
    """`_imported_modules`, one import statement at a time."""
    spec = _find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=spec.origin)
    own_package = (
        module_name if spec.submodule_search_locations is not None else module_name.rpartition(".")[0]
    )
    for node in _counted_imports(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            base = _absolute_name(node, own_package)
            if base is None:
                continue
            # `from a import b` loads the submodule a.b when b is one rather than an attribute of a.
            candidates = [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]
        for name in candidates:
            top, _, rest = name.partition(".")
            if top in packages and _find_spec(name) is not None:
                yield from _with_parent_packages(name, packages)
            elif top == step_package and rest and _find_spec(name) is not None:
                yield name


def _counted_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module that count: none under `if TYPE_CHECKING:` (its `else:` runs, so
    that counts) and none inside a function named in `PRESENTATION_FUNCTIONS`."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in PRESENTATION_FUNCTIONS:
            continue
        else:
            pending.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING` (any module's attribute of that name)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute_name(node: ast.ImportFrom, own_package: str) -> str | None:
    """The module a `from ... import` statement names; None for a relative import that leaves the package."""
    if node.level == 0:
        return node.module
    parts = own_package.split(".") if own_package else []
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _with_parent_packages(module_name: str, packages: frozenset[str]) -> Iterator[str]:
    """Importing a.b.c runs a/__init__.py and a/b/__init__.py first, so those count too."""
    parts = module_name.split(".")
    if parts[0] in packages:
        for end in range(1, len(parts) + 1):
            yield ".".join(parts[:end])


def _find_spec(module_name: str) -> ModuleSpec | None:
    """Like `importlib.util.find_spec`, which imports the parent packages of a dotted name; this does not."""
    parent, _, _ = module_name.rpartition(".")
    if not parent:
        return importlib.util.find_spec(module_name)
    parent_spec = _find_spec(parent)
    if parent_spec is None or parent_spec.submodule_search_locations is None:
        return None
    return PathFinder.find_spec(module_name, parent_spec.submodule_search_locations)


def never_reuse_this_step_run() -> None:
    """Keep this step run out of the cache: its output is kept and shown, but it is incomplete (some LLM
    calls failed), so the next run computes the step again; the LLM cache answers the finished calls,
    and only the failed ones reach the provider. ZenML's own `cache_expires_at` does the work."""
    from zenml import get_step_context
    from zenml.client import Client
    from zenml.utils.time_utils import utc_now

    Client().update_step_run(get_step_context().step_run.id, cache_expires_at=utc_now())
