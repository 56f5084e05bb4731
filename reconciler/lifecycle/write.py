"""The writes of a lifecycle pass: apply, patch and delete through the cluster interface.

:class:`Writer` applies with server-side apply (one field manager, force), writes inventories
only when they changed, creates a missing Namespace (never labelled ours, so never deleted,
S1), takes over the fields of ``kubectl apply`` (client-side) before an apply that asks for it,
releases an object by dropping our marks, and records every answer in the pass's
:class:`~reconciler.lifecycle.live_view.LiveView` so a later stage sees it without reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.cluster.api import Cluster
from reconciler.core.inventory import Inventory, inventory_ref, same_record
from reconciler.core.objects import ObjectRef
from reconciler.core.plan import OUR_MARKS
from reconciler.core.plan_values import ObjectAction, ObjectChange
from reconciler.core.status import ChangeAction
from reconciler.core.takeover import takeover_patch
from reconciler.lifecycle.observe import Observer, namespace_ref


class Writer:
    """Changes one runtime's objects on a cluster and keeps the live view up to date."""

    def __init__(self, observer: Observer, *, field_manager: str) -> None:
        self.observer = observer
        self.cluster: Cluster = observer.cluster
        self.view = observer.view
        self.system_namespace = observer.system_namespace
        self.field_manager = field_manager
        #: Namespaces known to exist (created or seen by this writer).
        self._namespaces: set[str] = set()

    def apply(self, body: Mapping[str, Any], *, take_over: bool = False) -> None:
        """Apply ``body`` (its Namespace created first when missing); ``take_over``: the fields
        of ``kubectl apply`` (client-side) on the live object are made ours first
        (:mod:`reconciler.core.takeover`), so that what this apply leaves out is removed."""
        namespace = (body.get("metadata") or {}).get("namespace")
        if namespace:
            self.ensure_namespace(str(namespace))
        if take_over:
            self.take_over(ObjectRef.of(body))
        result = self.cluster.apply(body, field_manager=self.field_manager, force=True)
        self.view.record(ObjectRef.of(body), result)

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> None:
        """Merge-patch ``ref`` (at the version of its group served now, L12)."""
        patched = self.observer.at_served_version(
            ref, lambda at: self.cluster.patch(at, merge_patch)
        )
        self.view.record(ref, patched)

    def take_over(self, ref: ObjectRef) -> None:
        """Merge the client-side managers' fields of ``ref`` into ours, drop its
        last-applied annotation (one merge patch; nothing when there is nothing to take)."""
        live = self.observer.read(ref)
        patch = takeover_patch(live, self.field_manager) if live is not None else None
        if patch is not None:
            self.patch(ref, patch)

    def release(self, ref: ObjectRef) -> None:
        """Drop our labels and annotations from ``ref``: no longer ours, left in place."""
        self.patch(ref, unmark_patch())

    def delete(self, ref: ObjectRef) -> bool:
        """Ask for the deletion of ``ref`` (``False`` when it was gone), at the version of its
        group served now (L12: the inventory may name one no longer served); the view forgets
        it."""
        gone = self.observer.at_served_version(ref, self.cluster.delete)
        self.view.record(ref, None)
        return gone

    def delete_or_release(self, change: ObjectChange, deletion: ChangeAction) -> ChangeAction:
        """A planned deletion (``deletion``: pruned or deleted), or the release of a Namespace
        that holds others' objects or of an object marked to be kept; what was done."""
        if change.action is ObjectAction.DELETE:
            self.delete(change.ref)
            return deletion
        self.release(change.ref)
        return ChangeAction.KEPT if change.action is ObjectAction.KEEP else ChangeAction.RELEASED

    def write_inventory(self, inventory: Inventory, current: Inventory | None) -> None:
        """Write ``inventory`` unless it is stored as ``current`` already."""
        if not same_record(inventory, current):
            body = inventory.to_configmap(self.system_namespace)
            self.cluster.apply(body, field_manager=self.field_manager, force=True)
            self.view.record_inventory(inventory)

    def delete_inventory(self, module: str) -> None:
        """Delete the inventory of ``module``."""
        self.delete(inventory_ref(self.system_namespace, module))
        self.view.forget_inventory(module)

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace that is missing; never labelled ours, so never deleted (S1)."""
        if name in self._namespaces:
            return
        if name == self.system_namespace and self.view.inventories:  # they live in it
            return
        ref = namespace_ref(name)
        if self.observer.read(ref) is None:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            created = self.cluster.apply(body, field_manager=self.field_manager, force=True)
            self.view.record(ref, created)
        self._namespaces.add(name)


def unmark_patch() -> dict[str, Any]:
    """The merge patch that drops our labels and annotations."""
    patch: dict[str, Any] = {"metadata": {"labels": {}, "annotations": {}}}
    for path in OUR_MARKS:
        patch["metadata"][path[1]][path[2]] = None
    return patch
