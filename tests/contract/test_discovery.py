"""Discovery, the way an API server answers it: which kinds are served, and what happens when a
kind goes away while a client still remembers it.

A dynamic client's discovery answers more than the kinds a server serves: for every kind it
adds the ``XxxList`` kind of its lists, which can be neither listed nor read by name (the real
adapter once handed ``ConfigMapList`` to a caller that listed every served kind, and the
removal of a module with a Namespace failed with ``ResourceList.get() missing 1 required
positional argument: 'body'``). And a kind remembered from an earlier discovery (a CRD deleted
since, a cluster rebuilt at the same URL) is answered ``404 page not found``, not a NotFound of
an object: it must read as a kind no longer served (the real adapter said ``list Keda: 404 Not
Found`` at every later sync). Runs on the in-memory cluster and the real one (conftest.py).
"""

from __future__ import annotations

import pytest

from reconciler.core.objects import ObjectRef, is_established
from reconciler.errors import UnknownKindError
from tests.support.contract_targets import MANAGER, Target, apply_namespace, gizmo_crd, wait_until


def test_every_served_kind_is_a_kind_of_objects_that_can_be_listed(target: Target) -> None:
    namespace = apply_namespace(target)
    served = target.cluster.served_kinds()

    for info in served:
        where = namespace if info.namespaced else None
        try:
            found = target.cluster.list_objects(info.api_version, info.kind, namespace=where)
        except UnknownKindError:  # gone since (another test's CRD, on a shared server)
            assert target.cluster.kind_info(info.api_version, info.kind) is None, info
            continue
        assert isinstance(found, list), info

    kinds = {(k.group, k.kind) for k in served}
    assert ("", "ConfigMap") in kinds
    assert not {(g, k) for g, k in kinds if k.endswith("List") and (g, k[:-4]) in kinds}


def test_the_kind_of_a_list_is_not_served(target: Target) -> None:
    assert target.cluster.kind_info("v1", "ConfigMap") is not None

    assert target.cluster.kind_info("v1", "ConfigMapList") is None
    assert target.cluster.kinds_in_group("apps", "DeploymentList") is None


def test_a_kind_whose_crd_was_deleted_is_no_longer_served(target: Target) -> None:
    """Not a NotFound of an object: the kind itself is gone, though discovery knew it."""
    namespace = apply_namespace(target)
    crd = target.cluster.apply(gizmo_crd(target), field_manager=MANAGER)
    crd_ref = ObjectRef.of(crd)
    target.created.insert(0, crd_ref)
    api_version = f"{target.group}/v1"
    wait_until(lambda: is_established(target.cluster.get(crd_ref) or {}))
    wait_until(lambda: target.cluster.kind_info(api_version, "Gizmo") is not None)
    assert target.cluster.list_objects(api_version, "Gizmo", namespace=namespace) == []

    target.cluster.delete(crd_ref)
    wait_until(lambda: target.cluster.get(crd_ref) is None)

    def not_served() -> bool:  # a real server drops the kind's endpoint a moment after
        try:
            target.cluster.list_objects(api_version, "Gizmo", namespace=namespace)
        except UnknownKindError:
            return True
        return False

    wait_until(not_served)
    with pytest.raises(UnknownKindError):
        target.cluster.get(ObjectRef(api_version, "Gizmo", namespace, "g"))
    assert target.cluster.kinds_in_group(target.group, "Gizmo") is None
