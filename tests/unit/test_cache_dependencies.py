"""An edit to any project module a step loads must invalidate its cache, so its policy lists them all."""

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from zenml.steps import BaseStep

from steps.caching import PROJECT_PACKAGES, core_dependencies

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS_DIR = REPO_ROOT / "steps"
HELPER_MODULES = {
    "caching",
    "history",
    "identity",
    "spend",
    "store",
}  # modules of the steps package that define no step
STEP_MODULES = sorted(
    f"steps.{info.name}" for info in pkgutil.iter_modules([str(STEPS_DIR)]) if info.name not in HELPER_MODULES
)

FAKE_TREE = {
    "fakepkg/__init__.py": "",
    "fakepkg/entry.py": """
        from typing import TYPE_CHECKING
        import json
        import fakepkg.sub.deep as deep_alias
        import otherpkg.mod
        from . import sibling
        from fakepkg import cycle_a
        from fakepkg.helpers import CONSTANT

        if TYPE_CHECKING:
            from fakepkg.typing_only import Hint
        else:
            import fakepkg.runtime_only


        def lazy():
            import fakepkg.lazy_mod


        class Materializer:
            def save_visualizations(self, data):
                import fakepkg.rendering

            def load(self, data_type):
                import fakepkg.loading
    """,
    "fakepkg/sub/__init__.py": "from .relative_target import X",
    "fakepkg/sub/relative_target.py": "X = 1",
    "fakepkg/sub/deep.py": "from ..up import Y",
    "fakepkg/up.py": "Y = 2",
    "fakepkg/sibling.py": "",
    "fakepkg/cycle_a.py": "import fakepkg.cycle_b",
    "fakepkg/cycle_b.py": "from fakepkg import cycle_a",
    "fakepkg/helpers.py": "CONSTANT = 3",
    "fakepkg/typing_only.py": "class Hint: ...",
    "fakepkg/runtime_only.py": "",
    "fakepkg/rendering.py": "",
    "fakepkg/loading.py": "",
    "fakepkg/lazy_mod.py": "",
    "fakepkg/unused.py": "",
    "otherpkg/__init__.py": "",
    "otherpkg/mod.py": "import fakepkg.unused",
}


@pytest.fixture(scope="module")
def fake_packages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("fake_packages")
    for relative, source in FAKE_TREE.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        yield


def test_every_kind_of_import_is_followed_without_importing(fake_packages: None) -> None:
    deps = core_dependencies("fakepkg.entry", packages=frozenset({"fakepkg"}))
    assert deps == [
        "fakepkg",  # the parent package of the module itself runs first
        "fakepkg.cycle_a",  # from pkg import submodule
        "fakepkg.cycle_b",
        "fakepkg.helpers",  # from a.b import attribute: a.b only
        "fakepkg.lazy_mod",  # import inside a function
        "fakepkg.loading",  # inside a method other than save_visualizations
        "fakepkg.runtime_only",  # the else of if TYPE_CHECKING
        "fakepkg.sibling",  # from . import z
        "fakepkg.sub",  # parent package of fakepkg.sub.deep
        "fakepkg.sub.deep",  # import a.b.c as d
        "fakepkg.sub.relative_target",  # relative import in a package __init__
        "fakepkg.up",  # from ..up import Y
    ]  # not fakepkg.typing_only (if TYPE_CHECKING: never runs), nor fakepkg.rendering (save_visualizations)
    assert "fakepkg" not in sys.modules


def test_import_cycle_ends_and_excludes_the_module_itself(fake_packages: None) -> None:
    packages = frozenset({"fakepkg"})
    assert core_dependencies("fakepkg.cycle_a", packages=packages) == ["fakepkg", "fakepkg.cycle_b"]
    assert core_dependencies("fakepkg.cycle_b", packages=packages) == ["fakepkg", "fakepkg.cycle_a"]


def test_only_imports_made_by_the_given_packages_are_followed(fake_packages: None) -> None:
    """otherpkg.mod imports fakepkg.unused: counted only once otherpkg is a project package too."""
    assert "fakepkg.unused" not in core_dependencies("fakepkg.entry", packages=frozenset({"fakepkg"}))
    deps = core_dependencies("fakepkg.entry", packages=frozenset({"fakepkg", "otherpkg"}))
    assert {"otherpkg", "otherpkg.mod", "fakepkg.unused"} <= set(deps)


