"""The command line as `cli/` builds it: per-command options and `--help`, `--dry-run` only where it plans
without acting (and then changing nothing), every documented invocation still parsing, and every kind of
pipeline run marked failed when interrupted."""

from __future__ import annotations

import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import cli.launch
import ragbench
import run
from cli.main import COMMANDS, parse_args
from ragbench.runs.schedule import entries
from tests.conftest import REPO_ROOT
from tests.projects import write_project
from tests.system.test_schedule import FAKE_CRONTAB

DOCUMENTS = {
    "bread.md": "# Bread\nBread dough rises because yeast ferments sugar.",
    "mars.md": "# Mars\nMars is red because of iron oxide dust.",
}
CASES = [{"id": "a", "question": "Why does dough rise?", "expected_sources": ["bread.md"]}]
RETRIEVAL_ONLY = (
    "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, reader: []}\n"
    "retrieval: {metrics_k: 1}\n"
)


def test_compare_help_lists_only_the_options_of_compare():
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run.py"), "compare", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", done.stdout))
    assert options == {"--help", "--config", "--set", "--against", "--last", "--tag"}


@pytest.mark.parametrize("command", [c.name for c in COMMANDS if not c.dry_run])
def test_dry_run_is_refused_by_a_command_with_nothing_to_plan(command, capsys):
    with pytest.raises(SystemExit) as exited:
        run.main([command, "--dry-run"])
    assert exited.value.code == 2
    assert "--dry-run: this command changes nothing a plan could preview" in capsys.readouterr().err


def test_the_commands_that_change_state_take_dry_run():
    planners = {c.name for c in COMMANDS if c.dry_run}
    assert planners == {"run", "race", "testset", "train-reranker", "schedule", "promote"}


@pytest.mark.parametrize(
    "argv",
    [["--cron", "0 3 * * *"], ["compare", "--no-cache"], ["promote", "x", "--against", "y"], ["schedule"]],
)
def test_an_option_of_another_command_is_refused_not_ignored(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        run.main(argv)
    assert exited.value.code == 2 and "error:" in capsys.readouterr().err


def documented_invocations() -> list[str]:
    """The arguments after `run.py` in every command line of README.md and docs/ (code blocks and inline
    code): optional parts (`[...]`) dropped, placeholders (`<...>`, `$(...)`) filled in."""
    commands = []
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        code, prose, fenced = [], [], False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif fenced or line.startswith("    "):
                if code and code[-1].endswith("\\"):  # a command continued on the next line
                    code[-1] = code[-1][:-1] + line
                else:
                    code.append(line)
            else:
                prose.append(line)
        for paragraph in "\n".join(prose).split("\n\n"):
            commands += [" ".join(span.split()) for span in re.findall(r"`([^`]*run\.py[^`]*)`", paragraph)]
        # the text of a code line up to a comment or quoted output; not the layout page's `run.py   CLI:`
        commands += [re.split(r"\s#|`", line)[0] for line in code if not re.match(r"\s*run\.py\s{2,}", line)]
    found = []
    for command in (part for line in commands for part in line.split("&&") if "run.py" in part):
        arguments = re.sub(r"\[[^\]]*\]", "", command.split("run.py", 1)[1])
        found.append(re.sub(r"<[^>]*>|\$\([^)]*\)", "X", arguments).strip())
    return sorted(set(found))


def test_every_documented_invocation_parses():
    invocations = documented_invocations()
    assert {"", "--config my.yaml --dry-run", "compare --last 10 --tag nightly", "promote X"} <= set(
        invocations
    )
    names = {command.name for command in COMMANDS}
    for arguments in invocations:
        argv = shlex.split(arguments)
        try:
            args = parse_args(argv)
        except SystemExit as exited:  # `--help` exits 0
            assert exited.code == 0, f"documented `run.py {arguments}` does not parse"
            continue
        assert args.command == (argv[0] if argv and argv[0] in names else "run"), arguments


def test_every_kind_of_pipeline_run_is_marked_failed_when_interrupted(monkeypatch):
    import pipelines

    marked = []
    monkeypatch.setattr(cli.launch, "mark_pipeline_runs_failed", lambda name, abandoned: marked.append(name))
    cli.launch.mark_runs_failed(abandoned=False)
    assert set(marked) == {getattr(pipelines, name).name for name in pipelines.__all__}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path / "project", DOCUMENTS, CASES, f"name: cli-{tmp_path.name}\n" + RETRIEVAL_ONLY)
    return tmp_path / "project" / "config.yaml"


def test_schedule_dry_run_leaves_the_crontab_as_it_is_and_says_what_it_would_install(
    project, tmp_path, monkeypatch, capsys
):
    from pipelines import schedules

    crontab = tmp_path / "crontab"
    crontab.write_text(FAKE_CRONTAB)
    crontab.chmod(crontab.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RAGBENCH_CRONTAB", str(crontab))
    monkeypatch.setenv("CRONTAB_FILE", str(tmp_path / "table"))
    table = "5 4 * * * /usr/local/bin/backup\n"
    (tmp_path / "table").write_text(table)
    command = ["schedule", "--config", str(project), "--cron", "0 3 * * *"]
    zenml_before = schedules.list_schedules()
    assert run.main([*command, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would install in your crontab" in out and "changed nothing" in out
    assert (tmp_path / "table").read_text() == table and schedules.list_schedules() == zenml_before
    assert run.main(command) == 0  # the real install writes the line the dry run showed
    (line,) = entries((tmp_path / "table").read_text())
    assert line in out
    installed = (tmp_path / "table").read_text()
    assert run.main([*command, "--dry-run"]) == 0
    assert "would replace the entry in your crontab" in capsys.readouterr().out
    assert run.main(["schedule", "--config", str(project), "--remove", "--dry-run"]) == 0
    assert "would remove the crontab entry" in capsys.readouterr().out
    assert (tmp_path / "table").read_text() == installed
    assert run.main(["schedule", "--config", str(project), "--list", "--dry-run"]) == 2
    assert "--list changes nothing" in capsys.readouterr().err


def test_promote_dry_run_promotes_nothing_and_says_what_it_would_promote(project, capsys):
    from zenml.client import Client

    from ragbench.runs.compare import champion_tag

    assert run.main(["--config", str(project)]) == 0
    benchmark = Client().get_pipeline("rag_benchmark").last_run
    config_name = f"cli-{project.parent.parent.name}"

    def champions() -> list[str]:
        return [
            r.name for r in Client().list_pipeline_runs(tags=[f"equals:{champion_tag(config_name)}"]).items
        ]

    capsys.readouterr()
    assert run.main(["promote", benchmark.name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would make {benchmark.name} the champion of config {config_name!r} (it has none yet)" in out
    assert champions() == []
    assert run.main(["promote", benchmark.name]) == 0
    assert champions() == [benchmark.name]
    assert run.main(["promote", benchmark.name, "--dry-run"]) == 0
    assert "(it already is)" in capsys.readouterr().out


def test_run_py_is_a_shim_and_no_command_module_is_long():
    assert len((REPO_ROOT / "run.py").read_text().splitlines()) < 60
    lengths = {path.name: len(path.read_text().splitlines()) for path in (REPO_ROOT / "cli").glob("*.py")}
    assert max(lengths.values()) <= 300, lengths


def test_version_is_printed_and_the_changelog_describes_it(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        run.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"ragbench {ragbench.__version__}\n"
    changelog = (Path(__file__).resolve().parents[2] / "docs" / "project" / "changelog.md").read_text()
    assert f"## {ragbench.__version__} " in changelog
