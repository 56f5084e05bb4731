"""Several daemon replicas on one state store: membership, ownership and fencing (issue 14).

- Each replica is a **member**: it beats in the store every third of the lease; a member whose
  last heartbeat is older than the lease is dead, and starts a new epoch if it beats again.
- Each runtime is **owned** by one live member, by consistent hashing with bounded loads over
  the live members (:mod:`reconciler.core.sharding`): every replica computes the same owners
  from the same store, and a member joining or leaving moves about 1/N of the runtimes.
- **Fencing** (issues 14 and 23), at each write:

  - to a cluster: :class:`FencedCluster` checks, right before it passes each apply, patch and
    delete on, that this replica is before its **deadline**: the moment (by :func:`fence_clock`,
    monotonic and counting suspend) its last successful heartbeat was *sent*, plus the lease,
    minus a safety margin (half the lease by default). A process paused (SIGSTOP, a stalled VM)
    or whose clock jumped past the deadline writes nothing more; its epoch must also be the one
    the reconcile began in. What is left is the residual window between that check and the API
    server receiving the request (bench/fence_bench.py measures it; the margin must cover it);
  - to a snapshot file: the same check under the file's lock right before the save, and the
    file's generation compare-and-set (:mod:`reconciler.cluster.snapshot`);
  - to the state store: every write of a reconcile carries a
    :class:`~reconciler.operations.model.FenceToken` (member, epoch) that the store checks in
    the statement that writes. A member that finds another's lease lapsed **fences** it in the
    store (:meth:`MemberLeases.fence`) before it takes its runtimes over, so whatever the paused
    one checked before its pause, its writes after the takeover are refused
    (:class:`~reconciler.errors.LostOwnershipError`); it comes back in a new epoch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.cluster.api import (
    Cluster,
    ClusterIdentity,
    EventSink,
    KindInfo,
    ObjectEvent,
    Settling,
    Stop,
    flush_writes,
)
from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.sharding import assign
from reconciler.errors import FencedError, ReconcilerError
from reconciler.operations.engine import owner_alive
from reconciler.operations.model import FenceToken, Member
from reconciler.operations.store import MemberLeases

log = logging.getLogger(__name__)

#: A member is dead when its last heartbeat is older than this.
DEFAULT_LEASE = timedelta(seconds=30)


__all__ = ["DEFAULT_LEASE", "FencedCluster", "FencedError", "Membership", "fence_clock"]


def fence_clock() -> float:
    """Seconds that never go back and that keep counting while the machine sleeps (Linux's
    CLOCK_BOOTTIME; elsewhere :func:`time.monotonic`): a suspended host must not come back
    believing its lease still holds."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class Membership:
    """This replica's membership in the store (see the module docstring)."""

    def __init__(
        self,
        store: MemberLeases,
        name: str,
        clock: Callable[[], datetime],
        *,
        lease: timedelta = DEFAULT_LEASE,
        monotonic: Callable[[], float] = fence_clock,
        margin: timedelta | None = None,
    ) -> None:
        self.store = store
        self.name = name
        self.clock = clock
        self.lease = lease
        self.monotonic = monotonic
        #: How long before its lease lapses (as the others may see it) this replica stops
        #: writing: the residual window of a write and the clocks' drift must fit in it.
        self.margin = margin if margin is not None else lease / 2
        self.member: Member | None = None
        self._beat_at: float | None = None
        self._owners: tuple[tuple[tuple[str, ...], tuple[str, ...]], dict[str, str]] | None = None
        self._lock = threading.Lock()

    def beat(self) -> Member | None:
        """Heartbeat now; ``None`` when the store cannot be reached (logged). The deadline runs
        from before the heartbeat was sent (a slow answer does not lengthen it)."""
        sent = self.monotonic()
        try:
            member = self.store.heartbeat(self.name, self.clock(), self.lease)
        except ReconcilerError as error:
            log.warning("member %s: no heartbeat: %s", self.name, error)
            return None
        with self._lock:
            if self.member is not None and member.epoch != self.member.epoch:
                log.warning("member %s: lease lapsed; epoch %d now", self.name, member.epoch)
            self.member, self._beat_at = member, sent
        return member

    def token(self, epoch: int) -> FenceToken:
        """The fence a reconcile begun under ``epoch`` carries into the store."""
        return FenceToken(self.name, epoch)

    def deadline(self) -> float | None:
        """The :func:`fence_clock` time from which this replica writes nothing (None: it never
        beat)."""
        beat_at = self._beat_at
        if beat_at is None:
            return None
        return beat_at + (self.lease - self.margin).total_seconds()

    def fresh(self) -> Member | None:
        """This member, beating first when its last heartbeat is a third of the lease old (a
        daemon without a scheduler beats as it works)."""
        beat_at = self._beat_at
        due = self.lease.total_seconds() / 3
        if beat_at is None or self.monotonic() - beat_at >= due:
            self.beat()
        return self.member

    def fenced(self, epoch: int) -> str | None:
        """Why this replica may not write for a reconcile begun under ``epoch`` (None: it may)."""
        with self._lock:
            member, beat_at = self.member, self._beat_at
        deadline = self.deadline()
        if member is None or beat_at is None or deadline is None:
            return "not a member yet"
        now = self.monotonic()
        if now > deadline:  # a pause or a clock jump past the deadline is a lapse
            return (
                f"member {self.name}: no heartbeat for {now - beat_at:.0f}s "
                f"(lease {self.lease}, margin {self.margin})"
            )
        if member.epoch != epoch:
            return f"member {self.name}: epoch {member.epoch}, the reconcile began in {epoch}"
        return None

    def _live(self, member: Member, now: datetime) -> bool:
        """Within its lease, unless it is named ``host:pid`` of a process of this host that is
        gone: a daemon restarted with the default name (a new pid) takes over its dead
        predecessor's runtimes and claims at once, not after the lease."""
        if not member.live(now, self.lease):
            return False
        return member.name == self.name or owner_alive(member.name)

    def live_members(self) -> list[str]:
        """The names of the members alive now (this one included while it beats). A member
        whose lease lapsed is fenced in the store first (see the module docstring), so that
        nothing it writes lands once its runtimes are taken over."""
        now = self.clock()
        names: set[str] = set()
        for member in self.store.members():
            if self._live(member, now):
                names.add(member.name)
            elif member.name != self.name and not member.fenced:
                self._fence(member, now)
        if self.member is not None and self.fenced(self.member.epoch) is None:
            names.add(self.name)
        return sorted(names)

    def _fence(self, member: Member, now: datetime) -> None:
        """Fence ``member`` (its lease lapsed) before taking its runtimes over."""
        if self.store.fence(member.name, member.epoch, now - self.lease):
            log.warning(
                "member %s: fenced member %s at epoch %d (no heartbeat since %s)",
                self.name,
                member.name,
                member.epoch,
                member.heartbeat.isoformat(),
            )

    def owners(self, runtimes: Sequence[str]) -> dict[str, str]:
        """Runtime -> its owner among the live members (computed again only when the members
        or the runtimes changed)."""
        key = (tuple(self.live_members()), tuple(runtimes))
        with self._lock:
            if self._owners is not None and self._owners[0] == key:
                return self._owners[1]
        owners = assign(runtimes, key[0])
        with self._lock:
            self._owners = (key, owners)
        return owners

    def mine(self, runtimes: Sequence[str]) -> list[str]:
        """The runtimes of ``runtimes`` this replica owns."""
        owners = self.owners(runtimes)
        return [r for r in runtimes if owners.get(r) == self.name]

    def alive(self, owner: str) -> bool:
        """Whether the holder of an operation's claim may still be working: a member while its
        heartbeat is within the lease (a dead member's claims are taken over at once, not when
        they run out), anything else (a ``reconciler sync``) by :func:`owner_alive`."""
        now = self.clock()
        for member in self.store.members():
            if member.name == owner:
                return self._live(member, now)
        return owner_alive(owner)

    def leave(self) -> None:
        """Leave at shutdown: the others take the runtimes over at once."""
        try:
            self.store.leave(self.name)
        except ReconcilerError as error:
            log.warning("member %s: could not leave: %s", self.name, error)


