"""Operations, stages and steps as records, and the results steps return (pure).

An operation (provision, update, deprovision) of one runtime is a list of stages; a stage is a
list of steps. These records are what the state store keeps and what ``reconciler operations``
shows. No secret is ever part of them (S4). What the steps find and do is a frozen
:class:`OperationData` (typed values; the store alone turns it into JSON); a runtime's status is
one :class:`RuntimeRecord`, made from an operation by :meth:`RuntimeRecord.of` and shown alike by
``reconciler status``, ``/status`` and the metrics. Callers: the engine, the steps, the store,
the CLI, the daemon.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from reconciler.cluster.api import NO_IDENTITY, ClusterIdentity
from reconciler.core.head import Head, head_text
from reconciler.core.model import ClusterAccess, Settings
from reconciler.core.plan_values import ModuleAction, PlannedModule
from reconciler.core.status import (
    ChangeAction,
    ModuleState,
    ModuleStatus,
    PassResult,
    Reason,
    StepFailure,
    reason_of_state,
    runtime_state,
    worst_state,
)
from reconciler.errors import PermanentError, ReconcilerError
from reconciler.operations.step_data import StepData


class OperationType(StrEnum):
    """What an operation does to a runtime."""

    PROVISION = "provision"
    UPDATE = "update"
    DEPROVISION = "deprovision"


class OperationState(StrEnum):
    """Where an operation stands."""

    PENDING = "pending"
    IN_PROGRESS = "in progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class StepState(StrEnum):
    """Where a step stands."""

    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(slots=True)
class StepRecord:
    """One step of a stage, with its attempts and times."""

    name: str
    state: StepState = StepState.PENDING
    attempts: int = 0
    first_started: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    retry_at: datetime | None = None
    message: str = ""


@dataclass(slots=True)
class StageRecord:
    """One stage: its steps and whether it is finished (never repeated then, O2)."""

    name: str
    steps: list[StepRecord]
    done: bool = False
    finished: datetime | None = None


def operation_limits(settings: Settings) -> dict[OperationType, timedelta]:
    """O4: the time limits ``spec.operations.timeouts`` sets, by operation type."""
    return {OperationType(kind): limit for kind, limit in settings.operation_timeouts.items()}


@dataclass(frozen=True, slots=True)
class OperationData:
    """What an operation's steps found and did, kept with it in the store (never a secret, S4).
    Steps replace it (``replace(operation.data, ...)``); only the store turns it into JSON."""

    #: How the runtime's cluster is reached (a runtime that left git is deprovisioned with it).
    access: ClusterAccess | None = None
    #: ``Plan_Changes``: what the plan decided for each module.
    plan: tuple[PlannedModule, ...] = ()
    #: ``Apply_Modules``: the pass over the modules git wants.
    applied: PassResult = field(default_factory=PassResult)
    #: ``Remove_Modules``, ``Delete_Module_Manifests``: the pass over the modules git dropped.
    removals: PassResult = field(default_factory=PassResult)
    #: ``Wait_For_Managed_Resources``: the objects a deprovision waits for, for people.
    blocking: str = ""
    #: ``Delete_Inventory``: modules whose inventory is still in the cluster.
    inventories_left: tuple[str, ...] = ()
    #: The error the last step run ended on (a permanent one failed the operation, a transient
    #: one has its stage retried); ``None`` once a step ends well.
    failure: StepFailure | None = None
    #: Each step's own data (:mod:`reconciler.operations.step_data`): :meth:`kept_by`,
    #: :meth:`keeping`.
    steps: StepData = field(default_factory=StepData)

    def kept_by(self, step: str) -> dict[str, Any]:
        """What ``step`` kept in this operation (an empty mapping when nothing): found again
        when its stage runs again (a retry, a resume after a crash or restart)."""
        return self.steps.of(step)

    def keeping(self, step: str, data: Mapping[str, Any]) -> OperationData:
        """This data with ``data`` kept for ``step`` (JSON, small, never a secret: else a
        :class:`~reconciler.errors.PermanentError` naming the step); saved with the operation
        when the step ends: ``operation.data = operation.data.keeping(self.name, {...})``."""
        return replace(self, steps=self.steps.keeping(step, data))

    @property
    def modules(self) -> tuple[ModuleStatus, ...]:
        """Every module reported on: applied ones, then removals (``None`` state: gone)."""
        return self.applied.modules + self.removals.modules

    @property
    def present(self) -> tuple[ModuleStatus, ...]:
        """The modules still there: applied ones and removals not finished."""
        return self.applied.modules + tuple(m for m in self.removals.modules if m.state)

    @property
    def has_error(self) -> bool:
        """Whether a module is in Error."""
        return any(m.state is ModuleState.ERROR for m in self.modules)

    def compacted(self) -> OperationData:
        """This data without the objects a pass left unchanged (every object of every module
        on a resync that found no drift: most of a finished operation's record, and of no
        use once it is finished)."""
        return replace(
            self, applied=_changed_only(self.applied), removals=_changed_only(self.removals)
        )

    def outcome_text(self) -> str:
        """What the operation did to the modules, for its message: ``1 upgraded, 3
        unchanged``, :data:`NO_CHANGE`; a deprovision counts the modules removed. Told from
        each module's state at the end, not from the plan made before a wait: a removal held
        by users' resources that went on once they were gone is ``removed``."""
        if not self.plan:
            gone = [m for m in self.removals.modules if not m.state]
            return f"{len(gone)} removed" if gone else NO_CHANGE
        final = {m.module: m for m in self.modules}
        counts: dict[str, int] = {}
        for planned in self.plan:
            done = _done(planned, final.get(planned.module))
            counts[done] = counts.get(done, 0) + 1
        if set(counts) == {_DONE[ModuleAction.UNCHANGED]}:
            return NO_CHANGE
        order = list(dict.fromkeys(_DONE.values()))
        return ", ".join(f"{counts[done]} {done}" for done in order if done in counts)


