"""Starts a Phoenix server (`phoenix serve`) for the tests, both its listeners on 127.0.0.1 only.

Run with .venv-phoenix's Python (`make phoenix-venv`); tests/phoenix_server.py does, and sets the ports and
the database's folder through Phoenix's own variables: PHOENIX_PORT (HTTP: the UI, the REST API, OTLP/HTTP at
/v1/traces), PHOENIX_GRPC_PORT (OTLP/gRPC) and PHOENIX_WORKING_DIR (its SQLite database).

Every server a test starts listens on 127.0.0.1 only. PHOENIX_HOST sets the HTTP listener's address, but
Phoenix's gRPC listener binds `[::]:PORT`, every address, whatever the variable says
(phoenix/server/grpc_server.py: `server.add_insecure_port(f"[::]:{self._port}")`), so this wraps
`grpc.aio.server` to bind its servers' ports on 127.0.0.1 instead, then runs Phoenix's command-line main.
The tests need only span ingestion and the REST API, so nothing else is on: no fetching from the internet
(which also turns Phoenix's telemetry off; the tests' machines reach no more than PyPI), no agent assistant
and no server-side shell (one of its tools), no MCP server.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import grpc.aio
from phoenix.server.main import main

LOOPBACK = "127.0.0.1"
_grpc_aio_server = grpc.aio.server


def _loopback_grpc_server(*args: Any, **kwargs: Any) -> grpc.aio.Server:
    """`grpc.aio.server`, whose add_insecure_port binds 127.0.0.1 where it was asked for `[::]`."""
    server = _grpc_aio_server(*args, **kwargs)
    add_insecure_port = server.add_insecure_port

    def on_loopback(address: str) -> int:
        host, separator, port = address.rpartition(":")
        return add_insecure_port(f"{LOOPBACK}{separator}{port}" if host == "[::]" else address)

    server.add_insecure_port = on_loopback  # type: ignore[method-assign]
    return server


if __name__ == "__main__":
    os.environ.update(
        PHOENIX_HOST=LOOPBACK,
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        PHOENIX_DISABLE_AGENT_ASSISTANT="true",
        PHOENIX_AGENTS_DISABLE_BASH="true",  # the assistant's shell, off twice over
        PHOENIX_ENABLE_MCP_SERVER="false",
    )
    grpc.aio.server = _loopback_grpc_server
    sys.argv = ["phoenix", "serve"]
    main()