# The `steps` package __init__ imports every step, so the probe puts an unexecuted `steps` in its place and
# measures what one step module loads by itself. One interpreter imports the third-party libraries the
# steps use (ZenML, torch, ...: seconds each), checks that no project module came with them, then forks a
# child per step module: each child starts from that state, imports its one module and reports the
# project modules now loaded. Third-party imports cannot change which project modules a step loads (that
# is checked, not assumed), so this measures what a fresh interpreter per module would, at a fraction of
# the cost. The ZenML repository gives the resolution of materializer classes a source root, which
# `python -c` lacks.
_PRELOADED = ("zenml", "zenml.steps", "numpy", "pydantic", "faiss", "torch", "sentence_transformers")
_PROBE = """
import importlib, importlib.util, json, os, sys, traceback
packages = set({packages!r})
for name in {preloaded!r}:
    importlib.import_module(name)
early = sorted(name for name in sys.modules if name.partition(".")[0] in packages)
assert not early, f"a third-party import loaded project modules: {{early}}"
sys.modules["steps"] = importlib.util.module_from_spec(importlib.util.find_spec("steps"))
loaded = {{}}
for module in {modules!r}:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            importlib.import_module(module)
            report = sorted(name for name in sys.modules if name.partition(".")[0] in packages)
        except BaseException:
            report = traceback.format_exc()[-3000:]
        with os.fdopen(write, "w") as pipe:
            json.dump(report, pipe)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        loaded[module] = json.load(pipe)
    os.waitpid(child, 0)
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def modules_loaded_by_import(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each step module imported alone, in a child forked from one interpreter (see `_PROBE`)."""
    zenml_dir = tmp_path_factory.mktemp("zenml_probe")
    (zenml_dir / "repository" / ".zen").mkdir(parents=True)
    env = {
        **os.environ,
        "ZENML_REPOSITORY_PATH": str(zenml_dir / "repository"),
        "ZENML_CONFIG_PATH": str(zenml_dir / "config"),
        "ZENML_ANALYTICS_OPT_IN": "false",
        "PYTHONPATH": str(REPO_ROOT),
    }
    code = _PROBE.format(packages=sorted(PROJECT_PACKAGES), preloaded=_PRELOADED, modules=STEP_MODULES)
    probe = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert probe.returncode == 0, f"the import probe failed:\n{probe.stderr[-3000:]}"
    loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    failed = {module: report for module, report in loaded.items() if isinstance(report, str)}
    assert not failed, "importing these step modules failed:\n" + "\n".join(
        f"{module}:\n{report}" for module, report in failed.items()
    )
    return loaded


def test_step_modules_are_found() -> None:
    assert {"steps.chunk", "steps.index", "steps.generate"} <= set(STEP_MODULES)


@pytest.mark.parametrize("step_module", STEP_MODULES)
def test_modules_loaded_by_a_step_module_are_its_dependencies(
    step_module: str, modules_loaded_by_import: dict[str, list[str]]
) -> None:
    missing = sorted(set(modules_loaded_by_import[step_module]) - set(core_dependencies(step_module)))
    assert not missing, f"importing {step_module} loads {missing}, which core_dependencies does not find"


@pytest.mark.parametrize("step_module", STEP_MODULES)
def test_cached_steps_depend_on_every_core_module(step_module: str) -> None:
    module = importlib.import_module(step_module)
    steps = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, BaseStep) and obj.entrypoint.__module__ == step_module
    ]
    assert steps, f"{step_module} defines no step"
    expected = set(core_dependencies(step_module))
    for step in steps:
        if step.configuration.enable_cache is False:
            continue  # never served from the cache, so no key to keep honest
        policy = step.configuration.cache_policy
        listed = {source.import_path for source in (policy and policy.source_dependencies) or []}
        missing = sorted(expected - listed)
        assert not missing, (
            f"step {step.name} in {step_module} is cached without depending on {missing}; "
            "declare it with @cached_step(...)"
        )


@pytest.mark.parametrize("step_module", ["steps.chunk", "steps.index"])
def test_chunk_and_index_steps_do_not_depend_on_llm_or_prompt_code(step_module: str) -> None:
    """An edit to a reader prompt or to the LLM client must not re-chunk and re-embed the knowledge base."""
    closure = core_dependencies(step_module)
    assert "ragbench.inputs.chunking" in closure or "ragbench.retrieval.index" in closure
    dragged = [
        m for m in closure if m.startswith(("ragbench.llm", "ragbench.llm.prompts", "ragbench.config.model"))
    ]
    assert not dragged, f"{step_module} depends on {dragged}"


_COUNT_POLICIES = """
import json, steps.caching as caching
computed = []
real = caching.step_cache_policy
caching.step_cache_policy = lambda *args, **kwargs: computed.append(args[0]) or real(*args, **kwargs)
import pipelines.benchmark, pipelines.testset, pipelines.train_reranker
at_import = list(computed)
from steps import chunk_knowledge_base
chunk_knowledge_base.configuration
print(json.dumps([at_import, computed]))
"""


def test_importing_the_pipelines_computes_no_cache_policy(tmp_path: Path) -> None:
    """The import closures are walked when a step is built (its configuration read), not on import: every
    CLI command and dry run imports the pipelines."""
    (tmp_path / "repository" / ".zen").mkdir(parents=True)
    env = {
        **os.environ,
        "ZENML_CONFIG_PATH": str(tmp_path / "zenml"),
        "ZENML_REPOSITORY_PATH": str(tmp_path / "repository"),
        "ZENML_ANALYTICS_OPT_IN": "false",
        "PYTHONPATH": str(REPO_ROOT),
    }
    probe = subprocess.run(
        [sys.executable, "-c", _COUNT_POLICIES], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    at_import, after_build = json.loads(probe.stdout.strip().splitlines()[-1])
    assert at_import == []
    assert after_build == ["steps.chunk"]


def test_a_built_step_has_its_modules_policy_and_no_decorator_line_in_its_code_hash() -> None:
    from steps.caching import OPERATIONS, step_cache_policy
    from steps.judge import judge_answers_cell

    policy = judge_answers_cell.configuration.cache_policy
    assert policy == step_cache_policy("steps.judge", ignored_inputs=(OPERATIONS,))
    assert "cached_step" not in judge_answers_cell.source_code_cache_value
    copy = judge_answers_cell.with_options(enable_cache=True)
    assert copy.configuration.cache_policy == policy
