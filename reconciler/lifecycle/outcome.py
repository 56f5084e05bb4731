"""What one lifecycle pass did, as it goes: its change set and its modules' statuses.

:class:`ChangeSet` collects what each stage did to each object (created, configured,
unchanged, pruned, deleted, released); ``Lifecycle.execute`` starts one per pass and returns it
in the :class:`~reconciler.core.status.PassResult`. :func:`planned_status` and
:func:`failed_status` are the statuses a module gets from its plan entry or from the error
that stopped it; :func:`upgrade_status` adds, to one whose upgrade failed or is not Ready, the
version that runs and the one that did not make it (L15).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModuleAction, ModulePlan
from reconciler.core.status import (
    ChangeAction,
    ChangeSetEntry,
    ModuleError,
    ModuleState,
    ModuleStatus,
    Reason,
)
from reconciler.errors import (
    ImmutableFieldError,
    PermanentError,
    ReconcilerError,
    UnservedKindError,
)

#: Errors whose module status has a reason code of its own (else Failed or Retrying).
_REASONS: tuple[tuple[type[ReconcilerError], Reason], ...] = (
    (UnservedKindError, Reason.KIND_NOT_SERVED),
    (ImmutableFieldError, Reason.FIELD_IMMUTABLE),
)


@dataclass(slots=True)
class ChangeSet:
    """What a pass did to each object, in the order it did it."""

    entries: list[ChangeSetEntry] = field(default_factory=list)

    def note(self, module: str, ref: ObjectRef, action: ChangeAction) -> None:
        """``action`` was done to ``ref`` of ``module``."""
        self.entries.append(ChangeSetEntry(module, ref, action))

    def of_module(self, module: str) -> list[ChangeSetEntry]:
        """What was done to the objects of ``module``."""
        return [c for c in self.entries if c.module == module]

    def frozen(self) -> tuple[ChangeSetEntry, ...]:
        """The change set as a value."""
        return tuple(self.entries)


def planned_status(entry: ModulePlan, state: ModuleState, version: str | None) -> ModuleStatus:
    """The module's status in ``state``, with its plan entry's reason and message."""
    return ModuleStatus(entry.module, state, entry.reason, entry.message, version)


def upgrade_status(entry: ModulePlan, status: ModuleStatus) -> ModuleStatus:
    """L15: the status of a module whose upgrade this pass left failed or not Ready says which
    version runs (the one last Ready) and which did not make it."""
    ready, target = entry.from_version, entry.to_version
    if entry.action is not ModuleAction.UPGRADE or ready is None or target is None:
        return status
    if status.state is ModuleState.ERROR:
        message = f"{ready} runs; the upgrade to {target} failed: {status.message}"
    elif status.state is ModuleState.PROCESSING:
        message = f"{ready} runs; upgrading to {target}: {status.message}"
    else:
        return status
    return replace(status, message=message, ready_version=ready, target_version=target)


def failed_status(entry: ModulePlan, error: ReconcilerError) -> ModuleStatus:
    """The module's Error status; the error is kept with its type and retry delay."""
    reason = Reason.RETRYING if not isinstance(error, PermanentError) else Reason.FAILED
    reason = next((r for kind, r in _REASONS if isinstance(error, kind)), reason)
    return ModuleStatus(
        entry.module,
        ModuleState.ERROR,
        reason,
        str(error),
        entry.from_version,
        ModuleError.of(error),
    )
