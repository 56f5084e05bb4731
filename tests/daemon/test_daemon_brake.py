"""The daemon's deletion brake across restarts: verdicts live in the state store.

A restart is a new :class:`Daemon` on the same store (and, once, a real daemon process killed
with SIGKILL); the fleet is served by `git daemon` on 127.0.0.1 as in ``test_daemon``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import (
    LIMIT_ONE,
    REMOVE_TWO,
    WIDGET,
    Fleet,
    GitServer,
    free_port,
    http_get,
    poll_and_reconcile,
    reachable,
    until,
)


class World:
    """A served fleet with a brake limit of 1, clusters and a store that outlive daemons."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fleet = Fleet(root)
        self.fleet.commit("limit 1", {"fleet/reconciler.yaml": LIMIT_ONE})
        self.server = GitServer(root)
        self.server.start()
        self.clusters: dict[str, InMemoryCluster] = {}
        self.daemons: list[Daemon] = []

    def daemon(self, allow: str = "") -> Daemon:
        """A (re)started daemon on the same store, clusters and cache."""

        def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
            return self.clusters.setdefault(name, InMemoryCluster())

        source = RemoteSource(self.server.url, "main", "fleet", self.root / "cache")
        daemon = Daemon(
            source,
            SqliteStore(self.root / "state.db"),
            connect,
            lambda: datetime.now(UTC),
            DaemonOptions(allow_deletions=allow),
        )
        self.daemons.append(daemon)
        return daemon

    def intact(self) -> bool:
        return all(self.clusters[n].get(WIDGET) is not None for n in "abc")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    try:
        yield made
    finally:
        for daemon in made.daemons:
            daemon.close()
        made.server.stop()


def test_a_held_commit_stays_held_after_a_restart(world: World) -> None:
    first = world.daemon()
    poll_and_reconcile(first)
    good = first.state.commit
    held = world.fleet.commit("remove two", REMOVE_TWO)
    assert not poll_and_reconcile(first)
    first.close()

    again = world.daemon()
    assert not poll_and_reconcile(again)

    assert again.status()["source"]["held"]["commit"] == held
    assert again.state.commit == good  # the last accepted commit stays in force
    assert again.ready
    assert world.intact()
    record = again.store.commit(Head(held))
    assert record is not None
    assert record.verdict is CommitVerdict.HELD
    assert good != Head(held)


def test_a_commit_pushed_while_the_daemon_was_down_is_held_at_start(world: World) -> None:
    first = world.daemon()
    poll_and_reconcile(first)
    first.close()
    held = world.fleet.commit("remove two while down", REMOVE_TWO)

    started = world.daemon()
    assert not poll_and_reconcile(started)

    brake = started.status()["source"]["held"]
    assert brake["commit"] == held
    assert brake["runtimes"] == ["a", "b"]
    assert world.intact()


def test_an_allow_applies_to_that_commit_only(world: World) -> None:
    first = world.daemon()
    poll_and_reconcile(first)
    held = world.fleet.commit("remove two", REMOVE_TWO)
    assert not poll_and_reconcile(first)
    first.close()

    allowed = world.daemon(allow=held[:12])
    assert poll_and_reconcile(allowed)
    assert allowed.state.commit == Head(held)
    assert world.clusters["a"].get(WIDGET) is None
    assert world.clusters["c"].get(WIDGET) is not None

    world.fleet.commit("add two back", {"fleet/runtimes/a.yaml": _runtime_file("a")})
    world.fleet.commit("add b", {"fleet/runtimes/b.yaml": _runtime_file("b")})
    assert poll_and_reconcile(allowed)
    later = world.fleet.commit("remove two again", REMOVE_TWO)
    assert not poll_and_reconcile(allowed)
    assert allowed.status()["source"]["held"]["commit"] == later
    assert world.clusters["a"].get(WIDGET) is not None


def _runtime_file(name: str) -> str:
    from tests.support.fleet_history import runtime_yaml

    return runtime_yaml(name, "regular", "[{name: widget}]")


def test_a_commit_the_daemon_died_reading_twice_is_refused_by_id(world: World) -> None:
    first = world.daemon()
    poll_and_reconcile(first)
    good = first.state.commit
    first.close()
    crashing = world.fleet.commit("a commit that kills the parser", {"fleet/runtimes/c.yaml": None})
    store = SqliteStore(world.root / "state.db")
    record = CommitRecord(Head(crashing), CommitVerdict.READING, datetime.now(UTC), attempts=2)
    store.decide_commit(record)

    started = world.daemon()
    assert not poll_and_reconcile(started)

    refused = started.status()["source"]["refused"]
    assert refused["commit"] == crashing
    assert "the daemon stopped twice while reading it" in refused["message"]
    assert started.state.commit == good
    assert world.intact()


