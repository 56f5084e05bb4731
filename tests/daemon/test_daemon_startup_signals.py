"""A SIGTERM that reaches the daemon while it starts stops it as any SIGTERM does.

The daemon used to install its SIGTERM handling only after its HTTP port answered and its
scheduler ran: a SIGTERM sent as soon as the port answered (what the tests stopping a daemon
do, and an orchestrator may) now and then met the default action and ended the process with
-15, mid-start. Here the daemon is held in its start on purpose, deterministically: its
``--webhook-secret-file`` is a named pipe, read before the port opens, that the test writes only
after sending SIGTERM. A real ``reconciler daemon`` follows a local bare repository. A start
that fails after taking SIGTERM over gives it back: run in-process (as CLI tests do), it leaves
the process's handlers, wakeup fd and sockets as they were.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.daemon_processes import daemon_command
from tests.support.daemons import Fleet, free_port, until


def _write_end_once_read(fifo: Path) -> int:
    """A write end of ``fifo``, opened once a process opened it to read (which it then waits
    for: a reader of a named pipe waits for its writer)."""
    opened: list[int] = []

    def opens() -> bool:
        try:
            opened.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        return bool(opened)

    until(opens)
    return opened[0]


def test_a_sigterm_while_the_daemon_starts_stops_it_once_started(tmp_path: Path) -> None:
    Fleet(tmp_path)
    secret = tmp_path / "secret"
    os.mkfifo(secret)
    command = daemon_command(
        tmp_path, str(tmp_path / "remote.git"), free_port(), "--webhook-secret-file", str(secret)
    )
    daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        writer = _write_end_once_read(secret)
        daemon.send_signal(signal.SIGTERM)  # the daemon waits in its start, reading the pipe
        os.write(writer, b"hook-secret\n")
        os.close(writer)
        _, errors = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()

    assert daemon.returncode == 0, f"ended by {daemon.returncode}; its log:\n{errors[-2000:]}"
    assert "stopping: letting running steps finish" in errors
    assert "Traceback" not in errors


def _wakeup_fd() -> int:
    """The process's signal wakeup fd now (-1: none), left as it was."""
    current = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(current)
    return current


def test_a_start_that_fails_leaves_the_signals_as_they_were(tmp_path: Path) -> None:
    Fleet(tmp_path)
    empty = tmp_path / "secret"
    empty.write_text("\n")  # refused when the port is about to open, after the signals
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), _wakeup_fd())
    args = ["daemon", "--repo", str(tmp_path / "remote.git"), "--path", "fleet"]
    args += ["--state", f"sqlite:///{tmp_path / 'state.db'}", "--listen", "127.0.0.1:0"]
    args += ["--snapshot", f"{tmp_path / 'clusters'}/", "--snapshot-create"]

    result = CliRunner().invoke(cli, [*args, "--webhook-secret-file", str(empty)])

    assert result.exit_code == 2, result.output
    assert "the file is empty" in result.output
    after = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), _wakeup_fd())
    assert after == before
