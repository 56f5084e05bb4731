"""The state store does not grow for ever: an operation that changed nothing is recorded without the
objects it left unchanged, a run of them is kept as its newest, and pruning keeps the newest
operations of each runtime, so resyncs without drift leave the store's size on a plateau. Each
resync is a real operation of the engine on an in-memory cluster and a real SQLite store; sizes are
SQLite's page counts, never times."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ModuleRef
from reconciler.daemon.pruning import Pruning
from reconciler.errors import StoreError
from reconciler.operations.engine import Engine
from reconciler.operations.model import NO_CHANGE, OperationState, Retention
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore, StateStore
from tests.support.lifecycle_helpers import repo


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _resync(runner: Runner, clock: Clock) -> None:
    clock.now += timedelta(minutes=10)
    outcome = runner.run(runner.operation_for("rt"))
    assert outcome.operation.state is OperationState.SUCCEEDED, outcome.operation.message


def _pages(path: Path) -> int:
    """The pages the store's file holds once its log is written back (used or free)."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(db.execute("PRAGMA page_count").fetchone()[0])


def test_resyncs_without_drift_leave_the_store_on_a_plateau(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStore(tmp_path / "state.db")
    engine = Engine(store, clock=clock)
    cluster = InMemoryCluster()
    runner = Runner(store, engine, repo(ModuleRef("widget")), lambda a, n: cluster, clock)
    pruning = Pruning(store, Retention(), clock)
    _resync(runner, clock)  # the provision
    sizes = []
    for _ in range(3):
        for _ in range(10):
            _resync(runner, clock)
            pruning.tick()
        sizes.append(_pages(tmp_path / "state.db"))

    kept = store.operations(runtime="rt")
    assert [o.message for o in kept] == [NO_CHANGE, "1 installed"]  # the run merged in one
    assert sizes[2] == sizes[1], sizes
    row = store.query("SELECT data FROM operations WHERE id = ?", (kept[0].id,))[0]
    assert json.loads(row["data"])["applied"]["changes"] == []  # the unchanged objects: gone


class _Broken:
    """A store whose database is down."""

    def prune(self, retention: Retention, now: datetime) -> int:
        raise StoreError("connection refused")


def test_a_failing_prune_is_logged_and_tried_again_at_the_next_tick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken: StateStore = _Broken()  # type: ignore[assignment]
    pruning = Pruning(broken, Retention(), Clock())

    with caplog.at_level(logging.WARNING):
        assert pruning.tick() == 0

    assert "pruning the state store failed (tried again in 1:00:00): connection refused" in (
        caplog.text
    )
