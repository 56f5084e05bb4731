"""Objects first made with ``kubectl apply`` (client-side), on the in-memory cluster and on the
real API server: the manager ``kubectl-client-side-apply`` owns their fields by an ``Update``,
so a field our apply stops setting stays live (the server's own behaviour, kept equal in memory);
taken over (its fields merged into ours, the last-applied annotation removed, as kubectl's
csaupgrade does) the field goes. Through whole syncs: a module installed with ``kubectl apply``
is adopted (L6) and taken over, and a field its next version drops is removed from the server."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.model import FIELD_MANAGER
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import ObjectAction
from reconciler.core.takeover import takeover_patch
from tests.support.contract_modules import WidgetFleet, operator
from tests.support.contract_targets import (
    KUBECTL_CLIENT_SIDE,
    LAST_APPLIED,
    create_client_side,
)


def _settings(fleet: WidgetFleet, **data: str) -> dict[str, Any]:
    return fleet.object("ConfigMap", "settings", data=data)


def _managers(body: Body) -> set[tuple[str, str]]:
    entries = body["metadata"].get("managedFields") or []
    return {(str(e["manager"]), str(e["operation"])) for e in entries}


def _live(fleet: WidgetFleet, ref: ObjectRef) -> Body:
    body = fleet.get(ref)
    assert body is not None, ref.subject
    return body


def _namespace(fleet: WidgetFleet) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fleet.namespace}}
    fleet.target.cluster.apply(body, field_manager=FIELD_MANAGER)


def test_a_client_side_owner_keeps_a_dropped_field_until_taken_over(fleet: WidgetFleet) -> None:
    _namespace(fleet)
    create_client_side(fleet.target, _settings(fleet, a="1", b="2"))
    ref = ObjectRef.of(_settings(fleet))
    cluster = fleet.target.cluster
    created = _live(fleet, ref)
    assert (KUBECTL_CLIENT_SIDE, "Update") in _managers(created)
    assert LAST_APPLIED in created["metadata"]["annotations"]

    cluster.apply(_settings(fleet, a="1", b="2"), field_manager=FIELD_MANAGER)
    cluster.apply(_settings(fleet, a="1"), field_manager=FIELD_MANAGER)
    assert _live(fleet, ref)["data"] == {"a": "1", "b": "2"}  # kubectl still owns b

    patch = takeover_patch(_live(fleet, ref), FIELD_MANAGER)
    assert patch is not None
    cluster.patch(ref, patch)
    taken = _live(fleet, ref)
    assert _managers(taken) == {(FIELD_MANAGER, "Apply")}
    assert LAST_APPLIED not in (taken["metadata"].get("annotations") or {})
    cluster.apply(_settings(fleet, a="1"), field_manager=FIELD_MANAGER)
    assert _live(fleet, ref)["data"] == {"a": "1"}


def test_a_takeover_of_an_object_changed_since_it_was_read_is_refused(
    fleet: WidgetFleet,
) -> None:
    _namespace(fleet)
    create_client_side(fleet.target, _settings(fleet, a="1"))
    ref = ObjectRef.of(_settings(fleet))
    stale = _live(fleet, ref)
    fleet.target.cluster.apply(_settings(fleet, c="3"), field_manager="someone")
    patch = takeover_patch(stale, FIELD_MANAGER)
    assert patch is not None

    with pytest.raises(Exception, match="modified"):
        fleet.target.cluster.patch(ref, patch)


def test_a_module_installed_with_kubectl_apply_is_adopted_and_a_dropped_field_removed(
    fleet: WidgetFleet,
) -> None:
    _namespace(fleet)
    create_client_side(fleet.target, operator(fleet.namespace, "1.0.0"))
    create_client_side(fleet.target, _settings(fleet, a="1", b="2"))
    ref = ObjectRef.of(_settings(fleet))

    adopted = fleet.sync("1.0.0", [_settings(fleet, a="1", b="2")])

    assert adopted.state == "Ready", adopted.modules
    entry = adopted.plan.module("widget")
    assert entry is not None
    assert entry.reason == "Adopted"
    change = next(c for c in entry.changes if c.ref == ref)
    assert change.takeover
    assert change.action is ObjectAction.UPDATE
    assert "metadata.managedFields: 'kubectl-client-side-apply' -> 'reconciler'" in [
        f.format() for f in change.fields
    ]
    for taken in (ref, ObjectRef("apps/v1", "Deployment", fleet.namespace, "widget-operator")):
        body = _live(fleet, taken)
        assert (KUBECTL_CLIENT_SIDE, "Update") not in _managers(body), taken.subject
        assert LAST_APPLIED not in (body["metadata"].get("annotations") or {})
    assert not fleet.sync("1.0.0", [_settings(fleet, a="1", b="2")]).plan.has_changes

    dropped = fleet.sync("1.1.0", [_settings(fleet, a="1")])

    entry = dropped.plan.module("widget")
    assert entry is not None
    fields = [f.format() for c in entry.changes if c.ref == ref for f in c.fields]
    assert "data.b: '2' -> (none)" in fields
    assert _live(fleet, ref)["data"] == {"a": "1"}
