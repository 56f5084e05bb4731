"""What an API server answers, nulls included, and that our readers take it as it comes.

A real API server answers a CRD it just created with ``status.conditions: null`` (the field is
not ``omitempty`` in apiextensions/v1 and the create strategy resets the status), leaves out the
status of kinds that have none and empty ``labels``/``annotations``, and lists nothing as ``[]``.
A cold install once crashed on the first of these (``'NoneType' object is not iterable`` in
``is_established``) because the in-memory cluster never answered so. Runs against the in-memory
cluster always and against a real cluster when a real API server is at hand (conftest.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.core.live import workload_available
from reconciler.core.model import (
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
)
from reconciler.core.objects import ObjectRef, crd_kind, is_established
from reconciler.lifecycle.executor import ModuleState, sync_runtime
from tests.support.contract_targets import (
    MANAGER,
    Target,
    apply_namespace,
    configmap,
    deployment,
    gizmo_crd,
    wait_until,
)

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)


def test_a_new_crd_is_answered_with_null_conditions_and_read_as_not_established(
    target: Target,
) -> None:
    answer = target.cluster.apply(gizmo_crd(target), field_manager=MANAGER)
    ref = ObjectRef.of(answer)
    target.created.insert(0, ref)

    status = answer["status"]
    assert "conditions" in status
    assert status["conditions"] is None
    assert status["storedVersions"] == ["v1"]
    assert status["acceptedNames"]["plural"] == ""
    assert is_established(answer) is False
    assert crd_kind(answer) == (target.group, "Gizmo")
    wait_until(lambda: is_established(target.cluster.get(ref) or {}))
    established = target.cluster.get(ref)
    assert established is not None
    assert established["status"]["acceptedNames"]["kind"] == "Gizmo"


def test_kinds_without_status_have_none_and_empty_metadata_maps_are_left_out(
    target: Target,
) -> None:
    namespace = apply_namespace(target)
    bare = configmap(namespace, "bare", a="1")
    del bare["metadata"]["labels"]

    answer = target.cluster.apply(bare, field_manager=MANAGER)
    found = target.cluster.get(ObjectRef.of(answer))

    assert found is not None
    for body in (answer, found):
        assert "status" not in body
        assert "labels" not in body["metadata"]
        assert "annotations" not in body["metadata"]
        assert "finalizers" not in body["metadata"]


def test_removing_the_last_label_leaves_no_labels_map(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(configmap(namespace), field_manager=MANAGER)
    ref = ObjectRef("v1", "ConfigMap", namespace, "cm")

    patched = target.cluster.patch(ref, {"metadata": {"labels": {"team": None}}})
    found = target.cluster.get(ref)

    assert found is not None
    assert "labels" not in patched["metadata"]
    assert "labels" not in found["metadata"]


def test_a_list_of_nothing_is_an_empty_list(target: Target) -> None:
    namespace = apply_namespace(target)

    # (not ConfigMaps: a new namespace soon holds kube-root-ca.crt, see test_namespaces.py)
    found = target.cluster.list_objects("v1", "Secret", namespace=namespace)
    labelled = target.cluster.list_objects("v1", "Secret", labels={"nothing": target.suffix})

    assert found == []
    assert labelled == []


def test_a_new_workload_is_answered_with_an_empty_status_and_read_as_not_available(
    target: Target,
) -> None:
    namespace = apply_namespace(target)

    answer = target.cluster.apply(deployment(namespace), field_manager=MANAGER)

    assert answer["status"] == {}
    assert workload_available(answer) is False


def _gizmo_repo(target: Target, namespace: str) -> ConfigRepo:
    """One module with a CRD, a ConfigMap and an operator Deployment, named for ``target``."""
    objects = (
        gizmo_crd(target),
        configmap(namespace, "gizmo-config", a="1"),
        deployment(namespace),
    )
    versions = {"1.0.0": ModuleVersion("1.0.0", objects)}
    module = Module("gizmo", namespace, "Deployment", "gizmo-operator", versions)
    runtime = Runtime("rt", "regular", ClusterAccess(context="c"), (ModuleRef("gizmo"),))
    return ConfigRepo(
        Settings(system_namespace=namespace),
        {"rt": runtime},
        {"gizmo": module},
        {"regular": Channel("regular", {"gizmo": "1.0.0"})},
    )


def test_a_cold_install_reads_every_answer_without_failing(target: Target) -> None:
    namespace = apply_namespace(target)
    config = _gizmo_repo(target, namespace)
    target.created.insert(0, ObjectRef.of(gizmo_crd(target)))

    first = sync_runtime(target.cluster, config, "rt", now=NOW)
    wait_until(lambda: is_established(target.cluster.get(ObjectRef.of(gizmo_crd(target))) or {}))
    second = sync_runtime(target.cluster, config, "rt", now=NOW)

    assert [m.state for m in first.modules] in ([ModuleState.PROCESSING], [ModuleState.READY])
    (status,) = second.modules
    assert status.state in (ModuleState.PROCESSING, ModuleState.READY), status
    assert status.reason in ("WaitingForOperator", "Install", "Ready"), status
    assert target.cluster.get(ObjectRef("v1", "ConfigMap", namespace, "gizmo-config")) is not None
