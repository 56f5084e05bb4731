"""Enforce a module's configuration overrides on its default configuration CR, every sync (I/O).

After a module is applied, :class:`Enforcer` makes the ``reconciler-config`` field manager own
exactly the fields the repo enforces (``config`` of the runtime and its channel), at their
enforced values, with force: a user's change to one is taken back and reported. Fields it no
longer enforces (recorded in the inventory) are released: handed to the ``reconciler`` manager
at their live values first, because server-side apply removes a field whose only owner stops
applying it, then dropped by ``reconciler-config``; the value stays and is the user's. Other
fields are never touched (L3). The decisions are pure (:mod:`reconciler.core.enforce`); the
lifecycle executor calls this at one place. Rules: docs/configuration.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from reconciler.cluster.api import Cluster
from reconciler.core.enforce import (
    CONFIG_FIELD_MANAGER,
    Enforcement,
    drifted,
    enforced_paths,
    enforcement_body,
    handover_body,
    owned_paths,
    present,
    split_path,
)
from reconciler.core.inventory import Inventory
from reconciler.core.model import Strategy
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.overrides import ConfigOverride
from reconciler.core.plan import DesiredModule
from reconciler.errors import UnknownKindError
from reconciler.lifecycle.observe import LiveView

log = logging.getLogger("reconciler.enforce")

#: Records an inventory: ``write(new, current)``.
InventoryWriter = Callable[[Inventory, Inventory], None]


def enforcing(module: DesiredModule, inventory: Inventory | None) -> bool:
    """Whether the default configuration of ``module`` has fields enforced now or recorded as
    enforced: then the lifecycle reads it on every pass, though L3 made it the user's."""
    rendered = module.default_configuration
    recorded = inventory is not None and bool(inventory.enforced)
    return rendered is not None and (rendered.override is not None or recorded)


@dataclass(frozen=True, slots=True)
class Enforcer:
    """Enforces overrides on one cluster: ``manager`` is the lifecycle's own field manager,
    to which released fields are handed; ``write`` records an inventory."""

    cluster: Cluster
    view: LiveView
    manager: str
    write: InventoryWriter

    def enforce(self, module: DesiredModule, inventory: Inventory) -> Enforcement | None:
        """Enforce, re-assert or release the overridden fields of ``module``'s default
        configuration (the enforced fields recorded before any apply: their union first, so
        that a crash never forgets one). ``None`` when nothing was taken back or released."""
        ref, override = _target(module, inventory)
        if ref is None:
            return None
        wanted = enforced_paths(override)
        if not wanted and not inventory.enforced:  # L3: the CR is the user's, not even read
            return None
        live = self._read(ref)
        if live is None:  # L3: a deleted CR without enforced fields stays deleted
            if inventory.enforced and not wanted:
                self.write(replace(inventory, enforced=()), inventory)
            return None
        current = self._record(inventory, tuple(sorted({*wanted, *inventory.enforced})))
        released = tuple(p for p in inventory.enforced if p not in wanted and present(live, p))
        if released:
            live = self._apply(handover_body(live, released, self.manager), self.manager)
        reverted = drifted(override, live)
        owned = {p for p in owned_paths(live, CONFIG_FIELD_MANAGER) if p[:1] == ("spec",)}
        if reverted or owned != {split_path(p) for p in wanted}:
            self._apply(enforcement_body(ref, override), CONFIG_FIELD_MANAGER)
        self._record(current, wanted)
        if not reverted and not released:
            return None
        enforcement = Enforcement(module.name, ref, reverted, released)
        log.warning("module %s: %s", module.name, enforcement.message)
        return enforcement

    def _record(self, inventory: Inventory, enforced: tuple[str, ...]) -> Inventory:
        if enforced == inventory.enforced:
            return inventory
        recorded = replace(inventory, enforced=enforced)
        self.write(recorded, inventory)
        return recorded

    def _read(self, ref: ObjectRef) -> Body | None:
        known, body = self.view.lookup(ref)
        if known:
            return body
        try:
            body = self.cluster.get(ref)
        except UnknownKindError:
            body = None
        self.view.record(ref, body)
        return body

    def _apply(self, body: Body, manager: str) -> Body:
        result = self.cluster.apply(body, field_manager=manager, force=True)
        self.view.record(ObjectRef.of(body), result)
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
