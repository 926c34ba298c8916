"""A throwaway Arize Phoenix server for the traces tests: its own database in a temp folder, both its
listeners (HTTP: UI, REST API and OTLP/HTTP; gRPC: OTLP) on 127.0.0.1 only. Phoenix runs in .venv-phoenix
(`make phoenix-venv`, which `make test-slow` builds), apart from ragbench's venv, whose pins it would break;
so does tests/phoenix/rag_app.py, the instrumented LangChain app that exports spans to it. This module
itself runs in the main venv, on the standard library only."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV = REPO_ROOT / ".venv-phoenix"
PYTHON = VENV / "bin" / "python"
SERVE = REPO_ROOT / "tests" / "phoenix" / "serve.py"
RAG_APP = REPO_ROOT / "tests" / "phoenix" / "rag_app.py"  # the tests run it with PhoenixServer.python
# Phoenix takes ~35 s to start on a loaded 2-core machine (imports, then its database migrations).
STARTUP_DEADLINE_S = 180.0
STOP_DEADLINE_S = 20.0
_LISTEN = "0A"  # TCP_LISTEN, as /proc/net/tcp writes a socket's state


@dataclass(frozen=True)
class PhoenixServer:
    """Where a running server answers, and the Python of the venv that runs it (for rag_app.py)."""

    port: int
    grpc_port: int
    log: Path
    python: Path = PYTHON

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def otlp_http_endpoint(self) -> str:
        return f"{self.url}/v1/traces"


def unavailable_reason() -> str | None:
    """Why a server cannot be started here, or None."""
    if not (VENV / ".ready").exists():
        return (
            "no .venv-phoenix for the Phoenix server (`make phoenix-venv` builds it; `make test-slow` does)"
        )
    return None


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def phoenix_server() -> Iterator[PhoenixServer]:
    """Yields a server once it answers /healthz; stops it and removes its files afterwards. Fails, with the
    end of its log, if it exits or is not up within STARTUP_DEADLINE_S."""
    assert (reason := unavailable_reason()) is None, reason
    root = Path(tempfile.mkdtemp(prefix="ragbench-phoenix-"))
    port, grpc_port = _free_port(), _free_port()
    server = PhoenixServer(port=port, grpc_port=grpc_port, log=root / "phoenix.log")
    # none of the caller's PHOENIX_* settings (a database URL, auth, a collector): this server is the tests'
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("PHOENIX_")},
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(root / "working"),
        # its migrations' SQL, 4,000 lines of the log, would push the lines that say why it failed out of
        # the tail shown
        "PHOENIX_LOG_MIGRATIONS": "false",
    }
    with server.log.open("wb") as log:
        process = subprocess.Popen(
            [str(PYTHON), str(SERVE)], stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=root
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not _healthy(server.url):
            if process.poll() is not None:
                raise RuntimeError(f"Phoenix exited ({process.returncode}):\n{_tail(server.log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Phoenix not up in {STARTUP_DEADLINE_S:.0f} s:\n{_tail(server.log)}")
            time.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_DEADLINE_S)
        shutil.rmtree(root, ignore_errors=True)


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP `port`, from /proc/net/tcp and tcp6 (any
    process's): {"127.0.0.1"} for a server on the loopback only, "0.0.0.0" or "::" for one on every
    address. An IPv6 socket bound to an IPv4-mapped address (gRPC binds 127.0.0.1 as ::ffff:127.0.0.1)
    takes that IPv4 address only, so it is given as the IPv4 address."""
    found = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != _LISTEN or int(hex_port, 16) != port:
                continue
            # the kernel writes the address as 32-bit words in hex, each word's bytes in memory order
            raw = b"".join(
                int(address[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(address), 8)
            )
            ip = ipaddress.ip_address(raw)
            mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
            found.add(str(mapped or ip))
    return found
