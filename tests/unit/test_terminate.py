"""SIGTERM's handler: whatever the interrupted main thread was doing, the run is marked failed, in place
or by the detached helper, and the process exits 128 + the signal."""

import logging
import signal

import pytest

import cli.main


class Exited(Exception):
    pass


@pytest.fixture
def calls(monkeypatch):
    calls = []
    monkeypatch.setattr(logging, "raiseExceptions", logging.raiseExceptions)  # the handler turns it off
    monkeypatch.setattr(cli.main.os, "_exit", lambda code: (_ for _ in ()).throw(Exited(code)))
    monkeypatch.setattr(cli.main, "mark_runs_failed_after_exit", lambda: calls.append("helper"))
    return calls


def terminate() -> int:
    with pytest.raises(Exited) as exited:
        cli.main._terminate(signal.SIGTERM, None)
    return exited.value.args[0]


def test_marks_in_place_and_exits_with_the_signal_code(monkeypatch, calls):
    monkeypatch.setattr(cli.main, "mark_runs_failed", lambda abandoned: calls.append(("mark", abandoned)))
    assert terminate() == 128 + signal.SIGTERM
    assert calls == [("mark", False)]


def test_a_store_that_cannot_be_written_hands_the_marking_to_the_helper(monkeypatch, calls):
    def locked(abandoned: bool) -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(cli.main, "mark_runs_failed", locked)
    assert terminate() == 128 + signal.SIGTERM
    assert calls == ["helper"]


def test_a_log_line_that_cannot_be_written_does_not_stop_the_marking(monkeypatch, calls):
    """The main thread stopped mid-write to stderr: writing again raises "reentrant call"."""

    class ReentrantStderr:
        def write(self, text: str) -> int:
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

        def flush(self) -> None:
            pass

    cli.main.configure_logging()  # our handler writes to whatever sys.stderr is now
    monkeypatch.setattr(cli.main.sys, "stderr", ReentrantStderr())
    monkeypatch.setattr(cli.main, "mark_runs_failed", lambda abandoned: calls.append("mark"))
    assert terminate() == 128 + signal.SIGTERM
    assert calls == ["mark"]
