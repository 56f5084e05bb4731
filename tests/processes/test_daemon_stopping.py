"""``reconciler daemon`` as a real process on the real API server, sent SIGTERM while its
operation waits for an operator that never becomes available (no kubelet; a run never waits for
it: it ends "not yet", to be run again): it exits 0 at once, the operation resumable, and a
daemon started again finishes the operation once the operator is available. The test's time
limit guards the exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.operations.model import StepState
from reconciler.operations.store import SqliteStore
from tests.support.daemons import GitServer, free_port, reachable
from tests.support.e2e_harness import Fleet, Kube, until
from tests.support.e2e_world import World
from tests.support.fleet_history import git
from tests.support.kube_control_plane import ControlPlane
from tests.support.stopping import steps_of


@pytest.fixture
def world(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[World]:
    kube = Kube(kube_control_plane.kubeconfig)
    fleet = Fleet(tmp_path / "repo", uuid.uuid4().hex[:6])
    world = World(kube_control_plane, kube, fleet, tmp_path)
    try:
        yield world
    finally:
        try:
            world.cleanup()
        finally:
            kube.close()


class _Daemon:
    """``python -m reconciler daemon`` on the test's repository, store and control plane."""

    def __init__(self, world: World, url: str, root: Path, runtime: str) -> None:
        self.runtime = runtime
        self.state = root / "state.db"
        self.log = root / "daemon.log"
        self.env = dict(os.environ)
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
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.mark.timeout(240)
def test_sigterm_while_waiting_for_an_operator_exits_0_at_once_and_a_restart_finishes(
    world: World, tmp_path: Path
) -> None:
    fleet, kube = world.fleet, world.kube
    module = fleet.module("op")
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    fleet.write()
    (tmp_path / "git").mkdir()
    git(tmp_path / "git", "init", "-q", "--bare", "remote.git")
    git(fleet.root, "init", "-q", "-b", "main")
    git(fleet.root, "add", "-A")
    git(fleet.root, "commit", "-qm", "one module")
    git(fleet.root, "push", "-q", str(tmp_path / "git" / "remote.git"), "HEAD:main")
    server = GitServer(tmp_path / "git")
    server.start()
    daemon = _Daemon(world, server.url, tmp_path, runtime)
    try:
        process = daemon.start()
        until(
            lambda: (
                kube.deployment(module.namespace, module.operator) is not None
                and daemon.step("Check_Modules_Ready") is StepState.RETRYING
            ),
            "the operation waits for its operator",
            120,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait() == 0  # within the test's limit
        assert daemon.step("Apply_Modules") in (StepState.DONE, StepState.PENDING)  # none failed
        assert daemon.step("Check_Modules_Ready") in (StepState.PENDING, StepState.RETRYING)

        kube.make_available(module.namespace, module.operator)
        daemon.start()
        until(lambda: daemon.step("Record_Status") is StepState.DONE, "the operation finished", 120)
    except BaseException:
        print(daemon.log.read_text(errors="replace")[-3000:])
        raise
    finally:
        daemon.kill()
        server.stop()
