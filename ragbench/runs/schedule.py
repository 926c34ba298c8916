"""Scheduled runs on a machine whose ZenML orchestrator cannot schedule (the local one): a crontab
entry that runs the benchmark, then the regression gate, appending both to a log file.

Entries are found again by a marker comment with the config's name, so installing twice replaces
the entry and removing touches nothing else in the user's crontab.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

MARKER = "# ragbench-schedule:"
_CRON_FIELD = re.compile(
    r"^(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?(,(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?)*$"
)


class ScheduleError(ValueError):
    """A cron expression or a crontab that cannot be used; the message says why."""


def check_cron(expression: str) -> str:
    """Five crontab fields (minute hour day month weekday), or an @-shortcut such as @daily."""
    fields = expression.split()
    if len(fields) == 1 and fields[0] in {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@reboot"}:
        return expression
    if len(fields) != 5 or not all(_CRON_FIELD.match(field) for field in fields):
        raise ScheduleError(
            f"not a cron expression (5 fields: minute hour day month weekday): {expression!r}"
        )
    return " ".join(fields)


def benchmark_command(repo: Path, python: str, config: Path, log: Path) -> str:
    """Run the benchmark (its last step is the gate), then `compare`, which judges the newest run
    whatever its status (a run that broke is a gate failure, not a silent comparison of older runs);
    both exit codes go to `log`, and the next night runs either way."""
    q = shlex.quote
    benchmark = f"{q(python)} run.py --config {q(str(config))}"
    gate = f"{q(python)} run.py compare --config {q(str(config))}"
    folder, target = q(str(log.parent)), q(str(log))
    return (
        f"mkdir -p {folder} && cd {q(str(repo))} && "
        f'{{ date; {benchmark}; echo "benchmark exit $?"; {gate}; echo "compare exit $?"; }} >> {target} 2>&1'
    )


def entry_line(cron: str, command: str, name: str) -> str:
    """A crontab line; cron reads an unescaped % as a newline, so every % is escaped."""
    return f"{check_cron(cron)} {command.replace('%', chr(92) + '%')} {MARKER}{name}"


def _is_entry(line: str, name: str) -> bool:
    return line.rstrip().endswith(f"{MARKER}{name}")


def with_entry(crontab: str, line: str, name: str) -> str:
    """The crontab with `name`'s entry replaced by `line` (or added)."""
    kept = [existing for existing in crontab.splitlines() if not _is_entry(existing, name)]
    return "\n".join([*kept, line]) + "\n"


def without_entry(crontab: str, name: str) -> tuple[str, bool]:
    lines = crontab.splitlines()
    kept = [line for line in lines if not _is_entry(line, name)]
    return ("\n".join(kept) + "\n" if kept else ""), len(kept) != len(lines)


def entries(crontab: str) -> list[str]:
    return [line for line in crontab.splitlines() if MARKER in line]


def command_of(line: str) -> str:
    """The shell command of an entry (its five time fields and marker taken off)."""
    fields = line.split(None, 1 if line.startswith("@") else 5)
    return fields[-1].rsplit(MARKER, 1)[0].strip().replace(chr(92) + "%", "%")
