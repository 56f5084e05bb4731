"""Real ``reconciler daemon`` processes for tests: started on a repo with snapshot clusters and a
SQLite store of the test's own, their ``/status`` read over HTTP, and stopped with SIGTERM
(callers: the git safety and git credential tests of ``tests/source``, and the test of a
SIGTERM during the daemon's start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.daemons import free_port, http_get, reachable, until

#: The head of a fleet's ``reconciler.yaml`` (a Settings document), its ``spec`` to follow.
SETTINGS_HEAD = "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"


def channels_git_settings(git: str) -> str:
    """A ``reconciler.yaml`` whose channels come from the git remote ``git`` (branch main)."""
    return SETTINGS_HEAD + f"spec:\n  channelsFrom:\n    git: {json.dumps(git)}\n    ref: main\n"


def daemon_command(tmp_path: Path, repo: str, port: int, *args: str) -> list[str]:
    """The command line of a ``reconciler daemon`` following ``repo`` (its ``fleet`` folder,
    polled every second) onto snapshot clusters in ``tmp_path/clusters/`` and a SQLite store in
    ``tmp_path``, listening on ``port`` of 127.0.0.1."""
    return [
        sys.executable,
        "-m",
        "reconciler",
        "daemon",
        "--repo",
        repo,
        "--path",
        "fleet",
        "--interval",
        "1s",
        "--listen",
        f"127.0.0.1:{port}",
        "--snapshot",
        f"{tmp_path / 'clusters'}/",
        "--snapshot-create",
        "--state",
        f"sqlite:///{tmp_path / 'state.db'}",
        *args,
    ]


def start_daemon_process(
    tmp_path: Path, repo: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """A ``reconciler daemon`` process (:func:`daemon_command`), returned once its HTTP port
    answers, with the port's base URL."""
    port = free_port()
    process = subprocess.Popen(
        daemon_command(tmp_path, repo, port, *args),
        env=env or dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    until(lambda: reachable(base))
    return process, base


def daemon_status(base: str) -> dict[str, Any]:
    """The daemon's ``GET /status`` document."""
    status: dict[str, Any] = json.loads(http_get(base + "/status")[1])
    return status


def stop_daemon_process(process: subprocess.Popen[str], seconds: float = 10) -> str:
    """SIGTERM; the daemon must be gone within ``seconds``. Returns its stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        _, errors = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(f"the daemon did not stop within {seconds}s") from None
    assert process.returncode == 0, errors
    return errors
