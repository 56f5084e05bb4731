"""One object at every served version of its kind (L12), as an API server answers it.

A custom resource is one object whatever served version of its CRD it is read, listed or
written at: the same uid and fields (the ``None`` conversion), its ``apiVersion`` the one
asked; discovery prefers the highest version (``v2`` before ``v1``); a version the CRD stops
serving is refused as a kind no longer served, while the object stays readable at the others.
Runs on the in-memory cluster and the real one (conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.objects import ObjectRef, is_established
from reconciler.errors import UnknownKindError
from tests.support.contract_targets import MANAGER, Target, apply_namespace, gizmo_crd, wait_until
from tests.support.identity_modules import autoscaler, cpu_metric


def _versions(crd: dict[str, Any], *versions: tuple[str, bool, bool]) -> dict[str, Any]:
    """``crd`` with its versions (name, served, storage), each with the first one's schema."""
    schema = crd["spec"]["versions"][0]["schema"]
    crd["spec"]["versions"] = [
        {"name": name, "served": served, "storage": storage, "schema": schema}
        for name, served, storage in versions
    ]
    return crd


def _gizmo(target: Target, version: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{target.group}/{version}",
        "kind": "Gizmo",
        "metadata": {"name": "main", "namespace": namespace},
        "spec": spec,
    }


def _served(target: Target, version: str) -> bool:
    return target.cluster.kind_info(f"{target.group}/{version}", "Gizmo") is not None


def _refused(target: Target, ref: ObjectRef) -> bool:
    try:
        target.cluster.get(ref)
    except UnknownKindError:
        return True
    return False


def test_a_custom_resource_is_one_object_at_every_served_version(target: Target) -> None:
    namespace = apply_namespace(target)
    crd = target.cluster.apply(gizmo_crd(target), field_manager=MANAGER)
    crd_ref = ObjectRef.of(crd)
    target.created.insert(0, crd_ref)
    wait_until(lambda: is_established(target.cluster.get(crd_ref) or {}) and _served(target, "v1"))
    created = target.cluster.apply(_gizmo(target, "v1", namespace, size=1), field_manager=MANAGER)
    v1 = ObjectRef.of(created)
    v2 = v1.at(f"{target.group}/v2")

    moved = _versions(gizmo_crd(target), ("v1", True, False), ("v2", True, True))
    target.cluster.apply(moved, field_manager=MANAGER)
    wait_until(lambda: _served(target, "v2"))

    read = target.cluster.get(v2)
    assert read is not None
    assert (read["apiVersion"], read["metadata"]["uid"], read["spec"]) == (
        f"{target.group}/v2",
        created["metadata"]["uid"],
        {"size": 1},
    )
    listed = target.cluster.list_objects(f"{target.group}/v2", "Gizmo", namespace=namespace)
    assert [(b["apiVersion"], b["metadata"]["uid"]) for b in listed] == [
        (f"{target.group}/v2", created["metadata"]["uid"])
    ]
    preferred = target.cluster.kinds_in_group(target.group, "Gizmo")
    assert preferred is not None
    assert preferred.version == "v2"

    written = target.cluster.apply(_gizmo(target, "v2", namespace, size=2), field_manager=MANAGER)
    assert (written["apiVersion"], written["metadata"]["uid"]) == (
        f"{target.group}/v2",
        created["metadata"]["uid"],
    )
    at_v1 = target.cluster.get(v1)
    assert at_v1 is not None
    assert (at_v1["apiVersion"], at_v1["spec"]) == (f"{target.group}/v1", {"size": 2})

    dropped = _versions(gizmo_crd(target), ("v1", False, False), ("v2", True, True))
    target.cluster.apply(dropped, field_manager=MANAGER)
    wait_until(lambda: _refused(target, v1))  # the server stops serving it a moment later

    with pytest.raises(UnknownKindError):
        target.cluster.list_objects(f"{target.group}/v1", "Gizmo", namespace=namespace)
    still = target.cluster.get(v2)
    assert still is not None
    assert still["metadata"]["uid"] == created["metadata"]["uid"]


def test_a_horizontal_pod_autoscaler_is_one_object_at_autoscaling_v1_and_v2(
    target: Target,
) -> None:
    namespace = apply_namespace(target)
    created = target.cluster.apply(
        autoscaler("autoscaling/v1", "web", 70, namespace), field_manager=MANAGER
    )
    v1 = ObjectRef.of(created)
    v2 = v1.at("autoscaling/v2")
    preferred = target.cluster.kinds_in_group("autoscaling", "HorizontalPodAutoscaler")
    assert preferred is not None
    assert preferred.version == "v2"

    read = target.cluster.get(v2)
    assert read is not None
    assert (read["apiVersion"], read["metadata"]["uid"]) == (
        "autoscaling/v2",
        created["metadata"]["uid"],
    )
    assert read["spec"]["metrics"] == cpu_metric(70)
    assert "targetCPUUtilizationPercentage" not in read["spec"]
    listed = target.cluster.list_objects(
        "autoscaling/v2", "HorizontalPodAutoscaler", namespace=namespace
    )
    assert [b["spec"]["metrics"] for b in listed] == [cpu_metric(70)]

    written = target.cluster.apply(
        autoscaler("autoscaling/v2", "web", 60, namespace), field_manager=MANAGER
    )
    assert (written["metadata"]["uid"], written["spec"]["metrics"]) == (
        created["metadata"]["uid"],
        cpu_metric(60),
    )
    at_v1 = target.cluster.get(v1)
    assert at_v1 is not None
    assert (at_v1["apiVersion"], at_v1["spec"]["targetCPUUtilizationPercentage"]) == (
        "autoscaling/v1",
        60,
    )
    assert "metrics" not in at_v1["spec"]
