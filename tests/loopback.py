"""The server lifecycle the loopback test fakes share, so each fake holds only what it fakes."""

from __future__ import annotations

import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackHTTPServer(ThreadingHTTPServer):
    """The HTTP server of a `LoopbackServer`; handlers reach their fake through ``owner``."""

    daemon_threads = True
    owner: Any


class LoopbackServer:
    """Serves ``handler_class`` on ``host`` in a daemon thread; use as ``with Fake() as fake:``.

    ``host`` is 127.0.0.1, or the Docker bridge address (172.17.0.1) for steps in containers; never
    0.0.0.0, so a fake is never reachable from outside the machine. Handlers sleep on ``_stopping`` so
    that ``stop`` is never held up.
    """

    handler_class: type[BaseHTTPRequestHandler]
    server_class: type[LoopbackHTTPServer] = LoopbackHTTPServer

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self._stopping = threading.Event()
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind the port (ephemeral unless one was given) and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = self.server_class((self.host, self._requested_port), self.handler_class)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; handlers waiting on ``_stopping`` wake up at once so nothing lingers."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return int(self._httpd.server_address[1])

    def serve_until_signalled(self, address: str) -> int:
        """The command-line mode: print `address` once serving, serve until SIGINT or SIGTERM. Both signals
        only set an event, installed before the address is printed: a KeyboardInterrupt raised anywhere
        else in the main thread (seen on a loaded machine) would end the process with -2."""
        stopped = threading.Event()
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop_signal, lambda *_: stopped.set())
        print(address, flush=True)
        try:
            stopped.wait()
        finally:
            self.stop()
        return 0
