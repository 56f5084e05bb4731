"""Drift read from field ownership (:func:`reconciler.core.ownership.taken_fields`), on the
in-memory cluster and on the real API server alike: a field we applied and another manager
changed (a forced apply, as ``kubectl`` does) moved to that manager, on a namespaced object and
a cluster-scoped one; our own re-apply, our dropping a field, and another manager applying the
same value take nothing. The in-memory cluster must record ``managedFields`` as the server
does, or the daemon would report drift differently on the two."""

from __future__ import annotations

from typing import Any

from reconciler.core.model import FIELD_MANAGER
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.ownership import taken_fields
from tests.support.contract_targets import Target, apply_namespace, configmap, deployment

OURS = frozenset({FIELD_MANAGER})


def _applied(target: Target, body: dict[str, Any], manager: str = FIELD_MANAGER) -> Body:
    target.cluster.apply(body, field_manager=manager, force=True)
    live = target.cluster.get(ObjectRef.of(body))
    assert live is not None
    return live


def test_a_field_another_manager_changed_is_taken_by_it_and_ours_again_takes_nothing(
    target: Target,
) -> None:
    namespace = apply_namespace(target, "taken")
    ours = deployment(namespace)
    before = _applied(target, ours)
    scaled = {**deployment(namespace), "spec": {"replicas": 3}}

    after = _applied(target, scaled, "kubectl")

    assert taken_fields(before, after, OURS) == {"spec.replicas": ["kubectl"]}
    reverted = _applied(target, ours)
    assert taken_fields(after, reverted, OURS) == {}


def test_the_same_value_or_a_field_we_drop_is_not_taken(target: Target) -> None:
    namespace = apply_namespace(target, "shared")
    before = _applied(target, configmap(namespace, a="1", b="2"))

    shared = _applied(target, configmap(namespace, a="1"), "kubectl")
    dropped = _applied(target, configmap(namespace, a="1"))

    assert taken_fields(before, shared, OURS) == {}
    assert taken_fields(shared, dropped, OURS) == {}


def test_a_cluster_scoped_objects_field_changed_by_another_manager_is_taken(
    target: Target,
) -> None:
    name = f"rc-contract-reader-{target.suffix}"
    rule: dict[str, Any] = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [rule],
    }
    target.created.append(ObjectRef.of(role))
    before = _applied(target, role)
    wider = {**role, "rules": [{**rule, "verbs": ["get", "delete"]}]}

    after = _applied(target, wider, "kubectl-patch")

    assert taken_fields(before, after, OURS) == {"rules": ["kubectl-patch"]}
