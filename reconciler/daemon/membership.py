"""Several daemon replicas on one state store: membership, ownership and fencing (issue 14).

- Each replica is a **member**: it beats in the store every third of the lease; a member whose
  last heartbeat is older than the lease is dead, and starts a new epoch if it beats again.
- Each runtime is **owned** by one live member, by consistent hashing with bounded loads over
  the live members (:mod:`reconciler.core.sharding`): every replica computes the same owners
  from the same store, and a member joining or leaving moves about 1/N of the runtimes.
- **Fencing**: a replica stops writing to clusters as soon as its own last successful heartbeat
  is older than half the lease (by its monotonic clock), or its epoch changed since the
  reconcile began, so it stops before anyone may take its runtimes over (after a whole lease).
  Every write to a cluster goes through :class:`FencedCluster`, which checks that first; a
  process paused mid-step (SIGSTOP) and resumed past its lease is refused at its next write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.cluster.api import Cluster, EventSink, KindInfo, ObjectEvent, flush_writes
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.sharding import assign
from reconciler.errors import FencedError, ReconcilerError
from reconciler.operations.engine import owner_alive
from reconciler.operations.model import Member
from reconciler.operations.store import StateStore

log = logging.getLogger(__name__)

#: A member is dead when its last heartbeat is older than this.
DEFAULT_LEASE = timedelta(seconds=30)


__all__ = ["DEFAULT_LEASE", "FencedCluster", "FencedError", "Membership"]


class Membership:
    """This replica's membership in the store (see the module docstring)."""

    def __init__(
        self,
        store: StateStore,
        name: str,
        clock: Callable[[], datetime],
        *,
        lease: timedelta = DEFAULT_LEASE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.name = name
        self.clock = clock
        self.lease = lease
        self.monotonic = monotonic
        self.member: Member | None = None
        self._beat_at: float | None = None
        self._owners: tuple[tuple[tuple[str, ...], tuple[str, ...]], dict[str, str]] | None = None
        self._lock = threading.Lock()

    def beat(self) -> Member | None:
        """Heartbeat now; ``None`` when the store cannot be reached (logged)."""
        try:
            member = self.store.heartbeat(self.name, self.clock(), self.lease)
        except ReconcilerError as error:
            log.warning("member %s: no heartbeat: %s", self.name, error)
            return None
        with self._lock:
            if self.member is not None and member.epoch != self.member.epoch:
                log.warning("member %s: lease lapsed; epoch %d now", self.name, member.epoch)
            self.member, self._beat_at = member, self.monotonic()
        return member

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
        if member is None or beat_at is None:
            return "not a member yet"
        idle = self.monotonic() - beat_at
        if idle > self.lease.total_seconds() / 2:
            return f"member {self.name}: no heartbeat for {idle:.0f}s (lease {self.lease})"
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
        """The names of the members alive now (this one included while it beats)."""
        now = self.clock()
        names = {m.name for m in self.store.members() if self._live(m, now)}
        if self.member is not None and self.fenced(self.member.epoch) is None:
            names.add(self.name)
        return sorted(names)

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


class FencedCluster:
    """A cluster whose writes first ask :meth:`Membership.fenced` (reads go through)."""

    def __init__(self, cluster: Cluster, fenced: Callable[[], str | None]) -> None:
        self.cluster = cluster
        self._fenced = fenced
        self.identity = getattr(cluster, "identity", "")

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
        """See :meth:`Cluster.delete`: fenced."""
        self._check()
        return self.cluster.delete(ref, propagation=propagation)

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`Cluster.kind_info`."""
        return self.cluster.kind_info(api_version, kind)

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """See :meth:`Cluster.kinds_in_group`."""
        return self.cluster.kinds_in_group(group, kind)

    def served_kinds(self) -> list[KindInfo]:
        """See :meth:`Cluster.served_kinds`."""
        return self.cluster.served_kinds()

    def flush(self) -> None:
        """See :meth:`Buffered.flush`: writes the fence let through are kept, as a real API
        server keeps what it answered."""
        flush_writes(self.cluster)

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """See :meth:`EventSink.record_event`: fenced; nothing when the cluster keeps none."""
        if isinstance(self.cluster, EventSink) and self._fenced() is None:
            self.cluster.record_event(event, component=component)
