"""The daemon's log, one line per event: a failed run is one line, a failure that repeats at
each retry is logged once per change of state (then one line when it works again), a message
with line breaks stays one text line, every ``--log-format json`` line parses, and an exception
that ends a thread is one line without a traceback, and a scheduled job failing alike at each
run is one line, then one when it works again. On the in-memory cluster and a fake clock;
the log read as pytest captures it, or as the daemon's handler writes it to stderr."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ModuleRef
from reconciler.daemon.logs import setup_logging
from reconciler.daemon.scheduler import guarded
from reconciler.daemon.service import Daemon
from reconciler.errors import PermanentError, StoreError
from reconciler.operations.store import SqliteStore
from tests.support.lifecycle_helpers import repo
from tests.support.runs import Clock
from tests.support.sources import UnusedSource


def _said(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    """The lines logged at INFO and up that hold every one of ``words``."""
    return [
        f"{r.levelname} {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.INFO and all(w in r.getMessage() for w in words)
    ]


def test_a_failure_repeated_at_each_run_is_logged_once_then_its_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cluster, clock = InMemoryCluster(), Clock()
    refused = PermanentError("namespaces is forbidden")
    cluster.faults.append(Fault("apply", refused, times=3))
    daemon = Daemon(UnusedSource(), SqliteStore(tmp_path / "state.db"), lambda a, n: cluster, clock)
    daemon.state.follow(Head("c0ffee" * 6 + "c0ff"), repo(ModuleRef("widget")))
    try:
        for _ in range(3):  # three runs, each a new operation failing alike
            daemon.reconcile("rt")
            clock.advance(60)
        daemon.reconcile("rt")  # the fault is gone
    finally:
        daemon.close()

    (failed,) = _said(caplog, "runtime rt", "forbidden")  # not one an INFO and an ERROR a run
    assert failed.startswith("ERROR runtime rt: provision ")
    assert failed.endswith(" failed: step Ensure_System_Namespace failed: namespaces is forbidden")
    (recovered,) = _said(caplog, "runtime rt", "recovered")
    assert recovered.startswith("INFO runtime rt: recovered: update ")


@pytest.fixture
def stderr_log(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    """The daemon's own handler on stderr (put back as pytest had it afterwards)."""
    root = logging.getLogger()
    handlers, level, hook = root.handlers[:], root.level, threading.excepthook
    try:
        yield capsys
    finally:
        root.handlers[:], threading.excepthook = handlers, hook
        root.setLevel(level)


MULTI_LINE = "list Deployment: 500 Internal Server Error\nHTTP response headers: {}\nbody"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_each_event_is_one_line_in_either_format(
    stderr_log: pytest.CaptureFixture[str], log_format: str
) -> None:
    setup_logging(log_format)
    daemon_log = logging.getLogger("reconciler.daemon")

    daemon_log.warning("runtime rt: %s", MULTI_LINE, extra={"runtime": "rt"})
    daemon_log.info("watching 3 kinds on 1 clusters")

    lines = stderr_log.readouterr().err.splitlines()
    assert len(lines) == 2
    if log_format == "json":
        first = json.loads(lines[0])
        assert first["message"] == f"runtime rt: {MULTI_LINE}"
        assert (first["level"], first["runtime"]) == ("warning", "rt")
        assert "module" not in first  # no module of ours (not the Python module that logged)
        assert json.loads(lines[1])["message"] == "watching 3 kinds on 1 clusters"
    else:
        assert lines[0].endswith("runtime rt: " + MULTI_LINE.replace("\n", "\\n"))


def test_an_exception_that_ends_a_thread_is_one_line(
    stderr_log: pytest.CaptureFixture[str],
) -> None:
    setup_logging("text")

    def broken() -> None:
        raise KeyError("spec")

    thread = threading.Thread(target=broken, name="watch")
    thread.start()
    thread.join()

    (line,) = stderr_log.readouterr().err.splitlines()
    assert "ERROR reconciler.daemon: thread watch: internal error: KeyError: 'spec' (at " in line
    assert "Traceback" not in line


def test_a_job_failing_alike_at_each_run_is_logged_once_then_works_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    daemon = Daemon(UnusedSource(), SqliteStore(tmp_path / "state.db"), None, Clock())  # type: ignore[arg-type]
    failures = [StoreError("database is locked")] * 3
    job = guarded(daemon, "heartbeat", lambda: _raise_first(failures), lambda: "in 5s")
    try:
        for _ in range(4):  # three failures alike, then a success
            job()
    finally:
        daemon.close()

    assert _said(caplog, "heartbeat") == [
        "WARNING heartbeat: database is locked (StoreError, transient: retried in 5s)",
        "INFO heartbeat works again",
    ]


def _raise_first(errors: list[StoreError]) -> None:
    if errors:
        raise errors.pop()