def test_a_held_commit_survives_sigkill_of_a_real_daemon(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    fleet.commit("limit 1", {"fleet/reconciler.yaml": LIMIT_ONE})
    server = GitServer(tmp_path)
    server.start()
    clusters = tmp_path / "clusters"
    try:
        process, base = _start(tmp_path, server, clusters)
        try:
            until(lambda: "widget-operator" in _text(clusters / "a.yaml"))
            held = fleet.commit("remove two", REMOVE_TWO)
            until(lambda: (_held(base) or {}).get("commit") == held)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        before = {p.name: p.read_bytes() for p in clusters.glob("*.yaml")}

        process, base = _start(tmp_path, server, clusters)
        try:
            until(lambda: (_held(base) or {}).get("commit") == held)
            status = json.loads(http_get(base + "/status")[1])
            assert status["source"]["commit"] != held
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        assert {p.name: p.read_bytes() for p in clusters.glob("*.yaml")} == before
        assert "widget-operator" in _text(clusters / "a.yaml")
    finally:
        server.stop()


def _start(root: Path, server: GitServer, clusters: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {
        **os.environ,
        "RECONCILER_REPO": server.url,
        "RECONCILER_PATH": "fleet",
        "RECONCILER_STATE": f"sqlite:///{root / 'state.db'}",
    }
    command = [sys.executable, "-m", "reconciler", "daemon", "--interval", "1s"]
    command += ["--listen", f"127.0.0.1:{port}", "--snapshot", f"{clusters}/", "--snapshot-create"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )
    base = f"http://127.0.0.1:{port}"
    until(lambda: reachable(base))
    return process, base


def _held(base: str) -> Any:
    return json.loads(http_get(base + "/status")[1])["source"]["held"]


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


# -- a commit never lifts its own brake ------------------------------------

LIMIT_FIVE = LIMIT_ONE.replace("maxDeletionsPerSync: 1", "maxDeletionsPerSync: 5")
ALLOW = LIMIT_ONE.replace("maxDeletionsPerSync: 1", "maxDeletionsPerSync: 1, allow: true")


@pytest.mark.parametrize("settings", [LIMIT_FIVE, ALLOW], ids=["raised limit", "allow: true"])
def test_a_commit_that_loosens_the_brake_is_judged_by_the_limit_in_force(
    world: World, settings: str
) -> None:
    daemon = world.daemon()
    poll_and_reconcile(daemon)
    good = daemon.state.commit
    loosened = world.fleet.commit(
        "remove two, loosen", {**REMOVE_TWO, "fleet/reconciler.yaml": settings}
    )

    assert not poll_and_reconcile(daemon)

    held = daemon.status()["source"]["held"]
    assert held["commit"] == loosened
    assert (held["removals"], held["limit"]) == (2, 1)
    assert "applies once it is accepted" in held["message"]
    assert daemon.state.commit == good
    assert world.intact()


def test_a_raised_limit_applies_once_its_commit_is_accepted(world: World) -> None:
    """The way to raise it: a commit that raises it alone, then the deletion."""
    daemon = world.daemon()
    poll_and_reconcile(daemon)
    world.fleet.commit("limit 5", {"fleet/reconciler.yaml": LIMIT_FIVE})
    assert poll_and_reconcile(daemon)
    removed = world.fleet.commit("remove two", REMOVE_TWO)

    assert poll_and_reconcile(daemon)

    assert daemon.state.commit == Head(removed)
    assert world.clusters["a"].get(WIDGET) is None
    assert world.clusters["c"].get(WIDGET) is not None


def test_a_force_push_back_to_a_commit_accepted_before_is_judged_again(world: World) -> None:
    """Two runtimes added, then git forced back to the commit before them: that commit was
    accepted once, but from the commit in force it removes two runtimes (limit 1), as a revert
    commit would: held, nothing deprovisioned."""
    daemon = world.daemon()
    poll_and_reconcile(daemon)
    before = daemon.state.commit
    assert before is not None
    added: dict[str, str | None] = {f"fleet/runtimes/{n}.yaml": _runtime_file(n) for n in "de"}
    world.fleet.commit("add d and e", added)
    assert poll_and_reconcile(daemon)
    assert world.clusters["d"].get(WIDGET) is not None
    remote = world.root / "remote.git"
    subprocess.run(
        ["git", "-C", str(world.fleet.work), "push", "-qf", str(remote), f"{before.config}:main"],
        check=True,
    )

    assert not poll_and_reconcile(daemon)

    held = daemon.status()["source"]["held"]
    assert held["commit"] == before.text
    assert held["runtimes"] == ["d", "e"]
    assert world.clusters["d"].get(WIDGET) is not None
    assert world.clusters["e"].get(WIDGET) is not None
    record = daemon.store.commit(before)
    assert record is not None
    assert record.verdict is CommitVerdict.HELD
    assert not poll_and_reconcile(daemon)  # it stays held
    assert world.clusters["d"].get(WIDGET) is not None