#: How a delete is sent: given the object and the request (which says whether there was
#: something to delete), it sends the request (the daemon notes its own deletions around it).
AroundDelete = Callable[[ObjectRef, Callable[[], bool]], bool]


class FencedCluster:
    """A cluster whose writes first ask :meth:`Membership.fenced`, right before each request is
    passed on (reads go through); a snapshot file's save asks under the file's lock. Deletes
    go through ``around_delete`` when given."""

    def __init__(
        self,
        cluster: Cluster,
        fenced: Callable[[], str | None],
        around_delete: AroundDelete | None = None,
    ) -> None:
        self.cluster = cluster
        self._fenced = fenced
        self._around_delete = around_delete

    @property
    def identity(self) -> ClusterIdentity:
        """The wrapped cluster's (see :attr:`Cluster.identity`)."""
        return self.cluster.identity

    def _check(self) -> None:
        reason = self._fenced()
        if reason is not None:
            raise FencedError(f"not written: {reason}")

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`Cluster.get`."""
        return self.cluster.get(ref)

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        """See :meth:`Cluster.list_objects`."""
        return self.cluster.list_objects(api_version, kind, namespace=namespace, labels=labels)

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        """See :meth:`Cluster.apply`: fenced unless a dry run."""
        if not dry_run:
            self._check()
        return self.cluster.apply(body, field_manager=field_manager, force=force, dry_run=dry_run)

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """See :meth:`Cluster.patch`: fenced."""
        self._check()
        return self.cluster.patch(ref, merge_patch)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """See :meth:`Cluster.delete`: fenced, through ``around_delete`` when given."""
        self._check()

        def ask() -> bool:
            return self.cluster.delete(ref, propagation=propagation)

        return ask() if self._around_delete is None else self._around_delete(ref, ask)

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`Cluster.kind_info`."""
        return self.cluster.kind_info(api_version, kind)

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """See :meth:`Cluster.kinds_in_group`."""
        return self.cluster.kinds_in_group(group, kind)

    def served_kinds(self, *, fresh: bool = False) -> list[KindInfo]:
        """See :meth:`Cluster.served_kinds`."""
        return self.cluster.served_kinds(fresh=fresh)

    def flush(self) -> None:
        """See :meth:`Buffered.flush`: a snapshot file is saved only if the fence still holds
        under the file's lock, right before the save, and the file was not saved by another
        process since it was read (a replica paused past its lease never saves its stale copy
        over the new owner's work)."""
        if isinstance(self.cluster, SnapshotFileCluster):
            self.cluster.flush(guard=self._check)
        else:
            flush_writes(self.cluster)

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """See :meth:`EventSink.record_event`: fenced; nothing when the cluster keeps none."""
        if isinstance(self.cluster, EventSink) and self._fenced() is None:
            self.cluster.record_event(event, component=component)


