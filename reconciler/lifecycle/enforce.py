"""Enforce a module's configuration overrides on its default configuration CR, every sync (I/O).

After a module is applied, :class:`Enforcer` makes the ``reconciler-config`` field manager own
exactly the fields the repo enforces (``config`` of the runtime and its channel), at their
enforced values, with force: a user's change to one is taken back and reported (the log, a
Warning Event on the CR, the change set, the module's status). Fields it no longer enforces
(recorded in the inventory) are released: handed to the lifecycle's own field manager at their
live values first, because server-side apply removes a field whose only owner stops applying
it, then dropped by ``reconciler-config``; the value stays and is the user's. Other fields are
never touched (L3). The decisions are pure (:mod:`reconciler.core.enforce`); the installer
calls this once per module and pass. Rules: docs/configuration.md.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from reconciler.core.enforce import (
    CONFIG_FIELD_MANAGER,
    Enforcement,
    drifted,
    enforced_paths,
    enforcement_body,
    handover_body,
    managers_of,
    owned_paths,
    present,
    split_path,
)
from reconciler.core.inventory import Inventory
from reconciler.core.model import Strategy
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.overrides import ConfigOverride
from reconciler.core.plan_values import DesiredModule
from reconciler.core.status import ChangeAction
from reconciler.lifecycle.events import EventRecorder
from reconciler.lifecycle.outcome import ChangeSet
from reconciler.lifecycle.write import Writer

log = logging.getLogger("reconciler.enforce")


class Enforcer:
    """Enforces overrides through ``writer`` (its field manager receives released fields),
    reporting to ``events`` and ``changes``."""

    def __init__(self, writer: Writer, events: EventRecorder, changes: ChangeSet) -> None:
        self.writer = writer
        self.events = events
        self.changes = changes

    def enforce(self, module: DesiredModule, inventory: Inventory) -> Enforcement | None:
        """Enforce, re-assert or release the overridden fields of ``module``'s default
        configuration (the enforced fields recorded before any apply: their union first, so
        that a crash never forgets one). ``None`` when nothing was taken back or released."""
        ref, override = _target(module, inventory)
        wanted = enforced_paths(override)
        if ref is None or not (wanted or inventory.enforced):  # L3: not even read
            return None
        live = self.writer.observer.read(ref)
        if live is None:  # L3: a deleted CR without enforced fields stays deleted
            if not wanted:
                self.writer.write_inventory(replace(inventory, enforced=()), inventory)
            return None
        current = self._record(inventory, tuple(sorted({*wanted, *inventory.enforced})))
        released = tuple(p for p in inventory.enforced if p not in wanted and present(live, p))
        if released:
            manager = self.writer.field_manager
            live = self._apply(handover_body(live, released, manager), manager)
        reverted = drifted(override, live)
        ours = (CONFIG_FIELD_MANAGER, self.writer.field_manager)
        changed_by = tuple(
            (c.path, tuple(m for m in managers_of(live, c.path) if m not in ours)) for c in reverted
        )
        owned = {p for p in owned_paths(live, CONFIG_FIELD_MANAGER) if p[:1] == ("spec",)}
        if reverted or owned != {split_path(p) for p in wanted}:
            self._apply(enforcement_body(ref, override), CONFIG_FIELD_MANAGER)
        self._record(current, wanted)
        if not reverted and not released:
            return None
        return self._report(Enforcement(module.name, ref, reverted, released, changed_by))

    def _report(self, done: Enforcement) -> Enforcement:
        say = log.warning if done.in_cluster else log.info  # a change in git is no drift
        say("module %s: %s", done.module, done.message)
        self.changes.note(done.module, done.ref, ChangeAction.CONFIGURED)
        self.events.enforcement(done)
        return done

    def _record(self, inventory: Inventory, enforced: tuple[str, ...]) -> Inventory:
        recorded = replace(inventory, enforced=enforced)
        self.writer.write_inventory(recorded, inventory)
        return recorded

    def _apply(self, body: Body, manager: str) -> Body:
        result = self.writer.cluster.apply(body, field_manager=manager, force=True)
        self.writer.view.record(ObjectRef.of(body), result)
        return result


def _target(
    module: DesiredModule, inventory: Inventory
) -> tuple[ObjectRef | None, ConfigOverride | None]:
    """The default configuration that is ours (recorded in the inventory, L3) and its override;
    a CR a user made before us, or one of a module with strategy Ignore, is never enforced."""
    rendered = module.default_configuration
    ref = inventory.default_configuration
    if rendered is None or ref is None or module.strategy is not Strategy.CREATE_AND_DELETE:
        return None, None
    if ref != ObjectRef.of(rendered.body):
        return None, None
    return ref, rendered.override
