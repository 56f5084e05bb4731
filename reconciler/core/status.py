"""What a lifecycle pass did, as frozen values (pure).

- :class:`ModuleState`: the L11 states, worst last; :func:`worst_state` is the one place that
  says which of several states is the worst (a runtime's state is its worst module's).
- :class:`ModuleError`: the error that stopped a module, kept as a type: which
  :class:`~reconciler.errors.ReconcilerError` it was, whether it is permanent, and the delay a
  transient one asked for (a 429's ``Retry-After``).
- :class:`ModuleStatus`: a module's state after a pass, with its reason, message and error.
- :class:`ChangeSetEntry` and :class:`ChangeAction`: what the pass did to each object (created,
  configured, unchanged, pruned, deleted, released, kept), the way Flux's ``ChangeSet`` reports it.
- :class:`PassResult`: one pass of the lifecycle over a runtime: module statuses and changes.
- :func:`runtime_state`: the state a runtime shows (:data:`RUNTIME_STATES`, worst first).
- :class:`~reconciler.core.reasons.Reason` (also importable from here): every reason code;
  :class:`StepFailure`: the error a step of an
  operation ended on, kept as its type with the reason code :func:`failure_reason` gives it.

The state store keeps these as JSON (``reconciler.operations.store.codec``) and reads them back
into the same types. Callers: the lifecycle executor, the operations steps, store and reports, the
daemon's metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler import errors
from reconciler.core.objects import ObjectRef
from reconciler.core.reasons import Reason as Reason  # named here too, as it always was
from reconciler.errors import (
    AccessError,
    ForbiddenError,
    InvalidObjectError,
    PermanentError,
    ReconcilerError,
    ServerError,
    SnapshotError,
    ThrottledError,
    TransientError,
)


class ModuleState(StrEnum):
    """L11 states, worst last."""

    UNMANAGED = "Unmanaged"
    READY = "Ready"
    PROCESSING = "Processing"
    DELETING = "Deleting"
    WARNING = "Warning"
    ERROR = "Error"


_SEVERITY = {state: rank for rank, state in enumerate(ModuleState)}


#: The reason a state stands for where none was recorded (a runtime without modules) or the
#: stored one is a code of a newer version.
_REASON_OF_STATE = {
    ModuleState.UNMANAGED: Reason.STRATEGY_IGNORE,
    ModuleState.READY: Reason.READY,
    ModuleState.PROCESSING: Reason.UPDATING,
    ModuleState.DELETING: Reason.DEPROVISIONING,
    ModuleState.WARNING: Reason.RETRYING,
    ModuleState.ERROR: Reason.FAILED,
}


def reason_of_state(state: ModuleState | None) -> Reason:
    """The reason ``state`` stands for when no other is known (None: a module that is gone)."""
    return Reason.REMOVED if state is None else _REASON_OF_STATE[state]


def worst_state(states: Iterable[ModuleState | None]) -> ModuleState:
    """The worst of ``states`` (``None``, a module that is gone, counts for nothing); Ready
    when there is none."""
    present = [s for s in states if s is not None]
    return max(present, key=_SEVERITY.__getitem__, default=ModuleState.READY)


@dataclass(frozen=True, slots=True)
class ModuleError:
    """The error that left a module in Error, kept as its type (never flattened to a string):
    ``cause`` is the error's class, ``retry_after`` the seconds a transient error asked to wait
    (``None`` for a permanent one)."""

    cause: type[ReconcilerError]
    message: str
    retry_after: float | None = None

    @classmethod
    def of(cls, error: ReconcilerError) -> ModuleError:
        """The kept form of ``error``."""
        delay = error.retry_after if isinstance(error, TransientError) else None
        return cls(type(error), str(error), delay)

    @property
    def permanent(self) -> bool:
        """Whether retrying cannot help (anything that is not a transient error)."""
        return not issubclass(self.cause, TransientError)

    @property
    def kind(self) -> str:
        """``permanent`` or ``transient``."""
        return "permanent" if self.permanent else "transient"

    def describe(self) -> str:
        """``ThrottledError (transient, retry after 42s)``: the cause, for logs."""
        if self.permanent:
            return f"{self.cause.__name__} (permanent)"
        if self.retry_after is None:
            return f"{self.cause.__name__} (transient)"
        return f"{self.cause.__name__} (transient, retry after {self.retry_after:g}s)"

    @staticmethod
    def cause_named(name: str, permanent: bool) -> type[ReconcilerError]:
        """The error class called ``name`` in :mod:`reconciler.errors`; a class defined elsewhere
        (a plugin's) is read back as its base, :class:`PermanentError` or
        :class:`TransientError`."""
        found = getattr(errors, name, None)
        if isinstance(found, type) and issubclass(found, ReconcilerError):
            return found
        return PermanentError if permanent else TransientError


@dataclass(frozen=True, slots=True)
class ModuleStatus:
    """A module's state after a pass, with a reason code and a message for people.

    ``state`` is ``None`` for a module whose removal finished: it is no longer there. ``error``
    is set when the module is in Error. ``ready_version`` and ``target_version`` are set while
    an upgrade has not become Ready (L15): the version that runs (the one last Ready, what the
    no-downgrade rule judges by) and the one that failed or is not Ready yet."""

    module: str
    state: ModuleState | None
    reason: Reason
    message: str
    version: str | None = None
    error: ModuleError | None = None
    ready_version: str | None = None
    target_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form, as ``reconciler status``, ``sync --format json`` and ``/status`` show it
        (``readyVersion`` and ``targetVersion`` only while an upgrade is not Ready)."""
        document: dict[str, Any] = {
            "module": self.module,
            "state": str(self.state) if self.state else None,
            "reason": str(self.reason),
            "message": self.message,
            "version": self.version,
        }
        if self.target_version is not None:
            document["readyVersion"] = self.ready_version
            document["targetVersion"] = self.target_version
        return document


class ChangeAction(StrEnum):
    """What a pass did to one object."""

    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    #: Deleted by an upgrade: the old version had it, the new one does not (L4).
    PRUNED = "pruned"
    #: Deleted with its module (L8).
    DELETED = "deleted"
    #: Left in place without our labels (strategy Ignore, L7; a Namespace others use).
    RELEASED = "released"
    #: Deleted and created again: its change was refused as immutable, and it opts in.
    REPLACED = "replaced"
    #: Dropped by a version or with its module, but marked to be kept: released, not deleted.
    KEPT = "kept"


@dataclass(frozen=True, slots=True, order=True)
class ChangeSetEntry:
    """One object's outcome in a pass."""

    module: str
    ref: ObjectRef
    action: ChangeAction

    @property
    def subject(self) -> str:
        """``Kind/namespace/name``."""
        return self.ref.subject


@dataclass(frozen=True, slots=True)
class PassResult:
    """One lifecycle pass over a runtime: every module's status and, per object, what was done.
    A dry run or a suspended runtime has neither."""

    modules: tuple[ModuleStatus, ...] = ()
    changes: tuple[ChangeSetEntry, ...] = ()

    @property
    def state(self) -> ModuleState:
        """The runtime's state after the pass: its worst module's."""
        return worst_state(m.state for m in self.modules)

    def failed(self) -> tuple[ModuleStatus, ...]:
        """Modules whose pass ended in an error."""
        return tuple(m for m in self.modules if m.error is not None)

    def in_state(self, state: ModuleState) -> tuple[ModuleStatus, ...]:
        """Modules in ``state``."""
        return tuple(m for m in self.modules if m.state is state)


#: The state of a runtime in git that no operation has touched yet (``reconciler get``, the
#: status page); never a module's.
NOT_SYNCED = "NotSynced"
#: Every state a runtime shows, worst first (:func:`runtime_state` gives one): its worst
#: module's, then ``Suspended``, then :data:`NOT_SYNCED`.
RUNTIME_STATES = (*(str(s) for s in reversed(ModuleState)), str(Reason.SUSPENDED), NOT_SYNCED)


def runtime_state(recorded: ModuleState | None, suspended: bool) -> str:
    """The one rule of the state a runtime shows (``reconciler status`` and ``get runtimes``,
    the status page, ``/status``, the metrics): ``Suspended`` while it is suspended
    (``reconciler suspend`` or ``spec.suspend``), else the state of its record, ``NotSynced``
    before its first operation (``recorded`` is ``None``)."""
    if suspended:
        return str(Reason.SUSPENDED)
    return NOT_SYNCED if recorded is None else str(recorded)


_REASONS: tuple[tuple[type[ReconcilerError], Reason], ...] = (
    (ThrottledError, Reason.THROTTLED),
    (ServerError, Reason.CLUSTER_UNREACHABLE),
    (AccessError, Reason.CLUSTER_ACCESS_FAILED),
    (SnapshotError, Reason.CLUSTER_ACCESS_FAILED),
    (ForbiddenError, Reason.FORBIDDEN),
    (InvalidObjectError, Reason.INVALID_OBJECT),
)


def failure_reason(cause: type[ReconcilerError]) -> Reason:
    """The reason code of a step that ended on an error of class ``cause``."""
    found = next((reason for kind, reason in _REASONS if issubclass(cause, kind)), None)
    if found is not None:
        return found
    return Reason.STEP_RETRYING if issubclass(cause, TransientError) else Reason.STEP_FAILED


@dataclass(frozen=True, slots=True)
class StepFailure:
    """The error the step ``step`` of an operation ended on: a failure of the operation when
    permanent, a retry of its stage when transient. ``reason`` is a :class:`Reason`."""

    step: str
    reason: Reason
    error: ModuleError

    @classmethod
    def of(cls, step: str, error: ReconcilerError) -> StepFailure:
        """The failure of ``step`` on ``error``, with its reason code."""
        return cls(step, failure_reason(type(error)), ModuleError.of(error))

    def describe(self) -> str:
        """``step Check_Cluster_Access: <the error's message>``."""
        return f"step {self.step}: {self.error.message}"
