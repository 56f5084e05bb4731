"""What tests of the daemon share: a git server (``git daemon`` on 127.0.0.1) serving a fleet
whose commits tests push, a daemon following it onto in-memory clusters (the ``served`` fixture),
commits that trip the deletion brake, a daemon on a fake wall clock (:class:`Clocked`) and a
channels repository it reads from git, free ports, HTTP calls to a daemon, and waiting for a
condition."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.daemon.service import Daemon
from reconciler.operations.model import CommitVerdict
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.fleet_history import BASE_FILES, SETTINGS, git, write_tree

SETTINGS_SPEC = "spec: {channelsFrom: {path: ../channels}}"
#: The fleet's settings with a deletion brake of one runtime per sync.
LIMIT_ONE = SETTINGS.replace(
    SETTINGS_SPEC,
    "spec: {channelsFrom: {path: ../channels}, deletionBrake: {maxDeletionsPerSync: 1}}",
)
#: A commit's changes that delete two runtimes (past a brake of one).
REMOVE_TWO: dict[str, str | None] = {f"fleet/runtimes/{n}.yaml": None for n in "ab"}
#: Where the fake wall clocks of daemons start.
T0 = datetime(2026, 11, 25, 4, tzinfo=UTC)


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


class ServedDaemon(NamedTuple):
    """A daemon following the fleet that ``server`` serves, onto in-memory clusters made at their
    first connection (by runtime name)."""

    fleet: Fleet
    server: GitServer
    daemon: Daemon
    clusters: dict[str, InMemoryCluster]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedDaemon]:
    """A daemon (never started: tests call its ticks) following a served fleet, with a SQLite
    store in ``tmp_path``; its scheduler, store and git server stopped at the end."""
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    clusters: dict[str, InMemoryCluster] = {}

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster())

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    daemon = Daemon(source, SqliteStore(tmp_path / "state.db"), connect, lambda: datetime.now(UTC))
    try:
        yield ServedDaemon(fleet, server, daemon, clusters)
    finally:
        if daemon.ticks.scheduler is not None:
            daemon.ticks.scheduler.shutdown(wait=True)
        daemon.close()
        server.stop()


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


def commit_and_push(work: Path, bare: Path, message: str) -> None:
    """Commit everything in ``work`` (a git repository from the first call on) and push it to
    the ``main`` branch of ``bare``."""
    if not (work / ".git").exists():
        git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", message)
    git(work, "push", "-q", str(bare), "HEAD:refs/heads/main")


def channels_source_in(cache: Path) -> Callable[[str, str, str], RemoteSource]:
    """A daemon's ``make_source`` for ``channelsFrom.git``, its clones kept in ``cache``."""

    def make(url: str, ref: str, path: str) -> RemoteSource:
        return RemoteSource(url, ref, path, cache)

    return make


class Clocked:
    """A daemon on the served fleet, with a clock the test moves."""

    def __init__(self, root: Path, server: GitServer) -> None:
        self.now = T0
        self.clusters: dict[str, InMemoryCluster] = {}
        source = RemoteSource(server.url, "main", "fleet", root / "cache")
        self.daemon = Daemon(
            source,
            SqliteStore(root / "state.db"),
            self.connect,
            lambda: self.now,
            make_source=channels_source_in(root / "channels-cache"),
        )

    def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        return self.clusters.setdefault(name, InMemoryCluster())

    def later(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def verdict(self, commit: str) -> CommitVerdict | None:
        record = self.daemon.store.commit(Head(commit))
        return record.verdict if record is not None else None