#: The message of an operation that succeeded and changed nothing; the state store merges a
#: run of them into the newest (:class:`Retention`).
NO_CHANGE = "no change"


def _changed_only(result: PassResult) -> PassResult:
    kept = tuple(c for c in result.changes if c.action is not ChangeAction.UNCHANGED)
    return replace(result, changes=kept)


@dataclass(frozen=True, slots=True)
class Retention:
    """Which finished operations the state store keeps (``StateStore.prune``): of a run of
    operations of one runtime that succeeded and changed nothing, the newest only; then the
    newest :attr:`keep_per_runtime` of each runtime, and every failure younger than
    :attr:`keep_failures_for`. Pending and in-progress operations are never removed.
    ``--keep-operations`` and ``--keep-failures`` of the daemon and ``operations prune``
    (:func:`reconciler.cli.options.retention_options`, with these defaults)."""

    keep_per_runtime: int = 10
    keep_failures_for: timedelta = timedelta(days=7)


#: What an operation that succeeded did to a module of each planned action, in its message.
_DONE = {
    ModuleAction.INSTALL: "installed",
    ModuleAction.UPGRADE: "upgraded",
    ModuleAction.RECONFIGURE: "reconfigured",
    ModuleAction.UNCHANGED: "unchanged",
    ModuleAction.REMOVE_IGNORE: "released",
    ModuleAction.REMOVE_DELETE: "removed",
    ModuleAction.BLOCKED_DOWNGRADE: "held",
    ModuleAction.BLOCKED_UNKNOWN_VERSION: "held",
    ModuleAction.BLOCKED_DELETION: "held",
    ModuleAction.DEFERRED_WINDOW: "held",
}

#: The reasons of a module left as it was on purpose (the plan's held actions, seen at the end).
_HELD_REASONS = frozenset(
    {
        Reason.DOWNGRADE_NOT_SUPPORTED,
        Reason.UNKNOWN_RUNNING_VERSION,
        Reason.WAITING_FOR_MAINTENANCE_WINDOW,
        Reason.WAITING_FOR_RESOURCES,
    }
)


