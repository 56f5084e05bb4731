"""The state store's contract: one protocol per role (:class:`OperationLedger`,
:class:`RuntimeRecords`, :class:`CommitVerdicts`, :class:`BrakeLimits`, :class:`Suspensions`,
:class:`CapabilityRecords`, :class:`MemberLeases`, :class:`RolloutRecords`,
:class:`NotificationOutbox`) and the few a caller needs together (:class:`StatusReader`,
:class:`RunLedger`, :class:`SyncLedger`, :class:`Prunable`), each caller taking the one it
uses; :class:`StateStore`, composed of them all, for the composition roots that wire
everything; and the rules every store applies the same way (which verdict on a commit may
replace which, a member's next epoch), with the reads of runtime statuses built on the roles.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from reconciler.cluster.api import ClusterIdentity
from reconciler.core.brake import Limits
from reconciler.core.head import Head
from reconciler.core.outbox import Outbox
from reconciler.core.rollout_summary import RolloutSummary
from reconciler.core.rollouts import Rollout
from reconciler.core.templates import Capabilities
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    FenceToken,
    Member,
    Operation,
    Retention,
    RuntimeRecord,
    RuntimeStatus,
    Suspension,
)

#: In an ACCEPTED record's detail: the ``--allow-deletions`` that let a held commit through.
ALLOWED_DELETIONS = "allowedDeletions"
#: The row of ``brake_limits`` that ``reconciler sync`` keeps.
LIMITS_SCOPE = "sync"


class OperationLedger(Protocol):
    """The ledger of operations, with their stages and steps: who claims which (an owner and
    its lease), what they did, and which finished ones are kept (:class:`Retention`)."""

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """Insert or update an operation with its stages and steps, unless the stored one was
        written or claimed by someone else since this store last wrote or read it, or ``fence``
        no longer holds (:class:`~reconciler.errors.LostOwnershipError`, nothing written)."""

    def get(self, operation_id: str) -> Operation | None:
        """An operation by id (a unique prefix is enough)."""

    def operations(self, runtime: str | None = None, limit: int = 50) -> list[Operation]:
        """Newest first, for one runtime or all."""

    def unfinished(self, runtime: str) -> Operation | None:
        """The runtime's pending or in-progress operation, if any."""

    def unfinished_all(self) -> dict[str, Operation]:
        """Each runtime's pending or in-progress operation (:meth:`unfinished` of every runtime
        that has one), in one read."""

    def claim(
        self,
        operation_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        alive: Callable[[str], bool],
        fence: FenceToken | None = None,
    ) -> str | None:
        """Move the operation to in progress for ``owner`` unless another live owner holds an
        operation of the same runtime; returns that holder's description, else ``None``.
        :class:`~reconciler.errors.LostOwnershipError` when ``fence`` no longer holds."""

    def prune(
        self,
        retention: Retention,
        now: datetime,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Remove the finished operations ``retention`` does not keep at ``now``, with their
        stages and steps; how many. ``progress`` is told how many so far, now and then (a big
        store is pruned in several transactions)."""

    def prunable(self, retention: Retention, now: datetime) -> dict[str, int]:
        """What :meth:`prune` would remove at ``now``: runtime -> operations, by runtime name
        (runtimes with none left out); nothing is removed."""


class RuntimeRecords(Protocol):
    """Each runtime's last known state (:class:`RuntimeRecord`) and where it was synced."""

    def put_runtime(self, record: RuntimeRecord, fence: FenceToken | None = None) -> None:
        """Record a runtime's last known state (under ``fence``, as :meth:`save`)."""

    def runtimes(self) -> list[RuntimeRecord]:
        """Every runtime's last known state, by name."""

    def runtime_names(self) -> list[str]:
        """The names of the runtimes :meth:`runtimes` lists (a daemon asks at each reconcile)."""

    def deployed(self) -> dict[str, dict[str, str]]:
        """Runtime -> module -> version, as :meth:`RuntimeRecord.deployed` of each record says
        (what the deletion brake counts from; read without building the records)."""

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """One runtime's last known state."""

    def forget_runtime(self, runtime: str, fence: FenceToken | None = None) -> None:
        """Drop a deprovisioned runtime's record (under ``fence``, as :meth:`save`)."""

    def record_access(
        self, runtime: str, access: ClusterIdentity, fence: FenceToken | None = None
    ) -> None:
        """Remember where ``runtime`` was synced (see :attr:`RuntimeRecord.access`; under
        ``fence``, as :meth:`save`)."""


class CommitVerdicts(Protocol):
    """The verdicts on commits and the one in force, decided one at a time
    (:func:`may_replace`)."""

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """Record a verdict on a commit other than ACCEPTED (READING, PENDING, REFUSED, HELD)
        unless one that may not be replaced stands (:func:`may_replace`); the record that
        stands. Replicas judging the same commit at once end with one verdict, the first one
        written."""

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        """Make ``record``'s commit (ACCEPTED) the one in force, if the one in force is still
        ``expected`` (``None``: none yet) and its verdict may become ACCEPTED; in one
        transaction (compare-and-set). The commit in force afterwards: a replica whose git is
        behind another's learns the newer one instead of moving the fleet back."""

    def commit(self, commit: Head) -> CommitRecord | None:
        """The verdict on ``commit``, if one was recorded."""

    def last_accepted(self) -> CommitRecord | None:
        """The commit accepted last (the one in force): the ACCEPTED record written last, in
        the store's own order of writes, not by its ``decided`` time (replicas' clocks differ).
        No pointer of its own is needed: every ACCEPTED record is written by
        :meth:`accept_commit`, one decision at a time, so the last one written is the one its
        compare-and-set left in force."""


class BrakeLimits(Protocol):
    """The deletion brake's limits recorded by the last ``reconciler sync`` of the whole fleet."""

    def limits_in_force(self) -> Limits | None:
        """The deletion brake's limits recorded by the last ``reconciler sync`` of the whole
        fleet that went ahead (:meth:`record_limits`); ``None`` before one."""

    def record_limits(self, limits: Limits, now: datetime) -> None:
        """Record the limits of a repo a sync of the whole fleet carried out: the next sync is
        judged by the stricter of these and its own (:func:`reconciler.core.brake.limits_for`)."""


class Suspensions(Protocol):
    """The suspended runtimes (``reconciler suspend``/``resume``)."""

    def suspend(self, suspension: Suspension) -> None:
        """Suspend a runtime (again: the reason and time are replaced)."""

    def resume(self, runtime: str) -> bool:
        """Lift a runtime's suspension; whether it was suspended."""

    def suspensions(self) -> dict[str, Suspension]:
        """Every suspended runtime's suspension, by runtime."""


class CapabilityRecords(Protocol):
    """What each runtime's cluster told its last sync (:class:`Capabilities`)."""

    def record_capabilities(self, runtime: str, capabilities: Capabilities) -> None:
        """What ``runtime``'s cluster told its last sync (its version and API versions, with
        :attr:`Capabilities.recorded`), replacing what was recorded before."""

    def capabilities(self) -> dict[str, Capabilities]:
        """The capabilities recorded of every runtime's cluster, by runtime."""


class MemberLeases(Protocol):
    """The daemon's members: their heartbeats, epochs and fences (:func:`next_beat`)."""

    def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
        """Member ``name`` is alive at ``now``: a new member, or one whose last heartbeat is
        older than ``lease``, starts a new epoch (one more than its last)."""

    def members(self) -> list[Member]:
        """Every member that beat and did not leave, by name."""

    def fence(self, name: str, epoch: int, lapsed_before: datetime) -> bool:
        """Fence member ``name`` at ``epoch`` if its last heartbeat is still older than
        ``lapsed_before`` (its lease lapsed): from then on no write carrying a token of that
        epoch is accepted, and its next heartbeat starts a new epoch. Whether it was fenced
        now. A member calls this before it takes another's runtimes over."""

    def leave(self, name: str) -> None:
        """Member ``name`` stops (its runtimes go to the others at once)."""


class RolloutRecords(Protocol):
    """The rollouts, each written over the version it was read at."""

    def put_rollout(self, rollout: Rollout, fence: FenceToken | None = None) -> Rollout | None:
        """Insert ``rollout`` (version 0: unless one of its id exists) or write it over the
        version it was read at; the saved rollout (its version one more), or ``None`` when
        another writer got there first (read it again). Under ``fence`` (a daemon replica's):
        :class:`~reconciler.errors.LostOwnershipError` when it no longer holds, nothing
        written; none (a person's command): compare-and-set alone."""

    def rollouts(self, limit: int = 50) -> list[Rollout]:
        """Newest first."""

    def rollout_summaries(self, limit: int = 50) -> list[RolloutSummary]:
        """The newest rollouts without their members (what a list shows), newest first; no
        member is decoded (the summary is kept with each save)."""

    def rollout(self, rollout_id: str) -> Rollout | None:
        """A rollout by id (a unique prefix is enough)."""

    def latest_rollout(self) -> Rollout | None:
        """The newest rollout (the one that gates), if any."""


class NotificationOutbox(Outbox, Protocol):
    """The notifications outbox (:class:`~reconciler.core.outbox.Outbox`) and its pruning."""

    def prune_notifications(self, now: datetime) -> int:
        """Remove the outbox's notifications delivered or given up before ``now``; how many."""


class StatusReader(RuntimeRecords, Suspensions, OperationLedger, Protocol):
    """What a runtime's status is read from (:func:`load_statuses`, :func:`load_status`): its
    record, its suspension and its unfinished operation."""


class RunLedger(OperationLedger, RuntimeRecords, Protocol):
    """What running an operation writes (:class:`~reconciler.operations.engine.Engine`, its
    steps): the operation, claimed and saved, and the record it leaves of its runtime."""


class SyncLedger(RunLedger, Suspensions, CapabilityRecords, Protocol):
    """What the runner of a repo's operations reads and writes
    (:class:`~reconciler.operations.runner.Runner`): its :class:`RunLedger`, which runtimes
    are suspended, and what their clusters served last."""


class Prunable(OperationLedger, NotificationOutbox, Protocol):
    """What the daemon's pruning job trims: finished operations and sent notifications."""


class StateStore(
    OperationLedger,
    RuntimeRecords,
    CommitVerdicts,
    BrakeLimits,
    Suspensions,
    CapabilityRecords,
    MemberLeases,
    RolloutRecords,
    NotificationOutbox,
    Protocol,
):
    """Where operations and runtime states live, and the notifications outbox: every role at
    once. Only a composition root (the CLI's store opening, the daemon's wiring) holds one;
    every other caller takes the role it uses."""


def load_statuses(
    store: StatusReader,
    runtimes: Sequence[str] = (),
    *,
    git_suspended: Mapping[str, bool] | None = None,
) -> list[RuntimeStatus]:
    """Every runtime's status now (or those named), by :meth:`RuntimeStatus.of`: its last
    finished record seen through its unfinished operation, if one is under way, and its
    suspension (three reads, whatever the fleet's size). ``git_suspended``: runtime ->
    ``spec.suspend`` where the caller read git (else the records say)."""
    wanted = set(runtimes)
    suspended = store.suspensions()
    in_git = git_suspended or {}
    records = [r for r in store.runtimes() if not wanted or r.runtime in wanted]
    unfinished = store.unfinished_all()
    return [
        RuntimeStatus.of(
            record,
            unfinished.get(record.runtime),
            suspended.get(record.runtime),
            git_suspended=in_git.get(record.runtime),
        )
        for record in records
    ]


def load_status(
    store: StatusReader, runtime: str, *, git_suspended: bool | None = None
) -> RuntimeStatus | None:
    """One runtime's status now, as :func:`load_statuses` (``None``: the store has none)."""
    record = store.runtime(runtime)
    if record is None:
        return None
    suspension = store.suspensions().get(runtime)
    unfinished = store.unfinished(runtime)
    return RuntimeStatus.of(record, unfinished, suspension, git_suspended=git_suspended)


def may_replace(
    standing: CommitRecord | None, new: CommitRecord, in_force: Head | None = None
) -> bool:
    """Whether ``new`` may replace ``standing``, the verdict recorded on the same commit: a
    verdict is decided once. READING (a daemon reading it) and PENDING (its reading failed in a
    way that may pass) give way to anything; HELD to ACCEPTED only when ``--allow-deletions``
    named it (the record says so under :data:`ALLOWED_DELETIONS`); ACCEPTED to ACCEPTED (in
    force again after a revert), and to HELD when it is no longer ``in_force`` (a force-push
    back to it is judged again, from the commit in force)."""
    if standing is None or standing.verdict in (CommitVerdict.READING, CommitVerdict.PENDING):
        return True
    if new.verdict is CommitVerdict.ACCEPTED and standing.verdict is CommitVerdict.HELD:
        return bool(new.detail.get(ALLOWED_DELETIONS))  # not a replica that judged without
    accepted = CommitVerdict.ACCEPTED
    if new.verdict is CommitVerdict.HELD and standing.verdict is accepted:
        return standing.commit != in_force
    return new.verdict is accepted and standing.verdict is accepted


def next_beat(last: Member | None, name: str, now: datetime, lease: timedelta) -> Member:
    """Member ``name`` after a heartbeat at ``now``: the same epoch while its lease held and
    nobody fenced it, the next one after a lapse or a fence (or the first)."""
    if last is None:
        return Member(name, 1, now, now)
    if last.live(now, lease) and not last.fenced:
        return Member(name, last.epoch, now, last.started, last.fenced_epoch)
    return Member(name, last.epoch + 1, now, now, last.fenced_epoch)
