"""The daemon tells people about the commits it refuses or holds: once per commit, by the
replica whose verdict stands (not again at the next poll, after a restart, or by another
replica taking the verdict up), with the first error's file and line, or the removals and the
flag that lets a held commit through; end to end to a local HTTP receiver, with the endpoints of
the commit in force."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.endpoints import NotificationSettings
from reconciler.core.model import ClusterAccess
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.daemon.service import Daemon
from reconciler.notify.delivery import Delivery
from reconciler.notify.secrets import SecretReader
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import (
    REMOVE_TWO,
    SETTINGS_SPEC,
    Fleet,
    GitServer,
    free_port,
    http_get,
    poll_and_reconcile,
    reachable,
    until,
)
from tests.support.fleet_history import SETTINGS, runtime_yaml
from tests.support.receiver import LOOPBACK, Receiver, loopback_transport
from tests.support.replicas import Interleaved, replicas_on_one_store
from tests.support.replicas import World as Replicas
from tests.support.sample_fleet import check_document

TYPO: dict[str, str | None] = {
    "fleet/runtimes/a.yaml": runtime_yaml("a", "reguler", "[{name: widget}]")
}


class Told:
    """A notifier that keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[Notification] = []

    def notify(self, notification: Notification) -> None:
        self.told.append(notification)


class World:
    """A served fleet (brake limit 1), clusters and a store that outlive daemons."""

    def __init__(self, root: Path, receiver: Receiver) -> None:
        self.root = root
        spec = (
            "spec:\n  channelsFrom: {path: ../channels}\n"
            "  deletionBrake: {maxDeletionsPerSync: 1}\n"
            "  notifications:\n    kubernetesEvents: false\n    endpoints:\n"
            f"      - {{name: hook, type: webhook, url: '{receiver.url}/hook'}}\n"
            "      - {name: chat, type: slack, urlFrom: {file: chat-url}, events: [commit.*]}\n"
        )
        self.fleet = Fleet(root)
        self.fleet.commit(
            "settings", {"fleet/reconciler.yaml": SETTINGS.replace(SETTINGS_SPEC, spec)}
        )
        self.server = GitServer(root)
        self.server.start()
        self.clusters: dict[str, InMemoryCluster] = {}
        self.daemons: list[Daemon] = []

    def daemon(self) -> tuple[Daemon, Told]:
        def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
            return self.clusters.setdefault(name, InMemoryCluster())

        source = RemoteSource(self.server.url, "main", "fleet", self.root / "cache")
        store = SqliteStore(self.root / "state.db")
        daemon = Daemon(source, store, connect, lambda: datetime.now(UTC))
        daemon.notifier = told = Told()
        self.daemons.append(daemon)
        return daemon, told


@pytest.fixture
def world(tmp_path: Path, receiver: Receiver) -> Iterator[World]:
    made = World(tmp_path, receiver)
    try:
        yield made
    finally:
        for daemon in made.daemons:
            daemon.close()
        made.server.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver().start()
    yield served
    served.close()


def test_a_refused_commit_is_told_once_with_its_first_error(world: World) -> None:
    daemon, told = world.daemon()
    poll_and_reconcile(daemon)
    bad = world.fleet.commit("typo", TYPO)

    poll_and_reconcile(daemon)
    poll_and_reconcile(daemon)  # still refused: not told again
    again, told_again = world.daemon()  # a restart, or another replica on the same store
    poll_and_reconcile(again)

    (refused,) = told.told
    assert told_again.told == []
    assert refused.kind is NotificationKind.COMMIT_REFUSED
    assert refused.commit == bad
    assert refused.key == f"refused-{bad}"
    assert refused.summary.startswith(f"commit {bad[:12]} refused: 1 error(s); still on ")
    assert refused.details["errors"] == 1
    assert refused.details["file"] == "fleet/runtimes/a.yaml"
    assert refused.details["line"] == 5
    reason = str(refused.details["reason"])
    assert reason.startswith("fleet/runtimes/a.yaml:")
    assert "channel 'reguler' does not exist" in reason


def test_a_held_commit_is_told_with_the_flag_that_lets_it_through(world: World) -> None:
    daemon, told = world.daemon()
    poll_and_reconcile(daemon)
    held = world.fleet.commit("remove two", REMOVE_TWO)

    poll_and_reconcile(daemon)
    poll_and_reconcile(daemon)

    (notification,) = told.told
    assert notification.kind is NotificationKind.COMMIT_HELD
    assert notification.commit == held
    assert notification.details == {
        "removals": 2,
        "limit": 1,
        "allowWith": f"--allow-deletions {held[:12]}",
    }


