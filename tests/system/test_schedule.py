"""Scheduled runs on the local stack: a crontab entry that runs the benchmark, then the regression gate."""

import json
import os
import stat
import subprocess

import pytest

import run
from ragbench.runs.schedule import ScheduleError, check_cron, command_of, entries, with_entry, without_entry

FAKE_CRONTAB = """#!/bin/sh
# A crontab stand-in that keeps the table in $CRONTAB_FILE (same interface: -l lists, - installs stdin).
case "$1" in
  -l) [ -f "$CRONTAB_FILE" ] && cat "$CRONTAB_FILE" || { echo "no crontab for $USER" >&2; exit 1; } ;;
  -) cat > "$CRONTAB_FILE" ;;
  *) exit 2 ;;
esac
"""


def test_cron_expressions_and_entries():
    assert check_cron("0  3 * * *") == "0 3 * * *"
    assert check_cron("*/15 9-17 * * 1-5") == "*/15 9-17 * * 1-5"
    assert check_cron("@daily") == "@daily"
    for bad in ("0 3 * *", "every night", "0 3 * * * *", "0 3 ; rm -rf / *"):
        with pytest.raises(ScheduleError):
            check_cron(bad)
    mine = "0 3 * * * echo hi # ragbench-schedule:a"
    table = with_entry("MAILTO=me\n5 4 * * * backup\n", mine, "a")
    assert entries(table) == [mine] and "backup" in table
    assert entries(with_entry(table, mine.replace("0 3", "0 4"), "a")) == [mine.replace("0 3", "0 4")]
    text, removed = without_entry(table, "a")
    assert removed and text == "MAILTO=me\n5 4 * * * backup\n"
    assert command_of(mine) == "echo hi"


@pytest.mark.slow
def test_install_list_remove_and_run_the_installed_command(tmp_path, monkeypatch, capsys):
    crontab = tmp_path / "crontab"
    crontab.write_text(FAKE_CRONTAB)
    crontab.chmod(crontab.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RAGBENCH_CRONTAB", str(crontab))
    monkeypatch.setenv("CRONTAB_FILE", str(tmp_path / "table"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "bread.md").write_text("# Bread\nBread dough rises because yeast ferments sugar.")
    (tmp_path / "kb" / "mars.md").write_text("# Mars\nMars is red because of iron oxide dust.")
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"id": "a", "question": "Why does dough rise?", "expected_sources": ["bread.md"]})
    )
    (tmp_path / "nightly.yaml").write_text(  # relative paths: to the config's folder, not cron's cwd
        "name: nightly\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        "eval_cases: cases.jsonl\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2,"
        " reader: []}\n"
        "retrieval: {metrics_k: 1}\n"
        "output_dir: out\n"
    )
    (tmp_path / "table").write_text("5 4 * * * /usr/local/bin/backup\n")
    schedule = ["schedule", "--config", "nightly.yaml"]
    assert run.main([*schedule, "--cron", "not cron"]) == 2
    assert run.main([*schedule, "--cron", "0 3 * * *"]) == 0
    installed = capsys.readouterr().out
    (line,) = entries((tmp_path / "table").read_text())
    assert (
        line in installed
        and line.startswith("0 3 * * * ")
        and "/usr/local/bin/backup" in (tmp_path / "table").read_text()
    )
    assert run.main([*schedule, "--list"]) == 0 and line in capsys.readouterr().out
    # the installed command line, run once as cron would (a shell, another working directory)
    done = subprocess.run(["/bin/sh", "-c", command_of(line)], cwd="/", env=os.environ, timeout=600)
    assert done.returncode == 0
    log = (tmp_path / "out" / "schedule.log").read_text()
    assert "ZenML run: rag_benchmark-" in log and "benchmark exit 0" in log
    assert "compare exit 2" in log  # one run: nothing to compare it with yet
    done = subprocess.run(["/bin/sh", "-c", command_of(line)], cwd="/", env=os.environ, timeout=600)
    log = (tmp_path / "out" / "schedule.log").read_text()
    assert log.count("benchmark exit 0") == 2 and "compare exit 0" in log  # the second night: gated, passed
    assert run.main([*schedule, "--remove"]) == 0
    assert (tmp_path / "table").read_text() == "5 4 * * * /usr/local/bin/backup\n"