class SettlingFencedCluster(FencedCluster):
    """A :class:`FencedCluster` around a cluster that moves on by itself (a real API server):
    the lifecycle's waits within a pass go through to it (see
    :class:`~reconciler.cluster.api.Settling`), and end at once when the daemon stops."""

    def __init__(
        self,
        cluster: Cluster,
        fenced: Callable[[], str | None],
        stopping: Stop | None = None,
        around_delete: AroundDelete | None = None,
    ) -> None:
        super().__init__(cluster, fenced, around_delete)
        self._stopping = stopping

    def pause(self, seconds: float, stop: Stop | None = None) -> bool:
        """See :meth:`Settling.pause`: cut short by the daemon's ``stopping`` (or ``stop``)."""
        assert isinstance(self.cluster, Settling)
        return self.cluster.pause(seconds, stop or self._stopping)


def fenced(
    cluster: Cluster,
    check: Callable[[], str | None],
    stopping: Stop | None = None,
    around_delete: AroundDelete | None = None,
) -> FencedCluster:
    """``cluster`` with its writes fenced by ``check``, waiting as it waits: a cluster that
    settles by itself stays one (so a replace still waits a little for the old object), its
    waits ended at once by ``stopping`` (the daemon's shutdown); its deletes sent through
    ``around_delete`` when given."""
    if isinstance(cluster, Settling):
        return SettlingFencedCluster(cluster, check, stopping, around_delete)
    return FencedCluster(cluster, check, around_delete)
