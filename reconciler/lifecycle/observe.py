"""The reads of a lifecycle pass: what the cluster shows of a runtime's modules (S2).

:class:`Observer` reads through the :class:`~reconciler.cluster.api.Cluster` interface into the
pass's :class:`~reconciler.lifecycle.live_view.LiveView`: the runtime's inventories, the
desired and recorded objects of each module (one list per kind by our labels, a GET only for
what a list cannot show), the running versions, and what blocks a deletion (instances of a
module's kinds, others' objects in a Namespace, custom resources left under a CRD an upgrade
drops). It also answers the readiness questions of the install (a CRD Established, an operator
available), asking the server again when the view does not show them so. A failing read
raises before anything is changed. The rules it applies to what it read are pure and live in
``reconciler.core`` (:mod:`~reconciler.core.live`, :mod:`~reconciler.core.intent`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from reconciler.cluster.api import Cluster
from reconciler.core.enforce import enforcing
from reconciler.core.health import Health, Judgement, judge, named_objects, overall
from reconciler.core.intent import rebuilt_inventory, recorded_refs
from reconciler.core.inventory import LABEL_INVENTORY, Inventory, inventory_from_configmap
from reconciler.core.live import (
    finalizers_holding,
    judged_version,
    labelled_ours,
    ours_or_generated,
    running_version,
    stall,
    workload_available,
)
from reconciler.core.model import LABEL_MANAGED_BY, LABEL_RUNTIME, MANAGED_BY_VALUE, Strategy
from reconciler.core.objects import Body, ObjectRef, crd_kind, is_established
from reconciler.core.plan_values import DesiredModule, LiveModule, Occupants
from reconciler.errors import PermanentError, UnknownKindError
from reconciler.lifecycle.live_view import LiveView, kind_key

_T = TypeVar("_T")

#: The objects that block a deletion a status names, at most (the rest are counted).
BLOCKING_KEPT = 20

#: A module's recorded objects with their live bodies (``None``: missing).
InventoryBranch = tuple[Inventory, dict[ObjectRef, Body | None]]


class Observer:
    """Reads one runtime's objects from a cluster into a live view."""

    def __init__(self, cluster: Cluster, view: LiveView, *, system_namespace: str) -> None:
        self.cluster = cluster
        self.view = view
        self.system_namespace = system_namespace

    # -- modules -------------------------------------------------------------------------------

    def observe(self, runtime: str, desired: Sequence[DesiredModule]) -> dict[str, LiveModule]:
        """What the cluster shows for every desired or recorded module; raises on a failed read."""
        inventories = self.read_inventories(runtime)
        live: dict[str, LiveModule] = {}
        for module in desired:
            live[module.name] = self._desired(runtime, module, inventories.get(module.name))
        for name, inventory in inventories.items():
            if name not in live:
                live[name] = self._removed(inventory)
        return live

    def read_inventories(self, runtime: str, *, fresh: bool = False) -> dict[str, Inventory]:
        """Every inventory of ``runtime`` in the system namespace (listed once per pass, or
        again when ``fresh``)."""
        inventories = self.view.inventories
        if inventories is None or fresh:
            inventories = self._list_inventories(runtime)
            self.view.record_inventories(inventories)
        return dict(inventories)

    def inventory_tree(self, runtime: str) -> list[InventoryBranch]:
        """Each recorded module (by name) with the live body of every object its inventory
        lists, the default configuration included (``None``: missing). One list per kind."""
        inventories = [inv for _, inv in sorted(self.read_inventories(runtime).items())]
        found = self.get_all(runtime, [r for inv in inventories for r in recorded_refs(inv)])
        return [(inv, {r: found.get(r) for r in recorded_refs(inv)}) for inv in inventories]

    def _list_inventories(self, runtime: str) -> dict[str, Inventory]:
        labels = {LABEL_INVENTORY: "true", LABEL_RUNTIME: runtime}
        found = self.cluster.list_objects(
            "v1", "ConfigMap", namespace=self.system_namespace, labels=labels
        )
        inventories = {}
        for body in found:
            try:
                inventory = inventory_from_configmap(body)
            except ValueError as error:
                raise PermanentError(str(error)) from error
            inventories[inventory.module] = inventory
        return inventories

    def _desired(
        self, runtime: str, module: DesiredModule, inventory: Inventory | None
    ) -> LiveModule:
        objects = self.get_all(runtime, _desired_refs(module, inventory))
        running, source = judged_version(inventory, *running_version(module.module, objects))
        if inventory is None:
            rebuilt = rebuilt_inventory(runtime, module, objects, running)
            return LiveModule(
                rebuilt, objects, running, inventory_stored=False, version_source=source
            )
        wanted = {ObjectRef.of(o.body) for o in module.objects}
        stale = [r for r in inventory.objects if r not in wanted and r in objects]
        return LiveModule(
            inventory,
            objects,
            running,
            namespace_users=self._namespace_users(stale),
            crd_instances=self._crd_instances(stale, objects, inventory.default_configuration),
            version_source=source,
        )

    def _removed(self, inventory: Inventory) -> LiveModule:
        refs = list(inventory.objects)
        if inventory.default_configuration is not None:
            refs.append(inventory.default_configuration)
        objects = self.get_all(inventory.runtime, refs)
        if inventory.strategy is Strategy.IGNORE:
            return LiveModule(inventory, objects, inventory.version)
        blocking, total, held = self._blocking(inventory, objects)
        users = self._namespace_users([r for r in inventory.objects if r in objects])
        return LiveModule(
            inventory, objects, inventory.version, blocking, total, held, namespace_users=users
        )

    # -- what blocks a deletion ----------------------------------------------------------------

    def _namespace_users(self, refs: Sequence[ObjectRef]) -> dict[str, Occupants]:
        """For each Namespace among ``refs``: the objects in it that are not ours (a user's
        ConfigMaps, PVCs, ...); Namespaces holding none are left out."""
        names = [r.name for r in refs if r.kind == "Namespace" and not r.group]
        if not names:
            return {}
        kinds = [k for k in self.cluster.served_kinds() if k.namespaced and k.kind != "Event"]
        users: dict[str, Occupants] = {}
        for name in names:
            found = [
                ObjectRef.of(body)
                for kind in kinds
                for body in self.cluster.list_objects(kind.api_version, kind.kind, namespace=name)
                if not ours_or_generated(body)
            ]
            if found:
                users[name] = _occupants(found)
        return users

    def _crd_instances(
        self,
        refs: Sequence[ObjectRef],
        objects: Mapping[ObjectRef, Body],
        ours: ObjectRef | None,
    ) -> dict[ObjectRef, Occupants]:
        """For each CRD among ``refs`` (an upgrade drops them): its custom resources left, but
        for ``ours`` (the default configuration, which goes with its CRD) unless it is being
        deleted already: finalizers hold it (L13), and the CRD waits for it too."""
        left: dict[ObjectRef, Occupants] = {}
        for ref in refs:
            if ref.kind != "CustomResourceDefinition":
                continue
            group, kind = crd_kind(objects[ref])
            found = [
                ObjectRef.of(body)
                for body in self._instances(group, kind)
                if ObjectRef.of(body) != ours or finalizers_holding(body) is not None
            ]
            if found:
                left[ref] = _occupants(found)
        return left

    def _blocking(
        self, inventory: Inventory, objects: Mapping[ObjectRef, Body]
    ) -> tuple[tuple[ObjectRef, ...], int, dict[ObjectRef, tuple[str, ...]]]:
        """Instances of the module's kinds, except the default configuration we delete first
        and the module's own objects (a ServiceMonitor of its manifest, deleted with it) when
        they carry our labels (one recorded as intended may be a user's); and (L13) every
        instance and object of the module (``objects``) that is being deleted, with the
        finalizers that hold it: the first of them, their count, the finalizers of those."""
        ours = {*inventory.objects, inventory.default_configuration}
        found: dict[tuple[str, str, str, str], tuple[ObjectRef, tuple[str, ...] | None]] = {}
        for group, kind in inventory.managed_kinds:
            for body in self._instances(group, kind):
                ref, holding = ObjectRef.of(body), finalizers_holding(body)
                mine = ref in ours and labelled_ours(body, inventory.runtime, inventory.module)
                if holding is not None or not mine:
                    found[_identity(ref)] = (ref, holding)
        for ref, body in objects.items():
            holding = finalizers_holding(body)
            if holding is not None:
                found.setdefault(_identity(ref), (ref, holding))
        first = sorted(found.values(), key=lambda pair: pair[0])[:BLOCKING_KEPT]
        held = {ref: holding for ref, holding in first if holding is not None}
        return tuple(ref for ref, _ in first), len(found), held

    def _instances(self, group: str, kind: str) -> list[Body]:
        """Every object of ``kind`` in ``group``, in all namespaces, in the version served now
        (none when the kind is not served). Discovery may name a version the server no longer
        serves (the cluster refreshes it then): asked again once, never read as none."""
        info = self.cluster.kinds_in_group(group, kind)
        if info is None:
            return []
        try:
            return self.cluster.list_objects(info.api_version, kind)
        except UnknownKindError:  # that version is gone: ask the refreshed discovery
            info = self.cluster.kinds_in_group(group, kind)
        return self.cluster.list_objects(info.api_version, kind) if info else []

    # -- objects -------------------------------------------------------------------------------

    def get_all(self, runtime: str, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Body]:
        """The objects of ``refs`` that exist: one list per kind by our labels, then a GET
        only for what those lists cannot show (objects without our labels, or absent); an
        object in a Namespace that does not exist is absent without a GET."""
        for ref in refs:
            if self.view.needs_list(ref):
                self._list_kind(runtime, ref)
        unknown = {r.namespace for r in refs if r.namespace and not self.view.lookup(r)[0]}
        absent = {ns for ns in sorted(unknown) if self.read(namespace_ref(ns)) is None}
        found = {}
        for ref in refs:
            if ref.namespace in absent and not self.view.lookup(ref)[0]:
                self.view.record(ref, None)  # no namespace, no object in it: no GET
                continue
            body = self.read(ref)
            if body is not None:
                found[ref] = body
        return found

    def _list_kind(self, runtime: str, ref: ObjectRef) -> None:
        labels = {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_RUNTIME: runtime}
        try:
            items = self.at_served_version(
                ref, lambda at: self.cluster.list_objects(at.api_version, at.kind, labels=labels)
            )
        except UnknownKindError:  # its CRD is not there (yet): nothing of that kind exists
            self.view.record_list(kind_key(ref), None)
            return
        self.view.record_list(kind_key(ref), {_listed_ref(ref, body): body for body in items})

    def read(self, ref: ObjectRef, *, fresh: bool = False) -> Body | None:
        """``ref`` from the view, else (or when ``fresh``) read from the server and kept."""
        known, body = self.view.lookup(ref)
        if known and not fresh:
            return body
        try:
            body = self.at_served_version(ref, self.cluster.get)
        except UnknownKindError:
            body = None
        self.view.record(ref, body)
        return body

    def at_served_version(self, ref: ObjectRef, call: Callable[[ObjectRef], _T]) -> _T:
        """``call`` on ``ref`` at its apiVersion, or (L12: one the server no longer serves, or
        not yet: a CRD's version moved) at the version of its group the server serves now;
        :class:`UnknownKindError` when it serves the kind in none."""
        try:
            return call(ref)
        except UnknownKindError:
            info = self.cluster.kinds_in_group(ref.group, ref.kind)
            if info is None or info.api_version == ref.api_version:
                raise
        return call(ref.at(info.api_version))

    def labelled_ours(self, ref: ObjectRef, inventory: Inventory) -> bool:
        """Whether ``ref`` exists and carries our labels for the inventory's runtime and module
        (an absent kind counts as absent)."""
        return labelled_ours(self.read(ref), inventory.runtime, inventory.module)

    # -- readiness (L2) ------------------------------------------------------------------------

    def unestablished(self, module: DesiredModule) -> list[str]:
        """The names of the module's CRDs that are not Established (asked of the server when
        the view does not show them so: one just applied), or not serving yet every version
        they serve now (L12: a version an upgrade adds, its custom resources shipped at it)."""
        pending = []
        for rendered in module.objects:
            if rendered.body.get("kind") != "CustomResourceDefinition":
                continue
            ref = ObjectRef.of(rendered.body)
            live = self.read(ref)
            if live is None or not is_established(live):
                live = self.read(ref, fresh=True)
            if live is None or not is_established(live) or self._unserved(rendered.body):
                pending.append(str(rendered.body["metadata"]["name"]))
        return pending

    def _unserved(self, crd: Mapping[str, Any]) -> list[str]:
        """The versions ``crd`` serves that discovery does not show served (yet)."""
        group, kind = crd_kind(crd)
        versions = [v for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
        return [
            str(v.get("name"))
            for v in versions
            if self.cluster.kind_info(f"{group}/{v.get('name')}", kind) is None
        ]

    def recorded_inventory(self, module: str) -> Inventory | None:
        """The inventory of ``module`` as this pass last listed or wrote it."""
        return (self.view.inventories or {}).get(module)

    def operator_available(self, module: DesiredModule) -> bool:
        """Whether the module's operator workload is available (asked of the server when the
        view does not show it so)."""
        operator = _operator_ref(module)
        if operator is None:
            return False
        live = self.read(operator)
        if live is None or not workload_available(live):
            live = self.read(operator, fresh=True)
        return live is not None and workload_available(live)

    def health(self, module: DesiredModule) -> Judgement:
        """What the objects the module's version names in ``healthChecks`` say, as one
        judgement (:func:`~reconciler.core.health.overall`): each read from the view, asked of
        the server again when it is not healthy there; a check naming no object: Failed."""
        judged: list[tuple[str, Judgement]] = []
        for check, refs in named_objects(module).items():
            if not refs:
                missing = f"names no object of version {module.resolved.version}"
                judged.append((check.subject, Judgement(Health.FAILED, missing)))
            for ref in refs:
                found = judge(self.read(ref))
                if found.health is not Health.CURRENT:
                    found = judge(self.read(ref, fresh=True))
                judged.append((f"{ref.kind} {ref.name}", found))
        return overall(judged)

    def stalls(self, module: DesiredModule) -> list[str]:
        """What of the module will not get ready by itself (:func:`~reconciler.core.live.stall`):
        its CRDs and its operator as the view last read them, each ``Kind name: why``."""
        refs = [
            ObjectRef.of(o.body)
            for o in module.objects
            if o.body.get("kind") == "CustomResourceDefinition"
        ]
        operator = _operator_ref(module)
        found = []
        for ref in [*refs, *([operator] if operator is not None else [])]:
            live = self.read(ref)
            why = stall(live) if live is not None else None
            if why is not None:
                found.append(f"{ref.kind} {ref.name}: {why}")
        return found


def _operator_ref(module: DesiredModule) -> ObjectRef | None:
    """The reference of the module's operator workload among its objects."""
    spec = module.module
    return next(
        (
            ObjectRef.of(o.body)
            for o in module.objects
            if o.body.get("kind") == spec.operator_kind
            and o.body["metadata"]["name"] == spec.operator_name
        ),
        None,
    )


def namespace_ref(name: str) -> ObjectRef:
    """The reference of the Namespace ``name``."""
    return ObjectRef("v1", "Namespace", "", name)


def _desired_refs(module: DesiredModule, inventory: Inventory | None) -> list[ObjectRef]:
    """What to read of a desired module: its objects, its default configuration unless it was
    created already (L3: not read again) or has fields enforced now or before, and what its
    inventory lists besides."""
    refs = [ObjectRef.of(o.body) for o in module.objects]
    created = (
        inventory is not None
        and inventory.default_configuration_done
        and inventory.default_configuration is not None
    )
    rendered = module.default_configuration
    if rendered is not None and (not created or enforcing(rendered.override, inventory)):
        refs.append(ObjectRef.of(rendered.body))
    if inventory is not None:
        refs += [r for r in inventory.objects if r not in refs]
    return refs


def _occupants(found: list[ObjectRef]) -> Occupants:
    found = sorted(found)
    return Occupants(len(found), tuple(found[:BLOCKING_KEPT]))


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    """An object's identity whatever version it was read in: group, kind, namespace, name."""
    return ref.group, ref.kind, ref.namespace, ref.name


def _listed_ref(asked: ObjectRef, body: Body) -> ObjectRef:
    """The reference of a listed object (the same object at whatever version it was listed,
    L12; its body says which)."""
    metadata = body.get("metadata") or {}
    return ObjectRef(
        asked.api_version,
        asked.kind,
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
    )
