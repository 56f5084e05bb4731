"""Fields taken by another manager, read from ``managedFields`` as a real API server wrote them
for ``kubectl set image`` (a keyed list: one container's image is named, not the list) and for
``kubectl scale`` (the scale subresource's entry)."""

from __future__ import annotations

from typing import Any

from reconciler.core.ownership import ENTRY_KEY, kept_entries, taken_fields

CONTAINER = 'k:{"name":"manager"}'


def _deployment(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"managedFields": list(entries)}}


def _ours(image: bool, replicas: bool) -> dict[str, Any]:
    item: dict[str, Any] = {".": {}, "f:name": {}, **({"f:image": {}} if image else {})}
    spec: dict[str, Any] = {"f:template": {"f:spec": {"f:containers": {CONTAINER: item}}}}
    if replicas:
        spec["f:replicas"] = {}
    return {"manager": "reconciler", "operation": "Apply", "fieldsV1": {"f:spec": spec}}


SCALE = {"manager": "kubectl", "operation": "Update", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}}  # fmt: skip
SET_IMAGE = {"manager": "kubectl-set", "operation": "Update", "time": "2026-12-07T21:01:32Z",
             "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                 CONTAINER: {"f:image": {}}}}}}}}  # fmt: skip


def test_set_image_names_the_containers_image_and_the_manager() -> None:
    before = _deployment(_ours(image=True, replicas=True))
    after = _deployment(_ours(image=False, replicas=True), SET_IMAGE)

    taken = taken_fields(before, after, {"reconciler"})

    assert taken == {"spec.template.spec.containers[name=manager].image": ["kubectl-set"]}


def test_scale_names_replicas_and_an_unchanged_entry_of_another_manager_takes_nothing() -> None:
    before = _deployment(_ours(image=True, replicas=True))
    scaled = _deployment(_ours(image=True, replicas=False), SCALE)

    assert taken_fields(before, scaled, {"reconciler"}) == {"spec.replicas": ["kubectl"]}
    ours_back = _deployment(_ours(image=True, replicas=True))
    assert taken_fields(scaled, ours_back, {"reconciler"}) == {}
    dropped = _deployment(_ours(image=True, replicas=False), SCALE)
    assert taken_fields(scaled, dropped, {"reconciler"}) == {}  # nobody else wrote


def test_a_state_kept_with_the_others_keys_only_finds_the_same_fields() -> None:
    """A watch cache keeps the other managers' entries as keys (kept_entries): a field taken
    is found as from the whole state, and an entry that did not change is still no writer."""
    shared = {**SET_IMAGE, "manager": "kubectl-edit"}  # owns the image with us, unchanged
    before = _deployment(_ours(image=True, replicas=True), shared)
    kept = {"metadata": {"managedFields": kept_entries(before, {"reconciler"})}}
    taken = _deployment(_ours(image=True, replicas=False), shared, SCALE)
    dropped = _deployment(_ours(image=False, replicas=True), shared)

    assert [set(e) for e in kept["metadata"]["managedFields"]][1] == {"manager", ENTRY_KEY}
    assert taken_fields(kept, taken, {"reconciler"}) == {"spec.replicas": ["kubectl"]}
    assert taken_fields(kept, dropped, {"reconciler"}) == {}  # we stopped applying the image
    assert taken_fields(before, dropped, {"reconciler"}) == {}
