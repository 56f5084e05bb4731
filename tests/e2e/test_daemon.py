"""``reconciler daemon`` as a real process, following a ``git daemon`` on 127.0.0.1 and keeping a
runtime on the real API server converged: it installs what a commit declares (O1, O6), refuses
an invalid commit and keeps the last good one in force (C7, S3), deletes nothing while git
cannot be reached (S3), holds a commit over the deletion brake (S5), and, killed with SIGKILL in
the middle of an operation (held there by a plugin step installed through the
``reconciler.steps`` entry point, O7), resumes that operation when started again and finishes it
(O2, O3). A thread stands in for the kubelet and the deployment controller: it marks the test's
operator Deployments Available at their current generation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemons import GitServer, free_port, http_get, reachable
from tests.support.e2e_harness import Kube, TestModule, until
from tests.support.e2e_world import World
from tests.support.step_plugins import install_step_package, write_step_package

HOLD_STEP = """
import os, time
from pathlib import Path
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step

class HoldWhenArmed(Step):
    name = "Hold_When_Armed"
    domain = "test"
    description = "While the test's file 'armed' exists: says so, then waits for it to go."
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation, context):
        folder = Path(os.environ["E2E_HOLD_DIR"])
        if (folder / "armed").exists():
            (folder / "holding").write_text(operation.id)
            deadline = time.monotonic() + 120
            while (folder / "armed").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return StepResult("went on")
"""


class Kubelet:
    """Marks the operators of ``modules`` Available whenever they are not (a thread)."""

    def __init__(self, kubeconfig: Path, modules: list[TestModule]) -> None:
        self.kube = Kube(kubeconfig)
        self.modules = modules
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            for module in self.modules:
                if self.kube.deployment(module.namespace, module.operator) is None:
                    continue
                if not self.kube.available(module.namespace, module.operator):
                    self.kube.make_available(module.namespace, module.operator)

    def __enter__(self) -> Kubelet:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.kube.close()


class Git:
    """The fleet's working copy, pushed to the bare repository ``git daemon`` serves."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.bare = root / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(self.bare)], check=True)
        self.run("init", "-q", "-b", "main")

    def run(self, *args: str) -> str:
        self.work.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", *args],
            cwd=self.work,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def commit(self, message: str) -> str:
        self.run("add", "-A")
        self.run("commit", "-qm", message, "--allow-empty")
        self.run("push", "-q", str(self.bare), "HEAD:refs/heads/main")
        return self.run("rev-parse", "HEAD").strip()


