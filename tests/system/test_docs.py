"""The documentation site builds strictly, and its generated reference pages cover the code.

`mkdocs build --strict` (mkdocs.yml: every validation at `warn`) fails on a broken link or anchor and
on a page missing from the nav; the reference pages (docs/hooks.py) must list every config key, every
command and option of `run.py` and every built-in metric, each checked against the code here by a way
of its own, not the hook's.
"""

import contextlib
import html
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import run
from cli.main import COMMANDS
from ragbench.config.model import BenchmarkConfig
from ragbench.config.reference import reference_markdown
from ragbench.scoring.metrics import LATENCY

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"<code[^>]*>(.*?)</code>", re.S)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for the module with --strict."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml", "-d", str(out)],
        cwd=REPO_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def codes(site: Path, page: str) -> set[str]:
    """The text of every inline code element of a built page."""
    text = (site / page / "index.html").read_text(encoding="utf-8")
    return {html.unescape(re.sub(r"<[^>]+>", "", match)) for match in CODE.findall(text)}


def hooks_module():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO_ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_keys() -> list[str]:
    """The keys of the config reference the model generates (its tables' first column)."""
    return re.findall(r"^\| `([^`]+)` \|", reference_markdown(), re.M)


def cli_help() -> str:
    """`run.py --help`, then every command's own `--help`."""
    texts = []
    for argv in (["--help"], *([command.name, "--help"] for command in COMMANDS)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            run.main(argv)
        texts.append(out.getvalue())
    return "\n".join(texts)


def test_every_config_key_is_on_the_config_page(site):
    keys = reference_keys()
    assert len(keys) > 100 and "knowledge_base.revision" in keys and "timeout_s" in keys
    assert set(keys) <= codes(site, "reference/config")


def test_every_command_and_option_is_on_the_cli_page(site):
    help_text = cli_help()
    commands = re.search(r"\{([a-z,-]+)\}", help_text).group(1).split(",")
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", help_text)) - {"--help"}
    assert {"run", "init", "testset", "compare", "promote", "schedule", "dashboard", "config"} <= set(
        commands
    )
    assert {"--config", "--set", "--dry-run", "--against"} <= options
    on_page = codes(site, "reference/cli")
    assert {f"run.py {command}" for command in commands} <= on_page
    assert options <= on_page


def test_every_builtin_metric_is_on_the_metrics_page(site):
    columns = {metric.column for metric in BenchmarkConfig().scoring().metrics()} | {LATENCY.column}
    assert {"correctness_0to1", "fail_declines", "mrr", "hit_rate@5"} <= columns
    assert columns <= codes(site, "reference/metrics")


def test_every_nav_page_is_built_and_readme_links_resolve(site):
    """The nav and the pages agree (strict checks that too); README's links into docs/ point at files."""
    pages = {p.relative_to(REPO_ROOT / "docs").as_posix() for p in (REPO_ROOT / "docs").rglob("*.md")}
    pages |= set(hooks_module().generate_pages())
    for page in pages:
        assert (site / page.removesuffix(".md").removesuffix("index") / "index.html").exists(), page
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]*))?\)", readme)
    assert len(links) > 20
    for target, anchor in links:
        if re.match(r"[a-z]+:", target):
            continue
        assert (REPO_ROOT / target).exists(), f"README links to {target}, which does not exist"
        if anchor and target.startswith("docs/"):
            built = (
                site / target.removeprefix("docs/").removesuffix(".md").removesuffix("index") / "index.html"
            )
            assert f'id="{anchor}"' in built.read_text(encoding="utf-8"), f"README: no #{anchor} in {target}"


def test_generated_text_from_the_code_is_escaped():
    """A `<name>` in a description would be taken for an HTML tag and vanish: outside code it is escaped."""
    hooks = hooks_module()
    assert hooks.escape("fail_<name> and `fail_<name>` * 3") == "fail_&lt;name&gt; and `fail_<name>` \\* 3"
    for page in (hooks.config_page(), hooks.cli_page(), hooks.metrics_page()):
        prose = re.sub(r"```.*?```", "", page, flags=re.S)
        prose = re.sub(r"(`+).+?\1", "", prose.replace("<!--", ""))
        assert not re.search(r"<[A-Za-z/]", prose), re.search(r".{40}<[A-Za-z/].{40}", prose)
