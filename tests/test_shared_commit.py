"""Replicas agree on the commit in force (issue 14, item 3): a verdict on a commit is decided
once and shared through the store, and the commit in force moves by compare-and-set, so a
replica whose git is behind follows the store instead of reconciling an older commit, and a
brake decision one replica made is not overturned by another that judged it alone.

Replicas are daemons in one process on one SQLite file and a real git server
(:mod:`tests.test_members`); where two replicas must act "at once", the store of one lets the
other act right after one of its calls (:class:`Interleaved`), so the interleaving is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.head import Head
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.store import StateStore
from tests.test_daemon_brake import LIMIT_ONE, REMOVE_TWO
from tests.test_members import LEASE, T0, Replica, World


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


class StaleSource:
    """A replica's git that still answers an older head (a fetch that has not seen the push)."""

    def __init__(self, source: Any, head: str) -> None:
        self.source = source
        self.head = head

    def check(self) -> str:
        """The older head."""
        return self.head

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    try:
        yield made
    finally:
        for replica in made.replicas:
            replica.daemon.close()
        made.git.stop()


def _in_force(replica: Replica) -> Head | None:
    record = replica.daemon.store.last_accepted()
    return record.commit if record is not None else None


def test_a_brake_hold_is_not_overturned_by_a_replica_that_judged_at_the_same_time(
    world: World,
) -> None:
    """replica-a, with the fleet's commit in force, holds a commit that deletes two runtimes;
    replica-b has nothing in force and no runtime records yet, so alone it counts no deletion
    and would accept it. replica-b had begun reading the commit when replica-a decided: the
    hold stands for both, and the fleet stays on the commit before."""
    world.fleet.commit("limit 1", {"fleet/reconciler.yaml": LIMIT_ONE})
    one, two = world.replica("replica-a"), world.replica("replica-b")
    assert one.daemon.poll()
    one.daemon.wait_idle()
    for runtime in "abc":  # as before the first reconciles are recorded
        one.daemon.store.forget_runtime(runtime)
    base = one.daemon.state.commit
    held = world.fleet.commit("remove two", REMOVE_TWO)
    between = Interleaved(two.daemon.store, "decide_commit", one.daemon.poll)  # after READING
    two.daemon.store = between

    two.daemon.poll()

    record = one.daemon.store.commit(Head(held))
    assert record is not None
    assert record.verdict is CommitVerdict.HELD
    assert _in_force(one) == base
    assert two.daemon.state.held is not None
    assert two.daemon.state.held["commit"] == held
    assert two.daemon.state.commit == base  # it follows the commit in force, not its own count


def test_replicas_reading_one_invalid_commit_at_once_refuse_it_once(world: World) -> None:
    one, two = world.replica("replica-a"), world.replica("replica-b")
    one.daemon.poll()
    base = one.daemon.state.commit
    bad = world.fleet.commit("bad", {"fleet/runtimes/a.yaml": "apiVersion: nope\n"})
    between = Interleaved(two.daemon.store, "commit", one.daemon.poll)  # read, not yet decided
    two.daemon.store = between

    assert not two.daemon.poll()

    record = one.daemon.store.commit(Head(bad))
    assert record is not None
    assert record.verdict is CommitVerdict.REFUSED
    refused = [r.daemon.state.refused for r in (one, two)]
    assert refused[0] == refused[1] == record.detail  # one verdict, told to both
    assert two.daemon.state.commit == base == _in_force(one)


def test_a_replica_whose_git_is_behind_follows_the_store_and_never_moves_it_back(
    world: World,
) -> None:
    one, two = world.started("replica-a", "replica-b")
    base = one.daemon.state.commit
    assert base is not None
    newer = world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    assert one.daemon.poll()
    two.daemon.source = StaleSource(two.daemon.source, base.config)

    assert two.daemon.poll()  # it took up the store's commit, though its git says the old one

    assert _in_force(one) == Head(newer)
    assert two.daemon.state.commit == Head(newer)


def test_a_replica_reconciles_against_the_commit_in_force_before_it_polls(world: World) -> None:
    """replica-b has not polled since replica-a accepted a newer commit: a runtime it owns is
    reconciled against the newer commit, not the one replica-b last saw in git."""
    one, two = world.started("replica-a", "replica-b")
    mine = two.daemon.targets()
    assert mine
    newer = world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    assert one.daemon.poll()

    operation = two.daemon.reconcile(mine[0])

    assert operation is not None
    assert operation.commit == Head(newer)
    assert two.daemon.state.commit == Head(newer)


def _reading(world: World, commit: str, reader: str) -> None:
    """A READING record of ``reader`` that it left twice (as if it had died reading it)."""
    store = world.replicas[0].daemon.store
    record = CommitRecord(
        Head(commit), CommitVerdict.READING, T0, detail={"reader": reader}, attempts=2
    )
    store.decide_commit(record)


def test_another_live_replica_reading_a_commit_is_not_a_crash(world: World) -> None:
    one, _ = world.started("replica-a", "replica-b")
    newer = world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    _reading(world, newer, "replica-b")  # replica-b is reading it (its heartbeat is fresh)

    assert one.daemon.poll()

    assert _in_force(one) == Head(newer)


def test_a_dead_replica_that_died_reading_a_commit_counts_as_a_crash(world: World) -> None:
    (one,) = world.started("replica-a")
    gone = one.daemon.store.heartbeat("replica-gone", T0 - 3 * LEASE, LEASE)
    assert not gone.live(T0, LEASE)
    newer = world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    _reading(world, newer, "replica-gone")

    assert not one.daemon.poll()

    record = one.daemon.store.commit(Head(newer))
    assert record is not None
    assert record.verdict is CommitVerdict.REFUSED
    assert "stopped twice while reading" in record.message
