"""The daemon's intervals: ``spec.intervals`` of the commit in force, unless ``--interval`` /
``--resync-interval`` (or their environment variables) say otherwise. Against a real git
server; the scheduler is paused (its jobs never run), the test calls the poll tick itself and
reads the jobs' intervals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from reconciler.cli.daemon import daemon, given_duration
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.service import Daemon, DaemonOptions, Intervals
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import SETTINGS_SPEC, Fleet, GitServer
from tests.support.fleet_history import SETTINGS


def _settings(intervals: str) -> dict[str, str | None]:
    spec = f"spec: {{channelsFrom: {{path: ../channels}}, intervals: {intervals}}}"
    return {"fleet/reconciler.yaml": SETTINGS.replace(SETTINGS_SPEC, spec)}


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.fleet = Fleet(root)
        self.server = GitServer(root)
        self.daemons: list[Daemon] = []

    def daemon(self, options: DaemonOptions | None = None) -> Daemon:
        clusters: dict[str, InMemoryCluster] = {}

        def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
            return clusters.setdefault(name, InMemoryCluster())

        source = RemoteSource(self.server.url, "main", "fleet", self.root / "cache")
        store = SqliteStore(self.root / "state.db")
        started = Daemon(source, store, connect, lambda: datetime.now(UTC), options)
        scheduler = BackgroundScheduler()
        started.ticks.schedule(scheduler)
        scheduler.start(paused=True)  # its jobs never run: the test polls
        self.daemons.append(started)
        return started


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    made.server.start()
    try:
        yield made
    finally:
        for started in made.daemons:
            if started.ticks.scheduler is not None:
                started.ticks.scheduler.shutdown(wait=False)
            started.close()
        made.server.stop()


def _jobs(daemon: Daemon) -> tuple[timedelta, timedelta]:
    scheduler = daemon.ticks.scheduler
    assert scheduler is not None
    poll, resync = scheduler.get_job("poll"), scheduler.get_job("resync")
    return poll.trigger.interval, resync.trigger.interval


def test_a_commit_that_changes_spec_intervals_changes_the_schedule(world: World) -> None:
    started = world.daemon()
    assert _jobs(started) == (timedelta(seconds=60), timedelta(minutes=10))  # the defaults

    world.fleet.commit("slower", _settings("{poll: 2m, resync: 1h}"))
    assert started.poll()
    assert started.intervals == Intervals(timedelta(minutes=2), timedelta(hours=1))
    assert _jobs(started) == (timedelta(minutes=2), timedelta(hours=1))

    world.fleet.commit("faster polls", _settings("{poll: 15s}"))
    assert started.poll()
    assert _jobs(started) == (timedelta(seconds=15), timedelta(minutes=10))


def test_intervals_given_on_the_command_line_win(world: World) -> None:
    options = DaemonOptions(poll_interval=timedelta(seconds=5))
    started = world.daemon(options)
    world.fleet.commit("slower", _settings("{poll: 2m, resync: 1h}"))

    assert started.poll()

    assert _jobs(started) == (timedelta(seconds=5), timedelta(hours=1))


def test_only_a_flag_or_its_variable_overrides_the_config_repo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def given(*args: str) -> tuple[timedelta | None, timedelta | None]:
        ctx = daemon.make_context("daemon", ["--repo", "/srv/git/fleet", *args])
        return (
            given_duration(ctx, "interval", ctx.params["interval"]),
            given_duration(ctx, "resync_interval", ctx.params["resync_interval"]),
        )

    assert given() == (None, None)  # the defaults: spec.intervals decides
    assert given("--interval", "60s") == (timedelta(seconds=60), None)  # explicit, even = default
    monkeypatch.setenv("RECONCILER_RESYNC_INTERVAL", "30m")
    assert given("--interval", "2m") == (timedelta(minutes=2), timedelta(minutes=30))
