"""What tests of the daemon share: a git server (``git daemon`` on 127.0.0.1) serving a fleet
whose commits tests push, free ports, HTTP calls to a daemon, and waiting for a condition."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef
from reconciler.daemon.service import Daemon
from tests.support.fleet_history import BASE_FILES, git, write_tree

SETTINGS_SPEC = "spec: {channelsFrom: {path: ../channels}}"


WIDGET = ObjectRef("apps/v1", "Deployment", "widget-system", "widget-operator")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def until(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


class GitServer:
    """`git daemon` serving a folder of bare repositories on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/remote.git"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                f"--base-path={self.base}",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its per-connection children die with it
        )
        until(self._answers)

    def _answers(self) -> bool:
        done = subprocess.run(["git", "ls-remote", self.url], capture_output=True, check=False)
        return done.returncode == 0

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None


class Fleet:
    """A working copy whose commits are pushed to the served bare repository."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.work.mkdir()
        subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)
        write_tree(self.work, dict(BASE_FILES))
        git(self.work, "init", "-q", "-b", "main")
        self.commit("base")

    def commit(self, message: str, files: dict[str, str | None] | None = None) -> str:
        if files:
            write_tree(self.work, files)
        git(self.work, "add", "-A")
        git(self.work, "commit", "-qm", message, "--allow-empty")
        git(self.work, "push", "-q", str(self.work.parent / "remote.git"), "HEAD:refs/heads/main")
        return git(self.work, "rev-parse", "HEAD").strip()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def http_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def reachable(base: str) -> bool:
    try:
        return http_get(base + "/healthz")[0] == 200
    except OSError:
        return False


def poll_and_reconcile(daemon: Daemon) -> bool:
    """One poll of ``daemon``, then every reconcile it started, to the end; whether it changed
    the commit in force."""
    changed = daemon.poll()
    daemon.reconcile_all(wait=True)
    return changed


def running_version(cluster: InMemoryCluster, ref: ObjectRef) -> str | None:
    """The ``app.kubernetes.io/version`` label of ``ref`` in ``cluster`` (None: not there)."""
    body = cluster.get(ref)
    return None if body is None else str(body["metadata"]["labels"]["app.kubernetes.io/version"])
