"""What every Cluster implementation must do the way an API server does.

Runs against the in-memory cluster always and against a real cluster when
a real API server is at hand (see conftest.py). Waiting on a real cluster (a CRD becoming
Established, a deletion finishing) is done by polling the condition with a deadline.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cluster.api import EventSink, ObjectEvent, Permission, Reviewer, event_ref
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef, is_established
from reconciler.errors import ConflictError, InvalidObjectError, NotFoundError, UnknownKindError
from tests.support.contract_targets import (
    MANAGER,
    Target,
    apply_namespace,
    configmap,
    gizmo_crd,
    wait_until,
)


def test_namespaced_objects_need_their_namespace(target: Target) -> None:
    with pytest.raises(NotFoundError):
        target.cluster.apply(configmap(target.namespace("missing")), field_manager=MANAGER)


def test_a_namespaced_object_without_a_namespace_is_invalid(target: Target) -> None:
    body = configmap("")
    del body["metadata"]["namespace"]

    with pytest.raises(InvalidObjectError):
        target.cluster.apply(body, field_manager=MANAGER)


def test_a_name_that_is_no_dns_subdomain_is_invalid(target: Target) -> None:
    """As the server validates ``metadata.name`` (422): lower case, digits, ``-`` and ``.``."""
    namespace = apply_namespace(target)

    for name in ("Upper", "under_score", "-leading", "a" * 254):
        with pytest.raises(InvalidObjectError):
            target.cluster.apply(configmap(namespace, name), field_manager=MANAGER)
    with pytest.raises(InvalidObjectError):
        target.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dots.in.name"}},
            field_manager=MANAGER,
        )
    assert target.cluster.apply(configmap(namespace, "a.b-1"), field_manager=MANAGER)


def test_apply_creates_and_an_identical_apply_changes_nothing(target: Target) -> None:
    namespace = apply_namespace(target)
    created = target.cluster.apply(configmap(namespace, a="1"), field_manager=MANAGER)

    again = target.cluster.apply(configmap(namespace, a="1"), field_manager=MANAGER)

    assert created["metadata"]["uid"]
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    found = target.cluster.get(ObjectRef.of(created))
    assert found is not None
    assert found["data"] == {"a": "1"}


def test_a_change_bumps_resource_version_and_generation(target: Target) -> None:
    namespace = apply_namespace(target)
    sa: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
            },
        },
    }
    first = target.cluster.apply(sa, field_manager=MANAGER)
    sa["spec"]["replicas"] = 2

    second = target.cluster.apply(sa, field_manager=MANAGER)

    assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert second["metadata"]["generation"] == first["metadata"]["generation"] + 1


def test_server_side_apply_removes_what_the_manager_stopped_applying(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(configmap(namespace, a="1", b="2"), field_manager=MANAGER)
    ref = ObjectRef("v1", "ConfigMap", namespace, "cm")
    target.cluster.patch(ref, {"data": {"theirs": "x"}})  # another writer's field

    result = target.cluster.apply(configmap(namespace, a="1"), field_manager=MANAGER)

    assert result["data"] == {"a": "1", "theirs": "x"}


def test_conflicts_without_force(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(configmap(namespace, a="1"), field_manager="someone-else")

    with pytest.raises(ConflictError):
        target.cluster.apply(configmap(namespace, a="2"), field_manager=MANAGER, force=False)
    forced = target.cluster.apply(configmap(namespace, a="2"), field_manager=MANAGER, force=True)
    assert forced["data"]["a"] == "2"


def test_dry_run_changes_nothing(target: Target) -> None:
    namespace = apply_namespace(target)

    result = target.cluster.apply(configmap(namespace, a="1"), field_manager=MANAGER, dry_run=True)

    assert result["data"] == {"a": "1"}
    assert target.cluster.get(ObjectRef("v1", "ConfigMap", namespace, "cm")) is None


def test_unknown_kinds_are_refused_until_their_crd_is_established(target: Target) -> None:
    namespace = apply_namespace(target)
    gizmo = {
        "apiVersion": f"{target.group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {"size": 1},
    }
    with pytest.raises(UnknownKindError):
        target.cluster.apply(gizmo, field_manager=MANAGER)

    crd = target.cluster.apply(gizmo_crd(target), field_manager=MANAGER)
    target.created.insert(0, ObjectRef.of(crd))
    wait_until(lambda: is_established(target.cluster.get(ObjectRef.of(crd)) or {}))
    wait_until(lambda: target.cluster.kind_info(f"{target.group}/v1", "Gizmo") is not None)

    created = target.cluster.apply(gizmo, field_manager=MANAGER)
    assert created["spec"] == {"size": 1}
    info = target.cluster.kinds_in_group(target.group, "Gizmo")
    assert info is not None
    assert info.namespaced


def test_list_by_labels_across_namespaces(target: Target) -> None:
    one, two = apply_namespace(target, "one"), apply_namespace(target, "two")
    target.cluster.apply(configmap(one, "a"), field_manager=MANAGER)
    target.cluster.apply(configmap(two, "b"), field_manager=MANAGER)
    other = configmap(two, "c")
    other["metadata"]["labels"] = {"team": "b"}
    target.cluster.apply(other, field_manager=MANAGER)

    found = target.cluster.list_objects("v1", "ConfigMap", labels={"team": "a"})
    mine = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in found
        if o["metadata"]["namespace"] in (one, two)
    }

    assert mine == {(one, "a"), (two, "b")}
    assert all(o["kind"] == "ConfigMap" for o in found)
    in_one = target.cluster.list_objects("v1", "ConfigMap", namespace=one, labels={"team": "a"})
    assert [o["metadata"]["name"] for o in in_one] == ["a"]


def test_finalizers_hold_deletion_until_removed(target: Target) -> None:
    namespace = apply_namespace(target)
    body = configmap(namespace)
    body["metadata"]["finalizers"] = ["contract.reconciler.dev/hold"]
    target.cluster.apply(body, field_manager=MANAGER)
    ref = ObjectRef.of(body)

    assert target.cluster.delete(ref) is True
    held = target.cluster.get(ref)
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]

    target.cluster.patch(ref, {"metadata": {"finalizers": None}})
    wait_until(lambda: target.cluster.get(ref) is None)
    assert target.cluster.delete(ref) is False


def test_merge_patch_removes_a_label(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(configmap(namespace), field_manager=MANAGER)

    patched = target.cluster.patch(
        ObjectRef("v1", "ConfigMap", namespace, "cm"), {"metadata": {"labels": {"team": None}}}
    )

    assert "team" not in (patched["metadata"].get("labels") or {})


def test_patch_of_a_missing_object(target: Target) -> None:
    namespace = apply_namespace(target)

    with pytest.raises(NotFoundError):
        target.cluster.patch(
            ObjectRef("v1", "ConfigMap", namespace, "nothing"), {"data": {"a": "b"}}
        )


def test_the_identity_and_its_permissions_can_be_reviewed(target: Target) -> None:
    """What ``reconciler check`` asks: the server's version, who we are (SelfSubjectReview),
    and whether we may do something (SelfSubjectAccessReview)."""
    cluster = target.cluster
    assert isinstance(cluster, Reviewer)
    namespace = target.namespace()

    assert cluster.server_version().startswith("v")
    assert cluster.whoami() != ""
    assert cluster.can_i(Permission("list", "", "configmaps", namespace)) is True


def test_an_event_is_recorded_once_and_counted_when_it_happens_again(target: Target) -> None:
    """What ``kubectl describe`` then shows: our component, the reason, the count."""
    cluster = target.cluster
    assert isinstance(cluster, EventSink)
    namespace = apply_namespace(target, "events")
    about = ObjectRef("v1", "ConfigMap", namespace, "settings")
    event = ObjectEvent(about, "Configured", "configured by reconciler for module contract")

    cluster.record_event(event, component=MANAGER)
    cluster.record_event(event, component=MANAGER)

    where = event_ref(event, MANAGER)
    stored = (
        cluster.events.get(where.name)
        if isinstance(cluster, InMemoryCluster)
        else cluster.get(where)
    )
    assert stored is not None
    assert stored["involvedObject"]["name"] == "settings"
    assert (stored["reason"], stored["count"]) == ("Configured", 2)
    assert stored["source"]["component"] == MANAGER
