"""Fields taken by another manager, read from ``managedFields`` as a real API server wrote them
for ``kubectl set image`` (a keyed list: one container's image is named, not the list) and for
``kubectl scale`` (the scale subresource's entry)."""

from __future__ import annotations

from typing import Any

from reconciler.core.ownership import taken_fields

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
