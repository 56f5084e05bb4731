"""The live view of one runtime: what its cluster holds of our objects, read once per pass.

A sync used to GET every object it manages, once to plan and again to apply and to remove
(three reads per object). The view lists each kind once instead, by our labels and in all
namespaces (``managed-by`` and the runtime's label), and keeps what it read for the rest of the
pass: observe, plan, readiness and the blocking checks all answer from it. What a label-selected
list cannot see (an object without our labels, about to be adopted, or one that does not exist
yet) is read with one GET and remembered, absent ones included. Our own writes go into the view
as the server answered them, so a later stage of the same pass sees them without reading again.

The view holds data only; :class:`~reconciler.lifecycle.observe.Observer` does the reads and
:class:`~reconciler.lifecycle.write.Writer` records our writes.
A view lives for one run of an operation (its stages in one go); the next run starts afresh.
It also keeps the last observation and plan made from it (:class:`Planned`): while nothing it
holds changed, the next stage of the run plans from them instead of again (a sync that changes
nothing plans once, not once per stage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.core.inventory import Inventory
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import DesiredModule, LiveModule, Plan

#: (apiVersion, kind) of a list.
KindKey = tuple[str, str]


def kind_key(ref: ObjectRef) -> KindKey:
    """The list that holds ``ref``."""
    return ref.api_version, ref.kind


@dataclass(slots=True)
class LiveView:
    """Objects of one runtime as listed and read during one pass (see the module docstring)."""

    #: Kinds listed by our labels: every object of ours of that kind, by reference.
    listed: dict[KindKey, dict[ObjectRef, Body]] = field(default_factory=dict)
    #: Kinds the server does not serve: nothing of them exists.
    unserved: set[KindKey] = field(default_factory=set)
    #: Objects read one by one or written by us, ``None`` when absent or deleted.
    read: dict[ObjectRef, Body | None] = field(default_factory=dict)
    #: The runtime's inventories once read, by module.
    inventories: dict[str, Inventory] | None = None
    #: Moves on at every change of what the view holds (a list, a read, a write of ours).
    generation: int = 0
    #: The last observation and plan made from the view (see ``Lifecycle.sync``).
    planned: Planned | None = None

    def lookup(self, ref: ObjectRef) -> tuple[bool, Body | None]:
        """(whether the view knows ``ref``, its body or ``None`` when known absent)."""
        if ref in self.read:
            return True, self.read[ref]
        key = kind_key(ref)
        if key in self.unserved:
            return True, None
        listed = self.listed.get(key)
        if listed is not None and ref in listed:
            return True, listed[ref]
        return False, None

    def needs_list(self, ref: ObjectRef) -> bool:
        """Whether the kind of ``ref`` has not been listed yet."""
        key = kind_key(ref)
        return key not in self.listed and key not in self.unserved

    def record(self, ref: ObjectRef, body: Body | None) -> None:
        """What the server holds now for ``ref`` (after a read or our own write)."""
        self.read[ref] = body
        self.generation += 1

    def record_list(self, key: KindKey, items: dict[ObjectRef, Body] | None) -> None:
        """What a list of a kind found (``None``: the kind is not served)."""
        if items is None:
            self.unserved.add(key)
        else:
            self.listed[key] = items
        self.generation += 1

    def record_inventories(self, inventories: dict[str, Inventory]) -> None:
        """The runtime's inventories, as listed."""
        self.inventories = inventories
        self.generation += 1

    def record_inventory(self, inventory: Inventory) -> None:
        """An inventory we wrote."""
        if self.inventories is not None:
            self.inventories[inventory.module] = inventory
        self.generation += 1

    def forget_inventory(self, module: str) -> None:
        """An inventory we deleted."""
        if self.inventories is not None:
            self.inventories.pop(module, None)
        self.generation += 1


@dataclass(frozen=True, slots=True)
class Planned:
    """An observation of a view and the plan made from it, with what they depended on: the
    view's generation, the desired modules (the very list) and the planner's facts but the
    time (``key``)."""

    generation: int
    desired: Sequence[DesiredModule]
    key: object
    live: dict[str, LiveModule]
    plan: Plan

    def answers(self, generation: int, desired: Sequence[DesiredModule], key: object) -> bool:
        """Whether this observation and plan hold for those."""
        return self.generation == generation and self.desired is desired and self.key == key