class DaemonProcess:
    """``python -m reconciler daemon`` following ``url`` (its log in ``log``)."""

    def __init__(self, world: World, url: str, plugins: Path, hold: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = world.home / "daemon.log"
        self.command = [
            sys.executable, "-m", "reconciler", "daemon", "--repo", url, "--branch", "main",
            "--path", "fleet", "--interval", "1s", "--resync-interval", "1h",
            "--listen", f"127.0.0.1:{self.port}", "--workers", "2",
            "--kubeconfig-dir", str(world.control_plane.kubeconfig_dir),
            "--cache-dir", str(world.home / "cache"), "--log-format", "json",
        ]  # fmt: skip
        self.env = {**os.environ, "PYTHONPATH": str(plugins), "E2E_HOLD_DIR": str(hold)}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        until(lambda: reachable(self.base), "the daemon answers /healthz", 60)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def status(self) -> dict[str, Any]:
        code, body = http_get(self.base + "/status")
        assert code == 200, body
        document: dict[str, Any] = json.loads(body)
        return document

    def module(self, runtime: str, module: str) -> dict[str, Any]:
        for item in self.status()["runtimes"]:
            if item["runtime"] == runtime:
                for found in item["modules"]:
                    if found["module"] == module:
                        result: dict[str, Any] = found
                        return result
        return {}

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _logged(log: Path) -> list[dict[str, Any]]:
    """The daemon's log so far, its whole lines each parsed as one JSON document."""
    text = log.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    target = tmp_path / "plugins"
    install_step_package(
        write_step_package(tmp_path, "e2e_hold_step", HOLD_STEP, "HoldWhenArmed"), target
    )
    return target


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitServer]:
    server = GitServer(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def test_the_daemon_converges_refuses_holds_survives_an_outage_and_a_sigkill(
    world: World, plugins: Path, git_server: GitServer, tmp_path: Path
) -> None:
    fleet, kube = world.fleet, world.kube
    git = Git(tmp_path)
    fleet.root = git.work / "fleet"
    svc = fleet.module("svc", versions=("1.0.0", "2.0.0"), default=True)
    aux = fleet.module("aux")
    fleet.channel.update({svc.name: "1.0.0", aux.name: "1.0.0"})
    fleet.max_deletions = 1
    runtime = fleet.runtime("rt", [{"name": svc.name}, {"name": aux.name}])
    fleet.write()
    first = git.commit("svc and aux on rt")
    git_server.start()
    hold = tmp_path / "hold"
    hold.mkdir()
    daemon = DaemonProcess(world, git_server.url, plugins, hold)

    def state(module: TestModule) -> str:
        return str(daemon.module(runtime, module.name).get("state"))

    with Kubelet(world.control_plane.kubeconfig, [svc, aux]):
        try:
            daemon.start()
            until(lambda: state(svc) == state(aux) == "Ready", "both modules Ready", 120)
            assert daemon.status()["source"]["commit"].startswith(first[:8])

            # C7: a commit naming a channel that does not exist is refused whole.
            fleet.runtimes[runtime]["channel"] = "nonexistent"
            fleet.write()
            invalid = git.commit("a typo")
            until(
                lambda: (
                    (daemon.status()["source"]["refused"] or {}).get("commit", "")[:8]
                    == invalid[:8]
                ),
                "the invalid commit refused",
            )
            assert daemon.status()["source"]["commit"].startswith(first[:8]), "last good"
            fleet.runtimes[runtime]["channel"] = "regular"

            # S3: git is down while a commit that removes both modules waits there: nothing is
            # deleted, the last good commit stays in force and the outage is reported.
            git_server.stop()
            fleet.runtimes[runtime]["modules"] = []
            fleet.write()
            removal = git.commit("remove svc and aux")
            until(lambda: bool(daemon.status()["source"]["error"]), "the outage reported")
            assert daemon.status()["source"]["commit"].startswith(first[:8])
            assert kube.deployment(svc.namespace, svc.operator) is not None
            # S5: back up, the commit is seen, and held: two deletions, one allowed.
            git_server.start()
            until(
                lambda: (
                    (daemon.status()["source"]["held"] or {}).get("commit", "")[:8] == removal[:8]
                ),
                "the removal held by the deletion brake",
            )
            assert not daemon.status()["source"]["error"]
            assert kube.deployment(svc.namespace, svc.operator) is not None
            assert kube.deployment(aux.namespace, aux.operator) is not None
            # the outage (a failed poll each second) logged once, then once when over; every
            # line of the log is one JSON document (--log-format json)
            messages = [document["message"] for document in _logged(daemon.log)]
            assert len([m for m in messages if "keeping commit" in m]) == 1, messages
            assert "source works again" in messages

            # O7, O2: an upgrade held in the middle by a plugin step; the daemon is killed there.
            fleet.runtimes[runtime]["modules"] = [{"name": svc.name}, {"name": aux.name}]
            fleet.channel[svc.name] = "2.0.0"
            fleet.write()
            (hold / "armed").write_text("")
            upgrade = git.commit("upgrade svc")
            until(lambda: (hold / "holding").exists(), "the upgrade held mid-operation", 120)
            operation = (hold / "holding").read_text()
            daemon.kill()
        except BaseException:
            daemon.stop()
            print(daemon.tail())
            raise
        in_progress = world.runtime_status(runtime)["operation"]
        assert in_progress is not None
        assert (in_progress["id"], in_progress["state"]) == (operation, "in progress")
        operator = kube.deployment(svc.namespace, svc.operator)
        assert operator is not None
        assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"

        # Started again, it resumes that operation and finishes it.
        (hold / "armed").unlink()
        try:
            daemon.start()
            until(
                lambda: (
                    daemon.module(runtime, svc.name).get("version") == "2.0.0"
                    and state(svc) == "Ready"
                ),
                "svc 2.0.0 Ready after the restart",
                120,
            )
            until(
                lambda: daemon.status()["source"]["commit"].startswith(upgrade[:8]),
                "the upgrade's commit in force",
            )
            # the resumed operation's last steps run after the module is Ready; a stop starts
            # no further step, so the test waits for the operation to finish before stopping
            until(
                lambda: (
                    world.reconciler_json("operations", "show", operation)["state"] == "succeeded"
                ),
                "the resumed operation finished",
                120,
            )
        finally:
            daemon.stop()
    shown = world.reconciler_json("operations", "show", operation)
    assert shown["state"] == "succeeded", shown
    assert kube.config_map(svc.namespace, svc.config_map("1.0.0")) is None
    assert kube.config_map(svc.namespace, svc.config_map("2.0.0")) is not None
