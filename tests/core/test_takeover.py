"""Taking an object over from ``kubectl apply`` (client-side), on plain data
(reconciler.core.takeover): the client-side managers' fields merged into ours, their entries and
the last-applied annotation removed; other managers left; nothing to do, nothing sent."""

from __future__ import annotations

from typing import Any

from reconciler.core.fielddiff import MASK
from reconciler.core.takeover import LAST_APPLIED, takeover_fields, takeover_patch

LAST_APPLIED_FIELD: dict[str, Any] = {"f:metadata": {"f:annotations": {f"f:{LAST_APPLIED}": {}}}}


def _entry(manager: str, operation: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": "v1", "fieldsV1": fields}


def _live(*entries: dict[str, Any], annotated: bool = True) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "c",
        "resourceVersion": "42",
        "managedFields": list(entries),
    }
    if annotated:
        metadata["annotations"] = {LAST_APPLIED: '{"data": {"password": "hunter2"}}'}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


CLIENT_SIDE = _entry(
    "kubectl-client-side-apply",
    "Update",
    {"f:data": {"f:a": {}, "f:b": {}}, **LAST_APPLIED_FIELD},
)
OURS = _entry("reconciler", "Apply", {"f:data": {"f:a": {}, "f:c": {}}})
CONTROLLER = _entry("kube-controller-manager", "Update", {"f:data": {"f:z": {}}})
USER_SSA = _entry("kubectl", "Apply", {"f:data": {"f:u": {}}})


def test_the_client_side_fields_are_merged_into_ours_and_the_annotation_removed() -> None:
    patch = takeover_patch(_live(CLIENT_SIDE, OURS, CONTROLLER, USER_SSA), "reconciler")

    assert patch is not None
    metadata = patch["metadata"]
    assert metadata["resourceVersion"] == "42"  # refused if the object changed since
    assert metadata["annotations"] == {LAST_APPLIED: None}
    ours, *others = metadata["managedFields"]
    assert (ours["manager"], ours["operation"]) == ("reconciler", "Apply")
    assert ours["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}}
    assert others == [CONTROLLER, USER_SSA]


def test_without_an_entry_of_ours_the_client_side_one_becomes_ours() -> None:
    before = _entry("before-first-apply", "Update", {"f:data": {"f:old": {}}})
    patch = takeover_patch(_live(CLIENT_SIDE, before, annotated=False), "reconciler")

    assert patch is not None
    assert "annotations" not in patch["metadata"]
    (ours,) = patch["metadata"]["managedFields"]
    assert (ours["manager"], ours["operation"], ours["apiVersion"]) == ("reconciler", "Apply", "v1")
    assert ours["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}, "f:old": {}}}


def test_an_object_of_ours_alone_needs_nothing() -> None:
    live = _live(OURS, USER_SSA, annotated=False)

    assert takeover_patch(live, "reconciler") is None
    assert takeover_fields(live, "reconciler") == ()


def test_the_plan_shows_the_managers_and_masks_the_annotation() -> None:
    changes = takeover_fields(_live(CLIENT_SIDE, OURS), "reconciler")

    assert [c.format() for c in changes] == [
        "metadata.managedFields: 'kubectl-client-side-apply' -> 'reconciler'",
        f"metadata.annotations.{LAST_APPLIED}: '{MASK}' -> (none)",
    ]
    assert "hunter2" not in repr(changes)
