"""Daemon replicas sharing one state store, in one process: each a :class:`Replica` (a daemon with
its own member name, wall clock and monotonic clock, so a lease runs out without waiting) on one
SQLite file and one real git server (:class:`World`, the ``world`` fixture); and
:class:`Interleaved`, a replica's store that lets another replica act right after one of its calls,
so an interleaving of two replicas is exact. Callers: the membership, shared commit and
notification tests of ``tests/daemon``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.channels import MakeSource
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.operations.runner import Connect
from reconciler.operations.store import SqliteStore, StateStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import T0, Fleet, GitServer

#: The members' lease.
LEASE = timedelta(seconds=30)


class Replica:
    """A daemon with its own clocks."""

    def __init__(
        self,
        world: World,
        name: str,
        *,
        connect: Connect | None = None,
        make_source: MakeSource | None = None,
    ) -> None:
        self.now = T0
        self.ticks = 0.0
        self.world = world
        source = RemoteSource(world.git.url, "main", "fleet", world.root / f"cache-{name}")
        options = DaemonOptions(member=name, lease=LEASE)
        self.daemon = Daemon(
            source,
            SqliteStore(world.root / "state.db"),
            connect or world.connect,
            lambda: self.now,
            options,
            make_source=make_source,
            monotonic=lambda: self.ticks,
        )

    def later(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.ticks += seconds


class World:
    """Replicas (daemons in one process) on one SQLite file and one git server, each with its own
    member name and clocks; the in-memory clusters they reconcile, shared."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fleet = Fleet(root)
        self.git = GitServer(root)
        self.git.start()
        self.clusters: dict[str, InMemoryCluster] = {}
        self.replicas: list[Replica] = []
        self.on_connect: list[str] = []

    def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        self.on_connect.append(name)
        return self.clusters.setdefault(name, InMemoryCluster())

    def replica(
        self, name: str, *, connect: Connect | None = None, make_source: MakeSource | None = None
    ) -> Replica:
        """A replica named ``name`` (its own clusters' ``connect`` and channels source when
        given)."""
        made = Replica(self, name, connect=connect, make_source=make_source)
        self.replicas.append(made)
        return made

    def started(self, *names: str) -> list[Replica]:
        """Replicas that beat, then polled git (each reconciling what it owns)."""
        made = [self.replica(name) for name in names]
        for replica in made:
            replica.daemon.membership.beat()
            replica.daemon.poll()
            replica.daemon.wait_idle()
        return made


@contextmanager
def replicas_on_one_store(root: Path) -> Iterator[World]:
    """A :class:`World` under ``root``; its replicas closed and its git server stopped after."""
    made = World(root)
    try:
        yield made
    finally:
        for replica in made.replicas:
            replica.daemon.close()
        made.git.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """Replicas on one store and git server (import it into the test module)."""
    with replicas_on_one_store(tmp_path) as made:
        yield made


class Interleaved:
    """A replica's store that runs ``between`` once, right after the first call of its method
    ``after``: another replica acts while this one is half way through deciding."""

    def __init__(self, store: StateStore, after: str, between: Callable[[], object]) -> None:
        self.store = store
        self.after = after
        self.between: Callable[[], object] | None = between

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if name != self.after:
            return method

        def then_between(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if self.between is not None:
                between, self.between = self.between, None
                between()
            return result

        return then_between
