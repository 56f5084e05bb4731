"""``python -m reconciler daemon`` as a real process on a test's repository (served over git),
SQLite store and the real control plane, with a ``sitecustomize`` of the test's own on its
PYTHONPATH (a wait made an hour long, so a signal surely lands in it); the state of its
operation's steps read from the store. Callers: tests/processes/test_daemon_stopping.py,
tests/processes/test_hook_sigkill.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from reconciler.operations.model import StepState
from reconciler.operations.store import SqliteStore
from tests.support.daemons import GitServer, free_port, reachable
from tests.support.e2e_harness import until
from tests.support.e2e_world import World
from tests.support.fleet_history import git
from tests.support.stopping import steps_of


def served_repo(repo: Path, root: Path, message: str) -> GitServer:
    """``repo`` committed (``message``) and pushed to a bare remote in ``root/git``, served
    over ``git://`` (started; the caller stops it)."""
    (root / "git").mkdir()
    git(root / "git", "init", "-q", "--bare", "remote.git")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    git(repo, "push", "-q", str(root / "git" / "remote.git"), "HEAD:main")
    server = GitServer(root / "git")
    server.start()
    return server


class KubeDaemon:
    """``python -m reconciler daemon`` on the test's repository, store and control plane."""

    def __init__(self, world: World, url: str, root: Path, runtime: str, site: str) -> None:
        self.runtime = runtime
        self.state = root / "state.db"
        self.log = root / "daemon.log"
        (root / "site").mkdir(exist_ok=True)
        (root / "site" / "sitecustomize.py").write_text(site)
        self.env = {**os.environ, "PYTHONPATH": str(root / "site")}
        self.port = free_port()
        self.command = [
            sys.executable, "-m", "reconciler", "daemon", "--repo", url, "--branch", "main",
            "--interval", "1s", "--resync-interval", "1h", "--no-watch", "--workers", "2",
            "--listen", f"127.0.0.1:{self.port}", "--state", f"sqlite:///{self.state}",
            "--kubeconfig-dir", str(world.control_plane.kubeconfig_dir),
            "--cache-dir", str(root / "cache"),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.process = process
        until(lambda: reachable(f"http://127.0.0.1:{self.port}"), "the daemon answers", 60)
        return process

    def step(self, name: str) -> StepState | None:
        """The state of step ``name`` of the runtime's operation (None: none yet)."""
        if not self.state.exists():
            return None
        store = SqliteStore(self.state)
        try:
            operations = store.operations(self.runtime, limit=1)
        finally:
            store.close()
        return steps_of(operations[0]).get(name) if operations else None

    def kill(self) -> None:
        """SIGKILL, when it still runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def shown_and_stopped(daemon: KubeDaemon, server: GitServer) -> Iterator[KubeDaemon]:
    """While inside: ``daemon``; its log's end printed when the test fails; then it is killed
    and ``server`` stopped."""
    try:
        yield daemon
    except BaseException:
        print(daemon.log.read_text(errors="replace")[-3000:])
        raise
    finally:
        daemon.kill()
        server.stop()
