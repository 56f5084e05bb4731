"""Daemon replicas sharing one state store: each runtime owned by one live member, the owners proved
by the operations the store keeps; a dead member's runtimes taken over after its lease; a member
whose heartbeat lapsed writes nothing more.

Two daemons in one process on one SQLite file and a real git server, each with its own member
name, wall clock and monotonic clock (fakes: the lease runs out without waiting).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.api import Settling, Stop
from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.membership import FencedCluster, FencedError, Membership, fenced
from reconciler.errors import LostOwnershipError
from reconciler.operations.model import Member
from reconciler.operations.store import SqliteStore
from tests.support.daemons import T0, WIDGET
from tests.support.fleet_history import runtime_yaml
from tests.support.replicas import LEASE, Replica, World, world
from tests.support.sample_fleet import check_document

__all__ = ["world"]  # the fixture


def _owners_recorded(replica: Replica) -> dict[str, set[str]]:
    """Runtime -> the members that ran its operations, as the store recorded them."""
    store = replica.daemon.store
    return {runtime: {o.owner for o in store.operations(runtime=runtime)} for runtime in "abc"}


def test_each_runtime_is_worked_on_by_its_owner_only(world: World) -> None:
    one, two = world.replica("replica-a"), world.replica("replica-b")
    for replica in (one, two):
        replica.daemon.membership.beat()
    for replica in (one, two):
        replica.daemon.poll()
        replica.daemon.reconcile_all(wait=True)
        replica.daemon.wait_idle()

    mine = {r.daemon.membership.name: set(r.daemon.targets()) for r in (one, two)}
    recorded = _owners_recorded(one)

    assert mine["replica-a"] | mine["replica-b"] == {"a", "b", "c"}
    assert not mine["replica-a"] & mine["replica-b"]
    assert all(recorded[r] == {owner} for owner, runtimes in mine.items() for r in runtimes)
    status = one.daemon.status()
    assert {m["name"] for m in status["members"]} == {"replica-a", "replica-b"}
    assert {r["runtime"]: r["owner"] for r in status["runtimes"]} == {
        r: owner for owner, runtimes in mine.items() for r in runtimes
    }


def test_a_dead_members_runtimes_are_taken_over_after_its_lease(world: World) -> None:
    one, two = world.started("replica-a", "replica-b")
    theirs = set(two.daemon.targets())
    assert theirs  # replica-b owned some, then died without leaving

    one.later(LEASE.total_seconds() + 1)  # replica-a beats again; replica-b does not
    one.daemon.reconcile_all(wait=True)

    assert set(one.daemon.targets()) == {"a", "b", "c"}
    recorded = _owners_recorded(one)
    assert all("replica-a" in recorded[r] for r in theirs)


def test_a_member_that_leaves_hands_its_runtimes_over_at_once(world: World) -> None:
    one, two = world.started("replica-a", "replica-b")
    assert set(one.daemon.targets()) != {"a", "b", "c"}

    two.daemon.membership.leave()

    assert set(one.daemon.targets()) == {"a", "b", "c"}


def test_a_member_whose_heartbeat_lapsed_mid_run_writes_nothing(world: World) -> None:
    pausing = threading.Event()

    def paused(access: ClusterAccess, name: str) -> FencedCluster | InMemoryCluster:
        if pausing.is_set():
            one.ticks += LEASE.total_seconds()  # the process was stopped here, past its lease
        return world.connect(access, name)

    one = world.replica("replica-a", connect=paused)
    one.daemon.membership.beat()
    one.daemon.poll()
    one.daemon.wait_idle()
    world.fleet.commit(
        "c gets gadget",
        {"fleet/runtimes/c.yaml": runtime_yaml("c", "fast", "[{name: widget}, {name: gadget}]")},
    )
    cluster = world.clusters["c"]
    writes = cluster.writes

    pausing.set()
    one.daemon.poll()
    one.daemon.wait_idle()

    assert cluster.writes == writes
    assert cluster.get(WIDGET) is not None  # what was there stays
    error = str(one.daemon.runtime_errors["c"])
    assert "not saved: member replica-a: no heartbeat for" in error  # nor the store written
    operation = one.daemon.store.operations(runtime="c")[0]
    assert operation.message == ""  # as saved before the pause: its first step running


def test_the_fence_refuses_writes_but_not_reads() -> None:
    store = _MemoryStore()
    ticks = [0.0]
    membership = Membership(store, "m", lambda: T0, lease=LEASE, monotonic=lambda: ticks[0])
    member = membership.beat()
    assert member is not None
    cluster = FencedCluster(InMemoryCluster(), lambda: membership.fenced(member.epoch))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}

    cluster.apply(namespace, field_manager="t")
    ticks[0] += 16  # more than half the lease without a heartbeat

    with pytest.raises(FencedError, match="no heartbeat for 16s"):
        cluster.apply(namespace, field_manager="t")
    assert cluster.list_objects("v1", "Namespace") != []


class _SettlingCluster(InMemoryCluster):
    """An in-memory cluster that records the lifecycle's pauses, as a real server's adapter
    would wait them."""

    def __init__(self) -> None:
        super().__init__()
        self.paused: list[tuple[float, Stop | None]] = []

    def pause(self, seconds: float, stop: Stop | None = None) -> bool:
        self.paused.append((seconds, stop))
        return True


def test_a_fenced_cluster_waits_as_the_cluster_it_fences() -> None:
    """Without it the fenced real cluster lost its pause: the lifecycle no longer waited for
    CRDs within a pass and a module took two syncs in the daemon."""
    settling = _SettlingCluster()

    stopping = threading.Event()
    wrapped = fenced(settling, lambda: None, stopping)
    assert isinstance(wrapped, Settling)
    assert wrapped.pause(0.05)

    assert settling.paused == [(0.05, stopping)]  # the daemon's stop ends the pause early
    assert not isinstance(fenced(InMemoryCluster(), lambda: None), Settling)


class _MemoryStore(SqliteStore):
    def __init__(self) -> None:
        super().__init__(Path(":memory:"))


def test_members_lists_the_replicas_and_what_they_own(world: World) -> None:
    one, two = world.started("replica-a", "replica-b")
    state = ["--state", f"sqlite:///{world.root / 'state.db'}", "--lease", "100000h"]

    result = CliRunner().invoke(cli, ["members", *state])

    document = CliRunner().invoke(cli, ["members", *state, "-o", "json"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    check_document(json.loads(document.stdout), "MemberList")
    assert lines[0].split() == ["NAME", "LIVE", "EPOCH", "HEARTBEAT", "RUNTIMES"]
    owned = {line.split()[0]: int(line.split()[-1]) for line in lines[1:]}
    assert owned == {
        "replica-a": len(one.daemon.targets()),
        "replica-b": len(two.daemon.targets()),
    }


def test_a_fenced_member_is_not_ready(world: World) -> None:
    one = world.replica("replica-a")
    one.daemon.membership.beat()
    one.daemon.poll()
    one.daemon.wait_idle()
    ready = one.daemon.ready

    one.ticks += LEASE.total_seconds()  # no heartbeat for a whole lease

    assert ready is True
    assert one.daemon.ready is False


def test_the_heartbeat_names_the_member_and_its_share_in_the_metrics(world: World) -> None:
    one, _ = world.started("replica-a", "replica-b")

    one.daemon.heartbeat()
    one.daemon.wait_idle()

    text = one.daemon.metrics.exposition().decode()
    assert 'reconciler_member{member="replica-a"} 1.0' in text
    assert "reconciler_members_live 2.0" in text
    assert f"reconciler_owned_runtimes {float(len(one.daemon.targets()))}" in text


def test_a_start_reconciles_each_runtime_once(world: World) -> None:
    """As ``reconciler daemon`` starts: a heartbeat before any commit is loaded, the first poll,
    then the next heartbeat, which takes none of the runtimes the poll ran for newly owned."""
    (one,) = [world.replica("replica-a")]
    one.daemon.heartbeat()  # no fleet yet: it owns nothing
    one.daemon.poll()
    one.daemon.wait_idle()

    one.later(10)
    one.daemon.heartbeat()
    one.daemon.wait_idle()

    store = one.daemon.store
    assert {r: len(store.operations(runtime=r)) for r in "abc"} == {"a": 1, "b": 1, "c": 1}


def test_a_restart_under_the_same_name_takes_its_runtimes_over_at_once(world: World) -> None:
    one, two = world.started("replica-a", "replica-b")
    theirs = set(two.daemon.targets())
    assert theirs  # replica-b owned some, then died without leaving (SIGKILL, OOM)

    again = world.replica("replica-b")  # the same --member (a pod's name), within the lease
    again.daemon.membership.beat()
    again.daemon.poll()
    again.daemon.wait_idle()

    assert set(again.daemon.targets()) == theirs
    assert set(one.daemon.targets()) | theirs == {"a", "b", "c"}


def test_a_restart_with_the_default_name_takes_over_its_dead_predecessor_at_once(
    world: World,
) -> None:
    dead = f"{socket.gethostname()}:{_finished_pid()}"  # a process of this host, gone
    (before,) = world.started(dead)
    assert set(before.daemon.targets()) == {"a", "b", "c"}

    restarted = world.replica(f"{socket.gethostname()}:{os.getpid()}")  # within the lease
    restarted.daemon.membership.beat()
    restarted.daemon.poll()
    restarted.daemon.wait_idle()

    assert restarted.daemon.membership.live_members() == [restarted.daemon.membership.name]
    assert set(restarted.daemon.targets()) == {"a", "b", "c"}
    assert not restarted.daemon.membership.alive(dead)  # its claims are taken over at once


def _finished_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


# -- fencing at the write ---------------------------------------------------------


def test_a_member_taking_over_fences_the_dead_one_in_the_store(world: World) -> None:
    """A paused member whose own checks passed before the pause writes nothing to the store
    once another took its runtimes over; it comes back in a new epoch."""
    one, two = world.started("replica-a", "replica-b")
    paused = two.daemon.membership.member
    assert paused is not None
    token = two.daemon.membership.token(paused.epoch)

    one.later(LEASE.total_seconds() + 1)  # replica-b stopped: it does not beat
    one.daemon.reconcile_all(wait=True)

    store = two.daemon.store
    assert [m.fenced for m in store.members() if m.name == "replica-b"] == [True]
    record = store.runtime("a")
    assert record is not None
    with pytest.raises(LostOwnershipError):
        store.put_runtime(record, token)
    two.later(LEASE.total_seconds() + 1)
    back = two.daemon.membership.beat()
    assert back is not None
    assert back.epoch == paused.epoch + 1
    store.put_runtime(record, two.daemon.membership.token(back.epoch))


def test_the_deadline_runs_from_when_the_heartbeat_was_sent() -> None:
    """A heartbeat answered late does not lengthen the time this replica may write."""
    ticks = [0.0]

    class _SlowStore(_MemoryStore):
        def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
            ticks[0] += 10  # the answer took 10 s
            return super().heartbeat(name, now, lease)

    membership = Membership(_SlowStore(), "m", lambda: T0, lease=LEASE, monotonic=lambda: ticks[0])
    member = membership.beat()
    assert member is not None

    assert membership.deadline() == 15.0  # sent at 0, lease 30 s, margin 15 s
    ticks[0] = 15.5
    assert membership.fenced(member.epoch) is not None


def test_a_fenced_replica_does_not_save_its_snapshot_file(tmp_path: Path) -> None:
    """Writes the fence let through before a pause stay in memory: the save of the file checks
    the fence again, under the file's lock."""
    path = tmp_path / "rt.yaml"
    ticks = [0.0]
    membership = Membership(
        _MemoryStore(), "m", lambda: T0, lease=LEASE, monotonic=lambda: ticks[0]
    )
    member = membership.beat()
    assert member is not None
    cluster = FencedCluster(SnapshotFileCluster(path), lambda: membership.fenced(member.epoch))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    cluster.apply(namespace, field_manager="t")  # the check passed
    ticks[0] += LEASE.total_seconds()  # paused here, past the lease

    with pytest.raises(FencedError, match="no heartbeat"):
        cluster.flush()

    assert not path.exists()


def _watched(replica: Replica) -> set[str]:
    return {r for opened in replica.daemon.watches.open.values() for r in opened.needers}


def test_watches_move_with_the_runtimes_between_replicas(world: World) -> None:
    (one,) = world.started("replica-a")
    assert _watched(one) == {"a", "b", "c"}

    (two,) = world.started("replica-b")
    one.daemon.heartbeat()  # replica-a no longer owns what replica-b took

    assert _watched(one) == set(one.daemon.targets())
    assert _watched(two) == set(two.daemon.targets())
    assert _watched(one) | _watched(two) == {"a", "b", "c"}
    assert not _watched(one) & _watched(two)
