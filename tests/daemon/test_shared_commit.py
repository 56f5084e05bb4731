"""Replicas agree on the commit in force: a verdict on a commit is decided once and shared through
the store, and the commit in force moves by compare-and-set, so a replica whose git is behind
follows the store instead of reconciling an older commit (or moving the fleet back to it at a later
poll), and a brake decision one replica made is not overturned by another that judged it alone. The
commit in force is the one accepted last in the store's order, whatever the replicas' clocks said; a
new commit is judged from it (and from its channels commit), not from what a replica behind last
saw.

Replicas are daemons in one process on one SQLite file and a real git server
(:mod:`tests.support.replicas`); where two replicas must act "at once", the store of one lets the
other act right after one of its calls (:class:`Interleaved`), so the interleaving is exact.
"""

from __future__ import annotations

import socket
import subprocess
from typing import Any

from reconciler.core.head import Head
from reconciler.core.resolve import resolve_runtime
from reconciler.daemon.verdicts import Refusal
from reconciler.operations.model import CommitRecord, CommitVerdict
from tests.support.daemons import LIMIT_ONE, REMOVE_TWO, T0, channels_source_in, commit_and_push
from tests.support.fleet_history import BASE_FILES, channel_yaml, git, write_tree
from tests.support.replicas import LEASE, Interleaved, Replica, World, world

__all__ = ["world"]  # the fixture: replicas on one store and git server


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
    assert two.daemon.state.held.commit == held
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
    assert refused[0] == refused[1] == Refusal.from_json(record.detail)  # one verdict, for both
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
    two.later(10)
    assert not two.daemon.poll()  # its git still says the old one: no revert, nothing new
    mine = two.daemon.targets()
    operation = two.daemon.reconcile(mine[0])

    assert _in_force(one) == Head(newer)
    assert two.daemon.state.commit == Head(newer)
    assert operation is not None
    assert operation.commit == Head(newer)
    two.daemon.source = two.daemon.source.source  # its fetch caught up
    assert not two.daemon.poll()
    assert _in_force(one) == Head(newer)


def test_a_revert_in_git_moves_the_commit_in_force_back(world: World) -> None:
    """What a replica behind must not do, one whose own git moved back does: a force-push to
    an older commit puts it in force again (for every replica)."""
    one, two = world.started("replica-a", "replica-b")
    base = one.daemon.state.commit
    assert base is not None
    world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    assert one.daemon.poll()
    two.daemon.poll()
    git(world.fleet.work, "push", "-qf", str(world.root / "remote.git"), f"{base.config}:main")

    assert two.daemon.poll()
    assert one.daemon.poll()

    assert _in_force(one) == base == one.daemon.state.commit == two.daemon.state.commit


def test_a_replica_whose_clock_is_behind_still_moves_the_commit_in_force(world: World) -> None:
    """The commit in force is the one accepted last, not the one accepted at the latest time
    by some replica's clock: replica-b, 20 s behind replica-a, accepts a newer commit after
    replica-a accepted one, and the fleet moves to it."""
    one, two = world.started("replica-a", "replica-b")
    one.later(20)
    world.fleet.commit("first", {"fleet/runtimes/c.yaml": None})
    assert one.daemon.poll()
    second = world.fleet.commit("second", {"fleet/runtimes/b.yaml": None})

    assert two.daemon.poll()

    assert _in_force(one) == Head(second) == two.daemon.state.commit
    one.daemon.follow_store()
    assert one.daemon.state.commit == Head(second)


def test_a_replica_behind_the_store_judges_a_commit_from_the_commit_in_force(
    world: World,
) -> None:
    """replica-b last saw the fleet with runtimes a and b; replica-a has since put c back in
    force. A commit removing b and c removes two runtimes from the commit in force (held at a
    limit of 1) but one from replica-b's old view: replica-b takes up the commit in force first
    and holds it."""
    no_c: dict[str, str | None] = {
        "fleet/reconciler.yaml": LIMIT_ONE,
        "fleet/runtimes/c.yaml": None,
    }
    world.fleet.commit("limit 1, no c", no_c)
    one, two = world.started("replica-a", "replica-b")
    with_c = world.fleet.commit(
        "c back", {"fleet/runtimes/c.yaml": BASE_FILES["fleet/runtimes/c.yaml"]}
    )
    assert one.daemon.poll()
    one.daemon.wait_idle()
    one.daemon.store.forget_runtime("c")  # as before c's first reconcile is recorded
    held = world.fleet.commit("remove b and c", {f"fleet/runtimes/{n}.yaml": None for n in "bc"})

    assert not two.daemon.poll()

    record = one.daemon.store.commit(Head(held))
    assert record is not None
    assert record.verdict is CommitVerdict.HELD
    assert record.detail["runtimes"] == ["b", "c"]
    assert _in_force(one) == Head(with_c) == two.daemon.state.commit


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


def test_a_process_here_that_died_reading_a_commit_counts_as_a_crash_before_its_lease_ends(
    world: World,
) -> None:
    """A daemon named host:pid (the default) that died reading a commit and was started again
    at once: its heartbeat is still fresh, but no process has its pid here any more."""
    (one,) = world.started("replica-a")
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead = f"{socket.gethostname()}:{ended.pid}"
    assert one.daemon.store.heartbeat(dead, T0, LEASE).live(T0, LEASE)
    newer = world.fleet.commit("newer", {"fleet/runtimes/c.yaml": None})
    _reading(world, newer, dead)

    assert not one.daemon.poll()

    record = one.daemon.store.commit(Head(newer))
    assert record is not None
    assert record.verdict is CommitVerdict.REFUSED


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


def test_a_replica_takes_up_the_channels_commit_in_force_not_the_newest(world: World) -> None:
    """With channels in a repository of their own, the commit in force names the channels
    commit too: replica-b, which has not asked the channels source yet, takes up that one, not
    the one the channels source points to now."""
    work, bare = world.root / "channels-work", world.root / "channels.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    write_tree(work / "channels", {k.removeprefix("channels/"): v for k, v in _CHANNELS.items()})
    commit_and_push(work, bare, "channels")
    url = world.git.url.replace("remote.git", "channels.git")
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"
        f"spec: {{channelsFrom: {{git: '{url}', ref: main, subPath: channels}}}}\n"
    )
    world.fleet.commit("channels apart", {"fleet/reconciler.yaml": settings, "channels": None})
    one, two = (
        world.replica(name, make_source=channels_source_in(world.root / f"channels-{name}"))
        for name in ("replica-a", "replica-b")
    )
    assert one.daemon.poll()
    in_force = one.daemon.state.commit
    assert in_force is not None
    assert in_force.channels
    bump = {"regular.yaml": channel_yaml("regular", {"widget": "2.0.0", "gadget": "1.0.0"})}
    write_tree(work / "channels", bump)
    commit_and_push(work, bare, "bump")

    assert two.daemon.follow_store()

    assert two.daemon.state.commit == in_force
    repo = two.daemon.state.repo
    assert repo is not None
    versions = {m.name: m.version for m in resolve_runtime(repo, repo.runtimes["a"]).modules}
    assert versions["widget"] == "1.0.0"


_CHANNELS = {k: v for k, v in BASE_FILES.items() if k.startswith("channels/")}
