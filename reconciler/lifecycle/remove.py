"""Remove a module git dropped (L4, L8-L10, L13): delete, release, or report what blocks it.

:class:`Remover` carries out a removal's plan entry: with the Ignore strategy our marks are
dropped from every object (released) and the inventory deleted, the objects left in place;
otherwise the default configuration is deleted first and, once it is gone from the server, the
objects in reverse order with CRDs last (a Namespace holding others' objects released instead).
While instances of the module's kinds exist, or finalizers hold the default configuration, the
removal is blocked: the Deleting state, a Warning Event on each blocking object, and the default
configuration (deleted first) taken out of the inventory unless finalizers hold it. Gone means
gone (L13): what the removal deleted and the server still shows (a CRD or Namespace whose
content is held, an object with finalizers) keeps the module Deleting, naming it and its
finalizers, and the inventory in place, until a later pass finds it gone (never waited for
within the pass: the daemon is woken by its deletion, ``sync`` asks again). A module waits for
the modules removed with it that depend on it (:func:`dependents_left`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.core.hooks import delete_hooks_of
from reconciler.core.inventory import Inventory
from reconciler.core.live import finalizers_holding
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import blocking_message
from reconciler.core.plan_values import (
    DesiredModule,
    LiveModule,
    ModuleAction,
    ModulePlan,
    ObjectAction,
    ObjectChange,
)
from reconciler.core.status import ChangeAction, ModuleState, ModuleStatus, Reason
from reconciler.lifecycle.events import EventRecorder
from reconciler.lifecycle.hooks import HookRunner
from reconciler.lifecycle.outcome import ChangeSet, planned_status
from reconciler.lifecycle.write import Writer

#: Kinds the server deletes only once their content is gone.
EMPTIED_FIRST = frozenset({"CustomResourceDefinition", "Namespace"})


class Remover:
    """Carries out the removals of one pass (see the module docstring)."""

    def __init__(
        self,
        writer: Writer,
        events: EventRecorder,
        changes: ChangeSet,
        hooks: HookRunner | None = None,
    ) -> None:
        self.writer = writer
        self.events = events
        self.changes = changes
        #: Runs the pre-delete and post-delete hooks the inventory kept (none: not run).
        self.hooks = hooks

    def remove(self, entry: ModulePlan, live: LiveModule) -> ModuleStatus:
        """Carry out a removal; the module's status (``None`` state: gone)."""
        if entry.action is ModuleAction.REMOVE_IGNORE:
            return self.release(entry, live)
        inventory = live.inventory
        assert inventory is not None
        if entry.action is ModuleAction.BLOCKED_DELETION:
            return self._blocked(entry, inventory)
        hooks = delete_hooks_of(inventory.delete_hooks)
        before = self._hooks(entry, hooks, 0)
        if before is not None:
            return before  # nothing deleted past a pre-delete hook not done
        defaults = [c for c in entry.changes if c.default_configuration]
        self._delete(entry, defaults)
        held = self._left([c.ref for c in defaults])
        if held:  # a finalizer came after the plan: its operator stays to remove it (L13)
            return self._held(entry, inventory.version, held, running=True)
        rest = [c for c in entry.changes if not c.default_configuration]
        self._delete(entry, rest)
        held = self._left([c.ref for c in rest if _lingers(c, live)])
        if held:  # a CRD or Namespace whose content is held, an object with finalizers
            return self._held(entry, inventory.version, held, running=False)
        after = self._hooks(entry, hooks, 1)
        if after is not None:
            return after  # the inventory (and the hooks it keeps) stays until they are done
        self.writer.delete_inventory(entry.module)
        message = "; ".join((entry.message, *entry.notes))
        return ModuleStatus(entry.module, None, entry.reason, message, inventory.version)

    def _hooks(
        self, entry: ModulePlan, hooks: Sequence[Mapping[str, Any]], when: int
    ) -> ModuleStatus | None:
        """Phase ``when`` (0: pre-delete, 1: post-delete) of the module's delete hooks."""
        if self.hooks is None or not hooks:
            return None
        return self.hooks.phase(entry, hooks, when, "delete")

    def _blocked(self, entry: ModulePlan, inventory: Inventory) -> ModuleStatus:
        """L8, L13: the default configuration deleted, a Warning on each object that holds the
        removal back; the default configuration taken out of the inventory unless finalizers
        hold it (it is waited for as the module's own object until it is gone)."""
        self._delete(entry, entry.changes)
        held = dict(entry.held)
        self.events.deletion_blocked(entry.module, entry.blocking, held)
        default = inventory.default_configuration
        if default is not None and default not in held:
            cleared = replace(inventory, default_configuration=None)
            self.writer.write_inventory(cleared, inventory)
        return planned_status(entry, ModuleState.DELETING, inventory.version)

    def _delete(self, entry: ModulePlan, changes: Sequence[ObjectChange]) -> None:
        for change in changes:
            done = self.writer.delete_or_release(change, ChangeAction.DELETED)
            self.changes.note(entry.module, change.ref, done)

    def _left(self, refs: Sequence[ObjectRef]) -> dict[ObjectRef, tuple[str, ...]]:
        """Those of the deleted ``refs`` the server still shows (asked again, not waited
        for), with the finalizers that hold them."""
        read = self.writer.observer.read
        left = {}
        for ref in refs:
            body = read(ref, fresh=True)
            if body is not None:
                left[ref] = finalizers_holding(body) or ()
        return left

    def _held(
        self,
        entry: ModulePlan,
        version: str | None,
        held: Mapping[ObjectRef, tuple[str, ...]],
        *,
        running: bool,
    ) -> ModuleStatus:
        """L13: the removal is not finished while what it deleted is still on the server:
        Deleting, naming it and its finalizers; the inventory stays for the next pass."""
        refs = tuple(held)
        self.events.deletion_blocked(entry.module, refs, held)
        message = blocking_message(entry.module, refs, len(refs), held, running=running)
        return ModuleStatus(
            entry.module, ModuleState.DELETING, Reason.WAITING_FOR_RESOURCES, message, version
        )

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


def _lingers(change: ObjectChange, live: LiveModule) -> bool:
    """Whether the deletion of ``change`` may leave the object on the server for a while: a
    CRD or Namespace (their content goes first), or an object with finalizers."""
    if change.action is not ObjectAction.DELETE:
        return False
    body = live.objects.get(change.ref) or {}
    return change.ref.kind in EMPTIED_FIRST or bool((body.get("metadata") or {}).get("finalizers"))
