"""Keep on prune through whole syncs, on the in-memory cluster and on the real API server: an
object marked ``reconciler.dev/prune: disabled`` that a version drops, and one marked with Helm's
``helm.sh/resource-policy: keep`` when its module is removed, stay on the server without our
labels and annotation and out of the inventory, reported ``kept``; the others are deleted."""

from __future__ import annotations

from typing import Any

from reconciler.core.inventory import inventory_ref
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction
from reconciler.lifecycle.executor import SyncResult
from tests.support.contract_modules import OPERATOR, WidgetFleet


def _config_map(fleet: WidgetFleet, name: str, **annotations: str) -> dict[str, Any]:
    body = fleet.object("ConfigMap", name, data={"keep": "me"})
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def _done(result: SyncResult, ref: ObjectRef) -> list[ChangeAction]:
    return [c.action for c in result.outcome.changes if c.ref == ref]


def _unmarked(fleet: WidgetFleet, ref: ObjectRef) -> bool:
    body = fleet.get(ref)
    assert body is not None, f"{ref.subject} was deleted"
    labels = body["metadata"].get("labels") or {}
    annotations = body["metadata"].get("annotations") or {}
    ours = {LABEL_MANAGED_BY, LABEL_MODULE, LABEL_RUNTIME} & set(labels)
    return not ours and ANNOTATION_MODULE_VERSION not in annotations


def _inventory(fleet: WidgetFleet) -> str:
    body = fleet.get(inventory_ref(fleet.system, "widget"))
    return str(body["data"]) if body is not None else ""


def test_marked_objects_are_released_not_deleted_by_an_upgrade_and_a_removal(
    fleet: WidgetFleet,
) -> None:
    kept = _config_map(fleet, "kept", **{"reconciler.dev/prune": "disabled"})
    plain = _config_map(fleet, "plain")
    helm = _config_map(fleet, "helm", **{"helm.sh/resource-policy": "keep"})
    kept_ref, plain_ref, helm_ref = (ObjectRef.of(b) for b in (kept, plain, helm))
    operator_ref = ObjectRef("apps/v1", "Deployment", fleet.namespace, OPERATOR)
    assert fleet.sync("1.0.0", [kept, plain, helm]).state == "Ready"

    upgraded = fleet.sync("2.0.0", [helm])

    assert _done(upgraded, kept_ref) == [ChangeAction.KEPT]
    assert _done(upgraded, plain_ref) == [ChangeAction.PRUNED]
    assert fleet.get(plain_ref) is None
    assert _unmarked(fleet, kept_ref)
    assert "kept" not in _inventory(fleet)
    assert "helm" in _inventory(fleet)

    removed = fleet.sync(None)

    assert _done(removed, helm_ref) == [ChangeAction.KEPT]
    assert _unmarked(fleet, helm_ref)
    assert fleet.get(operator_ref) is None or "deletionTimestamp" in (
        fleet.get(operator_ref) or {}
    ).get("metadata", {})
    assert fleet.get(inventory_ref(fleet.system, "widget")) is None
    assert _unmarked(fleet, kept_ref)  # released once: left alone since
