"""Schedules on an orchestrator that schedules by itself, on a machine without cron: ZenML registers them
(`pipelines.schedules`), the crontab is never needed. The orchestrator is a stand-in
(`tests.scheduling_orchestrator`) that records what a real one would create or delete."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import pytest

import run
from pipelines import schedules
from ragbench.config.model import load_config
from ragbench.runs.schedule import MARKER
from tests.projects import write_project
from tests.scheduling_orchestrator import FLAVOR
from tests.stacks import orchestrator_stack

DOCUMENTS = {
    "bread.md": "# Bread\nBread dough rises because yeast ferments sugar.",
    "mars.md": "# Mars\nMars is red because of iron oxide dust.",
}
CASES = [{"id": "a", "question": "Why does dough rise?", "expected_sources": ["bread.md"]}]
NO_CRONTAB = "ragbench-no-such-crontab"
FAKE_CRONTAB = """#!/bin/sh
case "$1" in
  -l) [ -f "$CRONTAB_FILE" ] && cat "$CRONTAB_FILE" || { echo "no crontab for $USER" >&2; exit 1; } ;;
  -) cat > "$CRONTAB_FILE" ;;
  *) exit 2 ;;
esac
"""


@pytest.fixture
def scheduling_stack(tmp_path, monkeypatch):
    """The stand-in orchestrator with the default artifact store, active for the test."""
    from zenml.client import Client

    monkeypatch.setenv("RAGBENCH_CRONTAB", NO_CRONTAB)  # no cron on this machine, as in most containers
    records = tmp_path / "orchestrator.jsonl"
    source = "tests.scheduling_orchestrator.SchedulingOrchestratorFlavor"
    with orchestrator_stack(FLAVOR, source, {"record_file": str(records)}) as stack:
        Client().activate_stack(stack.id)
        yield records


@pytest.fixture
def config_file(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "project"
    write_project(
        root,
        DOCUMENTS,
        CASES,
        f"name: sched-{uuid.uuid4().hex[:8]}\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2,"
        " reader: []}\n"
        "retrieval: {metrics_k: 1}\n",
    )
    return root / "config.yaml"


def recorded(records: Path) -> list[dict]:
    return [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []


def zenml_schedules_named(name: str) -> list:
    from zenml.client import Client

    return list(Client().list_schedules(name=name).items)


def test_install_list_replace_and_remove_a_zenml_schedule(scheduling_stack, config_file):
    from ragbench.runs.compare import config_tag

    config = load_config(str(config_file), [])
    name = schedules.schedule_name(config.name)
    assert schedules.orchestrator_schedules()

    installed, replaced = schedules.install_schedule(config, "0 3 * * *")
    assert replaced is None and installed.name == name and installed.cron == "0 3 * * *"
    (registered,) = zenml_schedules_named(name)
    assert registered.cron_expression == "0 3 * * *" and registered.active
    (event,) = recorded(scheduling_stack)
    assert event["event"] == "schedule" and event["name"] == name and event["cron"] == "0 3 * * *"
    assert event["pipeline"] == "rag_benchmark" and config_tag(config.name) in event["tags"]

    installed, replaced = schedules.install_schedule(config, "30 4 * * 1-5")  # replaces, keeps one
    assert replaced is not None and replaced.deleted_in_orchestrator
    (registered,) = zenml_schedules_named(name)
    assert registered.cron_expression == "30 4 * * 1-5"
    assert [(e["event"], e["cron"]) for e in recorded(scheduling_stack)[1:]] == [
        ("delete", "0 3 * * *"),
        ("schedule", "30 4 * * 1-5"),
    ]

    listed = [info for info in schedules.list_schedules() if info.name == name]
    assert [(info.cron, info.active) for info in listed] == [("30 4 * * 1-5", True)]
    assert FLAVOR in listed[0].orchestrator and name in listed[0].line()
    assert schedules.find_schedule(config.name) == listed[0]

    removal = schedules.remove_schedule(config.name)
    assert removal is not None and removal.deleted_in_orchestrator and "deleted on" in removal.text()
    assert zenml_schedules_named(name) == [] and schedules.find_schedule(config.name) is None
    assert recorded(scheduling_stack)[-1] == {"event": "delete", "name": name, "cron": "30 4 * * 1-5"}
    assert schedules.remove_schedule(config.name) is None


def test_a_schedule_the_orchestrator_cannot_delete_is_not_silently_replaced(scheduling_stack, config_file):
    """ZenML only archives its record when the orchestrator cannot delete the job (0.98: all but
    Kubernetes): replacing it would leave the old job running, so it is refused with what to do."""
    from zenml.client import Client
    from zenml.enums import StackComponentType

    from tests.scheduling_orchestrator import SchedulingOrchestrator

    config = load_config(str(config_file), [])
    schedules.install_schedule(config, "0 3 * * *")
    client = Client()
    orchestrator = client.active_stack_model.components[StackComponentType.ORCHESTRATOR][0]
    # as an orchestrator without `delete_schedule` (Airflow, Vertex, ...) answers
    original = SchedulingOrchestrator.supports_schedule_deletion
    try:
        SchedulingOrchestrator.supports_schedule_deletion = property(lambda self: False)  # type: ignore[assignment]
        with pytest.raises(schedules.ZenMLScheduleError, match="cannot delete"):
            schedules.install_schedule(config, "0 4 * * *")
        removal = schedules.remove_schedule(config.name)
    finally:
        SchedulingOrchestrator.supports_schedule_deletion = original  # type: ignore[assignment]
    assert removal is not None and not removal.deleted_in_orchestrator
    assert "still scheduled there" in removal.text() and orchestrator.name in removal.text()
    assert [e["event"] for e in recorded(scheduling_stack)] == ["schedule"]  # nothing asked to delete
    assert schedules.find_schedule(config.name) is None


def test_schedule_command_without_cron_on_an_orchestrator_that_schedules(
    scheduling_stack, config_file, capsys
):
    config = load_config(str(config_file), [])
    name = schedules.schedule_name(config.name)
    command = ["schedule", "--config", str(config_file)]
    assert run.main([*command, "--cron", "0 3 * * *"]) == 0
    out = capsys.readouterr().out
    assert f"registered the ZenML schedule {name!r}" in out
    # a folder and a file on this machine: the schedule keeps their snapshot, and says so
    assert "knowledge base and eval cases are files on this machine, stored with the schedule" in out
    assert run.main([*command, "--cron", "0 5 * * *"]) == 0
    out = capsys.readouterr().out
    assert "removed the ZenML schedule" in out and "(0 5 * * *)" in out
    assert run.main([*command, "--list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if name in line]
    assert len(listed) == 1 and "cron 0 5 * * *" in listed[0] and "active" in listed[0]
    assert run.main([*command, "--remove"]) == 0
    assert "deleted on" in capsys.readouterr().out
    assert run.main([*command, "--remove"]) == 0
    assert f"no schedule of {config.name!r}" in capsys.readouterr().out
    assert [(e["event"], e["cron"]) for e in recorded(scheduling_stack)] == [
        ("schedule", "0 3 * * *"),
        ("delete", "0 3 * * *"),
        ("schedule", "0 5 * * *"),
        ("delete", "0 5 * * *"),
    ]


def test_schedule_command_on_the_local_orchestrator_without_cron(config_file, monkeypatch, capsys):
    """The local orchestrator cannot schedule: --list still works, installing says to install cron."""
    monkeypatch.setenv("RAGBENCH_CRONTAB", NO_CRONTAB)
    command = ["schedule", "--config", str(config_file)]
    assert run.main([*command, "--list"]) == 0
    assert run.main([*command, "--remove"]) == 0
    assert "no schedule of" in capsys.readouterr().out
    assert run.main([*command, "--cron", "0 3 * * *"]) == 2
    assert "not found: install cron" in capsys.readouterr().err


def test_list_and_remove_see_the_crontab_and_zenml(
    scheduling_stack, config_file, tmp_path, monkeypatch, capsys
):
    """A config scheduled by cron earlier and by ZenML now: --list shows both, --remove removes both."""
    from zenml.client import Client

    crontab = tmp_path / "crontab"
    crontab.write_text(FAKE_CRONTAB)
    crontab.chmod(crontab.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RAGBENCH_CRONTAB", str(crontab))
    monkeypatch.setenv("CRONTAB_FILE", str(tmp_path / "table"))
    config = load_config(str(config_file), [])
    (tmp_path / "table").write_text(
        f"5 4 * * * /usr/local/bin/backup\n0 1 * * * true {MARKER}{config.name}\n"
    )
    command = ["schedule", "--config", str(config_file)]
    assert run.main([*command, "--cron", "0 3 * * *"]) == 0
    assert "your crontab schedules" in capsys.readouterr().out
    assert run.main([*command, "--list"]) == 0
    out = capsys.readouterr().out
    assert f"{MARKER}{config.name}" in out and f"zenml: {schedules.schedule_name(config.name)}" in out
    client = Client()
    scheduling = client.active_stack_model.id
    client.activate_stack("default")  # the local orchestrator: installing goes to the crontab
    try:
        assert run.main([*command, "--cron", "0 2 * * *"]) == 0
    finally:
        client.activate_stack(scheduling)
    out = capsys.readouterr().out
    assert "installed in your crontab" in out and "ZenML schedules it too" in out
    assert run.main([*command, "--remove"]) == 0
    out = capsys.readouterr().out
    assert "removed the crontab entry" in out and "removed the ZenML schedule" in out
    assert (tmp_path / "table").read_text() == "5 4 * * * /usr/local/bin/backup\n"
    assert schedules.find_schedule(config.name) is None


def test_schedule_dry_run_registers_and_removes_nothing_in_zenml(scheduling_stack, config_file, capsys):
    """--dry-run says what it would register, replace or remove; ZenML and the orchestrator see nothing."""
    config = load_config(str(config_file), [])
    name = schedules.schedule_name(config.name)
    command = ["schedule", "--config", str(config_file)]
    assert run.main([*command, "--cron", "0 3 * * *", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would register the ZenML schedule {name!r} (0 3 * * *)" in out and "changed nothing" in out
    assert zenml_schedules_named(name) == [] and recorded(scheduling_stack) == []
    assert run.main([*command, "--cron", "0 3 * * *"]) == 0
    capsys.readouterr()
    assert run.main([*command, "--cron", "0 5 * * *", "--dry-run"]) == 0
    assert f", replacing zenml: {name}  cron 0 3 * * *" in capsys.readouterr().out
    assert run.main([*command, "--remove", "--dry-run"]) == 0
    assert f"would remove the ZenML schedule zenml: {name}" in capsys.readouterr().out
    (registered,) = zenml_schedules_named(name)
    assert registered.cron_expression == "0 3 * * *"
    assert [e["event"] for e in recorded(scheduling_stack)] == ["schedule"]
    assert run.main([*command, "--remove"]) == 0