def test_verdicts_reach_the_endpoints_of_the_commit_in_force(
    world: World, receiver: Receiver
) -> None:
    daemon, _ = world.daemon()

    def in_force() -> NotificationSettings:
        repo = daemon.state.repo
        return repo.settings.notifications if repo is not None else NotificationSettings()

    waits: list[float] = []
    delivery = Delivery(
        in_force, SecretReader(), pause=waits.append, transport=loopback_transport()
    )
    daemon.notifier = delivery
    receiver.fail_times = 2
    poll_and_reconcile(daemon)
    refused = world.fleet.commit("typo", TYPO)
    poll_and_reconcile(daemon)
    fixed: dict[str, str | None] = {
        "fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: widget}]")
    }
    world.fleet.commit("fix the typo", fixed)
    poll_and_reconcile(daemon)
    held = world.fleet.commit("remove two", REMOVE_TWO)
    poll_and_reconcile(daemon)
    delivery.drain()
    delivery.close()

    assert [(r.path, r.body["kind"], r.body["commit"]) for r in receiver.accepted] == [
        ("/hook", "commit.refused", refused),
        ("/hook", "commit.held", held),
    ]
    assert waits == [1.0, 2.0, 1.0, 2.0]  # the receiver failed each twice first
    status = daemon.status()
    check_document(status, "DaemonStatus")
    assert status["notifications"] == {
        "queued": 0,
        "endpoints": [
            {
                "name": "chat",  # its URL is a file of a folder this daemon was not given
                "result": "failed",
                "kind": "commit.held",
                "commit": held,
                "error": "file chat-url: the daemon was given no --notification-secrets-dir",
            },
            {
                "name": "hook",
                "result": "delivered",
                "kind": "commit.held",
                "commit": held,
                "error": "",
            },
        ],
    }


def test_the_daemon_command_sends_with_secrets_from_its_folder(
    world: World, receiver: Receiver, tmp_path: Path
) -> None:
    secrets = tmp_path / "notification-secrets"
    secrets.mkdir()
    (secrets / "chat-url").write_text(receiver.url + "/services/T0/B0/s3cr3t\n")
    port = free_port()
    env = {
        **os.environ,
        "RECONCILER_REPO": world.server.url,
        "RECONCILER_PATH": "fleet",
        "RECONCILER_STATE": f"sqlite:///{tmp_path / 'process.db'}",
        "RECONCILER_NOTIFICATION_SECRETS_DIR": str(secrets),
        "RECONCILER_NOTIFICATION_ALLOW_NETWORKS": LOOPBACK,
    }
    command = [sys.executable, "-m", "reconciler", "daemon", "--interval", "1s"]
    command += ["--listen", f"127.0.0.1:{port}", "--snapshot", f"{tmp_path / 'clusters'}/"]
    command += ["--snapshot-create"]
    log = tmp_path / "daemon.log"
    with log.open("w") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: reachable(base))
        until(lambda: http_get(base + "/readyz")[0] == 200)
        bad = world.fleet.commit("typo", TYPO)
        until(lambda: len(receiver.accepted) == 2)
        counted = ('endpoint="chat",result="delivered"', 'endpoint="hook",result="delivered"')
        until(lambda: all(c in http_get(base + "/metrics")[1] for c in counted))  # after 201
        metrics = http_get(base + "/metrics")[1]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

    assert {(r.path, r.body.get("kind") or r.body["text"][:16]) for r in receiver.accepted} == {
        ("/hook", "commit.refused"),
        ("/services/T0/B0/s3cr3t", "[commit.refused]"),
    }
    assert all(bad in str(r.body) for r in receiver.accepted)
    assert 'reconciler_notifications_total{endpoint="chat",result="delivered"} 1.0' in metrics
    assert 'reconciler_notifications_total{endpoint="hook",result="delivered"} 1.0' in metrics
    assert "s3cr3t" not in log.read_text()


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    """Replicas on one store and git server (:mod:`tests.support.replicas`)."""
    with replicas_on_one_store(tmp_path) as made:
        yield made


def test_replicas_deciding_one_commit_at_once_tell_it_once(replicas: Replicas) -> None:
    """replica-b reads the commit, replica-a refuses it meanwhile, then replica-b's own refusal
    finds replica-a's standing: only replica-a tells."""
    one, two = replicas.replica("replica-a"), replicas.replica("replica-b")
    told_one, told_two = Told(), Told()
    one.daemon.notifier, two.daemon.notifier = told_one, told_two
    one.daemon.poll()
    bad = replicas.fleet.commit("bad", {"fleet/runtimes/a.yaml": "apiVersion: nope\n"})
    two.daemon.store = Interleaved(two.daemon.store, "decide_commit", one.daemon.poll)

    two.daemon.poll()

    assert [(n.kind, n.commit) for n in told_one.told] == [(NotificationKind.COMMIT_REFUSED, bad)]
    assert told_two.told == []
