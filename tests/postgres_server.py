"""A throwaway PostgreSQL server from Debian's packages for tests: its own cluster in a temp folder,
listening on 127.0.0.1 only, password authentication (the client gets the password from PGPASSWORD,
as a pod would from a ZenML secret). `make test` installs the `postgresql` package when missing."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "ragbench"


def _binaries() -> Path | None:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def unavailable_reason() -> str | None:
    """Why a server cannot be started here, or None."""
    if _binaries() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql; `make test` does it as root)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: cannot start PostgreSQL as its own user"
    return None


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the package's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_server(host: str = "127.0.0.1") -> Iterator[tuple[str, str]]:
    """Yields (URL without password, password); stops the server and removes its files afterwards.
    `host` is the one address it listens on: 127.0.0.1, or the Docker bridge address (172.17.0.1) for
    steps in containers, which are then let in from the default bridge subnet (172.17.0.0/16), password
    required."""
    binaries = _binaries()
    assert binaries is not None, unavailable_reason()
    root = Path(tempfile.mkdtemp(prefix="ragbench-pg-"))
    data, password = root / "data", secrets.token_hex(12)
    (root / "pw").write_text(password)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        (root / "pw").chmod(0o600)
        shutil.chown(root / "pw", "postgres")
    port = _free_port(host)
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run(
        _as_postgres(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "-A",
                "scram-sha-256",
                f"--pwfile={root / 'pw'}",
                "--no-sync",
            ]
        ),
        **run,
    )
    if host != "127.0.0.1":
        with (data / "pg_hba.conf").open("a") as hba:
            # containers on the default bridge, and this machine itself (which may reach the bridge
            # address from another of its own addresses)
            hba.write("host all all 172.17.0.0/16 scram-sha-256\nhost all all samehost scram-sha-256\n")
    options = f"-c listen_addresses={host} -p {port} -k {root} -c fsync=off"
    subprocess.run(
        _as_postgres(
            [str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
        ),
        **run,
    )
    try:
        yield f"postgresql+psycopg://{USER}@{host}:{port}/postgres", password
    finally:
        subprocess.run(
            _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            check=False,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(root, ignore_errors=True)
