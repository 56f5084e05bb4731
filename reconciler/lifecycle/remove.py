"""Remove a module git dropped (L4, L8-L10): delete, release, or report what blocks it.

:class:`Remover` carries out a removal's plan entry: with the Ignore strategy our marks are
dropped from every object (released) and the inventory deleted, the objects left in place;
otherwise the objects are deleted in reverse order with CRDs last (a Namespace holding others'
objects released instead). While instances of the module's kinds exist the removal is
blocked: the Deleting state, a Warning Event on each blocking object, and the default
configuration (deleted first) taken out of the inventory. A module waits for the modules
removed with it that depend on it (:func:`dependents_left`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from reconciler.core.plan_values import DesiredModule, LiveModule, ModuleAction, ModulePlan
from reconciler.core.status import ChangeAction, ModuleState, ModuleStatus, Reason
from reconciler.lifecycle.events import EventRecorder
from reconciler.lifecycle.outcome import ChangeSet, planned_status
from reconciler.lifecycle.write import Writer


class Remover:
    """Carries out the removals of one pass (see the module docstring)."""

    def __init__(self, writer: Writer, events: EventRecorder, changes: ChangeSet) -> None:
        self.writer = writer
        self.events = events
        self.changes = changes

    def remove(self, entry: ModulePlan, live: LiveModule) -> ModuleStatus:
        """Carry out a removal; the module's status (``None`` state: gone)."""
        if entry.action is ModuleAction.REMOVE_IGNORE:
            return self.release(entry, live)
        inventory = live.inventory
        assert inventory is not None
        for change in entry.changes:
            done = self.writer.delete_or_release(change, ChangeAction.DELETED)
            self.changes.note(entry.module, change.ref, done)
        if entry.action is ModuleAction.BLOCKED_DELETION:
            self.events.deletion_blocked(entry.module, entry.blocking)
            if inventory.default_configuration is not None:
                cleared = replace(inventory, default_configuration=None)
                self.writer.write_inventory(cleared, inventory)
            return planned_status(entry, ModuleState.DELETING, inventory.version)
        self.writer.delete_inventory(entry.module)
        message = "; ".join((entry.message, *entry.notes))
        return ModuleStatus(entry.module, None, entry.reason, message, inventory.version)

    def release(self, entry: ModulePlan, live: LiveModule) -> ModuleStatus:
        """L9, Ignore: our marks dropped from every object, the inventory deleted; Unmanaged."""
        inventory = live.inventory
        assert inventory is not None
        for change in entry.changes:
            self.writer.release(change.ref)
            self.changes.note(entry.module, change.ref, ChangeAction.RELEASED)
        self.writer.delete_inventory(entry.module)
        return planned_status(entry, ModuleState.UNMANAGED, inventory.version)


def dependents_left(
    entry: ModulePlan,
    dependencies: Mapping[str, tuple[str, ...]],
    statuses: Mapping[str, ModuleStatus],
    desired: Mapping[str, DesiredModule],
) -> list[str]:
    """Modules removed in this plan that depend on ``entry``'s module and are not gone yet."""
    if entry.module in desired or entry.action is ModuleAction.REMOVE_IGNORE:
        return []
    return [
        name
        for name, status in statuses.items()
        if name not in desired
        and status.state is not None
        and status.state is not ModuleState.UNMANAGED
        and entry.module in dependencies.get(name, ())
    ]


def waiting_for_dependents(entry: ModulePlan, waiting: list[str]) -> ModuleStatus:
    """The status of a removal that waits for the modules that depend on it to be gone."""
    message = f"deletion of {entry.module} waits until {', '.join(waiting)} is gone"
    return ModuleStatus(
        entry.module,
        ModuleState.DELETING,
        Reason.WAITING_FOR_DEPENDENTS,
        message,
        entry.from_version,
    )
