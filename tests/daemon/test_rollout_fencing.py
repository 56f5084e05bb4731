"""Rollout writes fenced by the member's lease token: two daemon replicas on one SQLite store
and a real git server, each with its own wall and monotonic clocks (fakes: a lease lapses
without waiting). A replica paused past its lease, and fenced by the other, reads the rollout
at its current version when it resumes and moves it on: its own check passes (its monotonic
clock stood still), its compare-and-set would match, and the store refuses the write in the
statement (one warning line, no crash, nothing told); the live replica moves it on. Once the
paused one beats again, in a new epoch, it writes again. A fenced replica that puts a new
commit in force starts no rollout; the live one does when it takes the commit up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.core.notifications import Notification
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import GitServer
from tests.support.fleet_history import (
    CANARY_SETTINGS,
    channel_yaml,
    default_yaml,
    git,
    manifest_yaml,
    module_yaml,
    tiered_runtime_yaml,
    write_tree,
)

LEASE = timedelta(seconds=30)
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
REFUSED = "not written by this replica"


def _runtime(index: int) -> str:
    return tiered_runtime_yaml(f"rt-{index}", "dev" if index < 2 else "prod")


class Replica:
    """A daemon with its own clocks and the notifications it told."""

    def __init__(self, root: Path, url: str, name: str, clusters: dict[str, InMemoryCluster]):
        self.now = T0
        self.ticks = 0.0
        self.told: list[Notification] = []

        def connect(access: ClusterAccess, runtime: str) -> InMemoryCluster:
            return clusters.setdefault(runtime, InMemoryCluster())

        self.daemon = Daemon(
            RemoteSource(url, "main", "fleet", root / f"cache-{name}"),
            SqliteStore(root / "state.db"),
            connect,
            lambda: self.now,
            DaemonOptions(member=name, lease=LEASE),
            monotonic=lambda: self.ticks,
        )
        self.daemon.notifier = self

    def notify(self, notification: Notification) -> None:
        self.told.append(notification)

    def later(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.ticks += seconds

    def poll(self) -> None:
        self.daemon.poll()
        self.daemon.reconcile_all(wait=True)
        self.daemon.wait_idle()


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.work.mkdir()
        git(root, "init", "-q", "--bare", str(root / "remote.git"))
        files: dict[str, str | None] = {
            "fleet/reconciler.yaml": CANARY_SETTINGS,
            "fleet/modules/widget/module.yaml": module_yaml("widget"),
        }
        for version in ("1.0.0", "2.0.0"):
            files[f"fleet/modules/widget/{version}/manifest.yaml"] = manifest_yaml(
                "widget", version
            )
            files[f"fleet/modules/widget/{version}/default.yaml"] = default_yaml("widget")
        for index in range(6):
            files[f"fleet/runtimes/rt-{index}.yaml"] = _runtime(index)
        write_tree(self.work, files)
        git(self.work, "init", "-q", "-b", "main")
        self.commit("1.0.0")
        self.server = GitServer(root)
        self.server.start()
        self.clusters: dict[str, InMemoryCluster] = {}
        self.replicas: list[Replica] = []

    def commit(self, version: str) -> None:
        write_tree(
            self.work, {"channels/regular.yaml": channel_yaml("regular", {"widget": version})}
        )
        git(self.work, "add", "-A")
        git(self.work, "commit", "-qm", f"widget {version}")
        git(self.work, "push", "-q", str(self.root / "remote.git"), "HEAD:refs/heads/main")

    def replica(self, name: str) -> Replica:
        made = Replica(self.root, self.server.url, name, self.clusters)
        self.replicas.append(made)
        made.daemon.membership.beat()
        return made


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    try:
        yield made
    finally:
        for replica in made.replicas:
            replica.daemon.close()
        made.server.stop()


def test_a_fenced_replicas_rollout_write_is_refused_and_the_live_one_moves_it(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = world.replica("replica-a"), world.replica("replica-b")
    one.poll()
    two.poll()
    world.commit("2.0.0")
    one.poll()  # starts the rollout, under its token
    two.poll()
    store = one.daemon.store
    started = store.latest_rollout()
    assert started is not None
    assert [n.kind for n in one.told] == ["rollout.scheduled", "rollout.wave_started"]

    two.later(LEASE.total_seconds() + 1)  # replica-a stopped here; replica-b beats on
    two.daemon.heartbeat()  # and fences replica-a, whose lease lapsed, taking its runtimes
    two.daemon.wait_idle()
    assert [m.fenced for m in store.members() if m.name == "replica-a"] == [True]

    told = len(one.told)
    one.daemon.rollouts.tick()  # replica-a resumes: the canary is healthy, it would move it on
    one.daemon.rollouts.tick()

    assert store.latest_rollout() == started  # nothing written: same version, same state
    refusals = [r for r in caplog.records if REFUSED in r.getMessage()]
    assert len(refusals) == 1  # logged once, not at every tick
    assert refusals[0].levelno == logging.WARNING
    assert "LostOwnershipError" in refusals[0].getMessage()
    assert "epoch 1 is no longer current" in refusals[0].getMessage()
    assert len(one.told) == told  # a refused move tells nobody

    moved = two.daemon.rollouts.tick()  # the live replica moves it on
    assert moved is not None
    assert moved.version == started.version + 1
    assert moved.healthy_since is not None

    one.now = two.now + timedelta(minutes=30, seconds=1)  # the canary stayed healthy 30m
    one.ticks += 1801
    one.daemon.heartbeat()  # replica-a comes back, in a new epoch
    one.daemon.wait_idle()
    member = one.daemon.membership.member
    assert member is not None
    assert member.epoch > 1
    advanced = one.daemon.rollouts.tick()
    assert advanced is not None
    assert advanced.wave == 1  # written under its new token
    assert advanced.version == moved.version + 1


def test_a_fenced_replica_starts_no_rollout_and_the_live_one_does(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = world.replica("replica-a"), world.replica("replica-b")
    one.poll()
    two.poll()
    two.later(LEASE.total_seconds() + 1)  # replica-a stopped; replica-b fences it
    two.daemon.heartbeat()
    two.daemon.wait_idle()

    world.commit("2.0.0")
    one.poll()  # replica-a resumes and puts the commit in force: its rollout is refused
    store = one.daemon.store
    assert store.latest_rollout() is None
    assert one.told == []
    refusals = [r.getMessage() for r in caplog.records if REFUSED in r.getMessage()]
    assert len(refusals) == 1
    assert "LostOwnershipError" in refusals[0]

    two.poll()  # the live replica takes the commit up and starts the rollout
    started = store.latest_rollout()
    assert started is not None
    assert [n.kind for n in two.told] == ["rollout.scheduled", "rollout.wave_started"]