def _done(planned: PlannedModule, final: ModuleStatus | None) -> str:
    """What the operation did to the module ``planned`` was made for, by its state at the end
    (``final``; ``None``: not reported): gone is ``removed``, released by strategy Ignore is
    ``released``, still held is ``held``; a module the plan held that the last pass carried
    to the target version (a maintenance window that opened during a wait) is ``upgraded``."""
    if final is None:
        return _DONE[planned.action]
    if final.state is None:
        return _DONE[ModuleAction.REMOVE_DELETE]
    if final.state is ModuleState.UNMANAGED:
        return _DONE[ModuleAction.REMOVE_IGNORE]
    if final.reason in _HELD_REASONS:
        return "held"
    done = _DONE[planned.action]
    if done == "held" and planned.to_version and final.version == planned.to_version:
        return _DONE[ModuleAction.UPGRADE]
    return done


@dataclass(slots=True)
class Operation:
    """One operation of one runtime, as stored."""

    id: str
    runtime: str
    type: OperationType
    state: OperationState
    created: datetime
    deadline: datetime
    stages: list[StageRecord]
    commit: Head | None = None
    message: str = ""
    updated: datetime | None = None
    owner: str = ""
    lease_until: datetime | None = None
    retrigger_of: str = ""
    data: OperationData = field(default_factory=OperationData)

    @property
    def finished(self) -> bool:
        """Succeeded or failed."""
        return self.state in (OperationState.SUCCEEDED, OperationState.FAILED)

    def stage(self, name: str) -> StageRecord:
        """The stage called ``name``."""
        return next(s for s in self.stages if s.name == name)

    def skipped_steps(self) -> list[tuple[str, StepRecord]]:
        """Steps skipped past their own time limit (O5), with their stage."""
        return [(s.name, t) for s in self.stages for t in s.steps if t.state is StepState.SKIPPED]


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step asks for (O1): go on (default), try the stage again after ``retry_after``
    seconds, or fail the operation with ``error``, kept as its type (its kind, permanent or
    transient, and the delay a transient one asked for go with it to the operation's failure).
    ``message`` is recorded either way."""

    message: str = ""
    retry_after: float | None = None
    error: ReconcilerError | None = None

    def __post_init__(self) -> None:
        """An error given as text (a plugin written for earlier versions) is a permanent one."""
        if isinstance(self.error, str):
            object.__setattr__(self, "error", PermanentError(self.error))

    @property
    def recorded(self) -> str:
        """What the step's row records: the error's message, else the message."""
        return str(self.error) if self.error is not None else self.message


@dataclass(frozen=True, slots=True)
class RuntimeRecord:
    """A runtime's status: its state (its worst module's), reason, message, commit and each
    module's status. What the store keeps, ``reconciler status`` and ``/status`` show and the
    metrics count; :meth:`of` is the one way it is made from an operation."""

    runtime: str
    state: ModuleState
    reason: Reason
    message: str
    commit: Head | None
    updated: datetime
    modules: tuple[ModuleStatus, ...] = ()
    #: Which cluster the runtime was last synced through: an operation never deprovisions it
    #: through another (rehearsal and reality never mix).
    access: ClusterIdentity = NO_IDENTITY

    @classmethod
    def of(
        cls,
        operation: Operation,
        now: datetime,
        *,
        suspended: bool = False,
        before: RuntimeRecord | None = None,
    ) -> RuntimeRecord:
        """The runtime's status as ``operation`` left it: the modules still there, the worst
        state among them (Ready when none) and the reason of the first module in it. A
        ``suspended`` operation plans nothing: the modules are those of the record ``before``
        (they still run), and the reason says it is suspended (``spec.suspend``)."""
        modules = operation.data.present
        if suspended and not modules and before is not None:
            modules = before.modules
        state = worst_state(m.state for m in modules)
        reason = next((m.reason for m in modules if m.state is state), Reason.READY)
        message = f"{len(modules)} modules"
        if suspended:
            reason, message = Reason.SUSPENDED, SUSPENDED_IN_GIT
        return cls(operation.runtime, state, reason, message, operation.commit, now, modules)

    @classmethod
    def failed(
        cls, operation: Operation, before: RuntimeRecord | None, now: datetime
    ) -> RuntimeRecord:
        """The runtime's status once ``operation`` failed: Error, with the reason code of the
        step's error (:class:`~reconciler.core.status.Reason`) and the operation's message; the
        modules it reached, else those ``before`` had."""
        failure = operation.data.failure
        reason = failure.reason if failure is not None else Reason.STEP_FAILED
        modules = operation.data.present or (before.modules if before is not None else ())
        message = f"{operation.type} {operation.id} failed: {operation.message}"
        return cls(
            operation.runtime, ModuleState.ERROR, reason, message, operation.commit, now, modules
        )

    def deployed(self) -> dict[str, str]:
        """Module -> version of the modules this record says the runtime runs."""
        return {
            m.module: m.version or ""
            for m in self.modules
            if m.state is not None and m.state is not ModuleState.UNMANAGED
        }

    def to_json(self) -> dict[str, Any]:
        """JSON form, the same for ``reconciler status --format json`` and ``/status``."""
        return {
            "runtime": self.runtime,
            "state": str(self.state),
            "reason": str(self.reason),
            "message": self.message,
            "commit": head_text(self.commit),
            "updated": self.updated.isoformat(),
            "modules": [m.to_json() for m in self.modules],
        }


#: The message of a runtime suspended by ``spec.suspend`` (``reconciler suspend`` says its own).
SUSPENDED_IN_GIT = "suspended (spec.suspend)"


@dataclass(frozen=True, slots=True)
class RuntimeStatus:
    """What ``reconciler status`` and ``/status`` show of a runtime: its state now, from its
    newest operation whether finished or not (Processing with what it waits for, Deleting with
    what blocks a removal), and, while an operation is under way, the last finished result
    beside it."""

    current: RuntimeRecord
    #: The unfinished operation ``current`` comes from (``None``: the record is current).
    operation: Operation | None = None
    #: The last finished result, while ``operation`` is under way.
    last: RuntimeRecord | None = None
    #: A suspension made with ``reconciler suspend``, if any.
    suspension: Suspension | None = None
    #: Suspended, by ``reconciler suspend`` or ``spec.suspend``: nothing is changed there.
    suspended: bool = False

    @classmethod
    def of(
        cls,
        record: RuntimeRecord,
        unfinished: Operation | None,
        suspension: Suspension | None = None,
        *,
        git_suspended: bool | None = None,
    ) -> RuntimeStatus:
        """The one rule of a runtime's state, for ``status``, ``get``, ``/status`` and the
        metrics: ``record`` (the last finished result, Error when that operation failed) seen
        through ``unfinished``, if any (an operation that retries on an error is Error with
        that error's reason until one succeeds); Suspended when ``suspension`` is set or
        ``spec.suspend`` is (``git_suspended``; ``None``: as the record says)."""
        in_git = record.reason == Reason.SUSPENDED if git_suspended is None else git_suspended
        suspended = suspension is not None or in_git
        if unfinished is None:
            return cls(record, suspension=suspension, suspended=suspended)
        current = _under_way(record, unfinished)
        return cls(current, unfinished, record, suspension, suspended)

    @property
    def state(self) -> str:
        """The runtime's state as shown: ``Suspended``, else its record's state."""
        return runtime_state(self.current.state, self.suspended)

    @staticmethod
    def state_of(status: RuntimeStatus | None, *, suspended_in_git: bool) -> str:
        """The state a runtime listed from git and the store shows (``get runtimes``, the
        status page): its status's, else, before its first operation, ``Suspended`` when git
        suspends it and ``NotSynced`` when not (:func:`runtime_state`)."""
        if status is None:
            return runtime_state(None, suspended_in_git)
        return status.state

    @property
    def reason(self) -> Reason:
        """The reason code shown with :attr:`state`."""
        return Reason.SUSPENDED if self.suspended else self.current.reason

    @property
    def message(self) -> str:
        """What the runtime's state means, for people."""
        if self.suspension is not None:
            return self.suspension.describe()
        return SUSPENDED_IN_GIT if self.suspended else self.current.message

    def to_json(self) -> dict[str, Any]:
        """The runtime's JSON (:meth:`RuntimeRecord.to_json`) with ``operation`` (the one under
        way, or ``null``) and ``lastFinished`` (the record it will replace, or ``null``)."""
        operation = self.operation
        return self.current.to_json() | {
            "state": self.state,
            "reason": str(self.reason),
            "message": self.message,
            "suspended": self.suspended,
            "operation": None
            if operation is None
            else {
                "id": operation.id,
                "type": str(operation.type),
                "state": str(operation.state),
                "message": operation.message,
            },
            "lastFinished": self.last.to_json() if self.last is not None else None,
            "suspension": None
            if self.suspension is None
            else {"since": self.suspension.since.isoformat(), "reason": self.suspension.reason},
        }


def _under_way(record: RuntimeRecord, operation: Operation) -> RuntimeRecord:
    """The runtime's state as an unfinished operation shows it: Error while a step retries on
    an error (an unreachable API server), and while nothing is known yet after a failed one."""
    updated = operation.updated or operation.created
    message = operation.message or f"{operation.type} under way"
    failure = operation.data.failure
    if failure is not None:
        modules = operation.data.present or record.modules
        return RuntimeRecord(
            record.runtime,
            ModuleState.ERROR,
            failure.reason,
            message,
            operation.commit,
            updated,
            modules,
            record.access,
        )
    if operation.type is OperationType.DEPROVISION:
        return RuntimeRecord(
            record.runtime,
            ModuleState.DELETING,
            Reason.DEPROVISIONING,
            message,
            operation.commit,
            updated,
            record.modules,
            record.access,
        )
    modules = operation.data.present
    if not modules and record.state is ModuleState.ERROR:  # Error until an operation succeeds
        under_way = f"{record.message} ({operation.type} {operation.id} under way: {message})"
        return replace(record, message=under_way, updated=updated)
    if not modules:
        provisioning = operation.type is OperationType.PROVISION
        return RuntimeRecord(
            record.runtime,
            ModuleState.PROCESSING,
            Reason.PROVISIONING if provisioning else Reason.UPDATING,
            message,
            operation.commit,
            updated,
            record.modules,
            record.access,
        )
    state = worst_state(m.state for m in modules)
    reason = next((m.reason for m in modules if m.state is state), reason_of_state(state))
    return RuntimeRecord(
        record.runtime, state, reason, message, operation.commit, updated, modules, record.access
    )


class CommitVerdict(StrEnum):
    """What the daemon decided about a commit; kept so that a restart decides the same.
    READING and PENDING are no verdicts yet: a daemon is reading it, or its reading failed in a
    way that may pass (a fetch cut, an unreachable channels source) and is tried again."""

    READING = "reading"
    PENDING = "pending"
    ACCEPTED = "accepted"
    REFUSED = "refused"
    HELD = "held"


@dataclass(slots=True)
class CommitRecord:
    """A commit the daemon judged: its verdict, when, why, and the details shown in /status."""

    commit: Head
    verdict: CommitVerdict
    decided: datetime
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class Member:
    """A daemon replica sharing the store: alive while its heartbeat is younger than the lease.
    ``epoch`` grows each time it joins again after its lease ran out (fencing: what it did
    under an older epoch is no longer its to go on with)."""

    name: str
    epoch: int
    heartbeat: datetime
    started: datetime
    #: The last epoch another member fenced (it found the lease lapsed and took the runtimes
    #: over): no write carrying a token of that epoch or an older one is accepted.
    fenced_epoch: int = 0

    def live(self, now: datetime, lease: timedelta) -> bool:
        """Whether its last heartbeat is within ``lease`` of ``now``."""
        return now - self.heartbeat <= lease

    @property
    def fenced(self) -> bool:
        """Whether its current epoch was fenced by another member."""
        return self.fenced_epoch >= self.epoch


@dataclass(frozen=True, slots=True)
class FenceToken:
    """Who writes, carried into every write of a run to the state store: a member and the
    epoch the run began in. The store checks it in the statement that writes (the member's
    epoch is still that one and was not fenced), so a replica paused past its lease and
    resumed cannot write, whatever it checked before the pause."""

    member: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Suspension:
    """A runtime suspended from the command line (``reconciler suspend``): nothing is changed
    in its cluster until ``reconciler resume``. ``spec.suspend: true`` in git suspends too, and
    wins: resuming does not undo it."""

    runtime: str
    since: datetime
    reason: str = ""

    def describe(self) -> str:
        """``suspended since 2026-11-24 10:00 UTC: <reason>``."""
        when = self.since.strftime("%Y-%m-%d %H:%M UTC")
        return f"suspended since {when}" + (f": {self.reason}" if self.reason else "")
