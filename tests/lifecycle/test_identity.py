"""L12: an object is known by group, kind, namespace and name, never by apiVersion.

A version that ships a custom resource at the CRD's new storage version updates it in place (the
same uid), never prunes it by the old apiVersion; a default configuration whose CRD stopped
serving the version it was created at is still ours at removal (the inventory, even one written
before, names it at a version no longer served); an object that moves from one module to another
in one commit is handed over, in either module order, never deleted and re-created. On the
in-memory cluster (the real API server: tests/e2e/test_identity.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import Inventory, inventory_from_configmap, inventory_ref
from reconciler.core.model import LABEL_MODULE, ConfigRepo, ModuleVersion
from reconciler.core.objects import Body, ObjectRef
from reconciler.lifecycle.executor import ModuleState, SyncResult, sync_runtime
from tests.support.identity_modules import (
    NAMESPACE,
    SHARED,
    autoscaler,
    cpu_metric,
    gizmo_crd,
    gizmo_resource,
    module,
    mover,
    moving_gizmo,
    repo,
)
from tests.support.lifecycle_helpers import NOW, deployment

SYSTEM = "reconciler-system"


def _sync(cluster: InMemoryCluster, config: ConfigRepo) -> SyncResult:
    result = sync_runtime(cluster, config, "rt", now=NOW, commit="c0ffee")
    assert not result.outcome.failed(), result.outcome.failed()
    return result


def _states(result: SyncResult) -> dict[str, ModuleState | None]:
    return {s.module: s.state for s in result.modules}


def _inventory(cluster: InMemoryCluster, module: str) -> Inventory:
    body = cluster.get(inventory_ref(SYSTEM, module))
    assert body is not None
    return inventory_from_configmap(body)


def _live(cluster: InMemoryCluster, ref: ObjectRef) -> Body:
    body = cluster.get(ref)
    assert body is not None, f"{ref.subject} is gone"
    return body


def test_a_custom_resource_shipped_at_the_crds_new_storage_version_is_updated_in_place() -> None:
    gizmo = moving_gizmo(autoscaled=True)
    cluster = InMemoryCluster()
    main = ObjectRef("example.io/v2", "Gizmo", NAMESPACE, "main")
    _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "1.0.0"}, ["gizmo"]))
    uid = _live(cluster, ObjectRef("example.io/v1", "Gizmo", NAMESPACE, "main"))["metadata"]["uid"]
    hpa = ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", NAMESPACE, "gizmo")
    hpa_uid = _live(cluster, hpa.at("autoscaling/v1"))["metadata"]["uid"]

    upgraded = _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, ["gizmo"]))

    assert _states(upgraded) == {"gizmo": ModuleState.READY}
    entry = upgraded.plan.modules[0]
    assert [(c.action.value, c.ref.subject) for c in entry.changes if c.ref in (main, hpa)] == [
        ("update", hpa.subject),
        ("update", main.subject),
    ], "an update, never a create and a delete"
    scaler = _live(cluster, hpa)
    assert (scaler["metadata"]["uid"], scaler["spec"]["metrics"]) == (hpa_uid, cpu_metric(70))
    body = _live(cluster, main)
    assert (body["apiVersion"], body["metadata"]["uid"], body["spec"]) == (
        "example.io/v2",
        uid,
        {"size": 2},
    )
    recorded = {r: r.api_version for r in _inventory(cluster, "gizmo").objects}
    assert recorded[main] == "example.io/v2", "the inventory records the version shipped now"
    assert recorded[hpa] == "autoscaling/v2"
    again = _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, ["gizmo"]))
    assert not again.plan.modules[0].changes, "no drift from the version moving"


def test_a_default_configuration_whose_version_is_no_longer_served_is_ours_at_removal() -> None:
    def version(number: str, crd: dict[str, Any], at: str) -> ModuleVersion:
        objects = (crd, deployment("gizmo-operator", number))
        return ModuleVersion(number, objects, gizmo_resource("default", at, mode="fast"))

    gizmo = module(
        "gizmo",
        {
            "1.0.0": version("1.0.0", gizmo_crd(("v1alpha1", True, True)), "v1alpha1"),
            "2.0.0": version(
                "2.0.0", gizmo_crd(("v1alpha1", False, False), ("v1beta1", True, True)), "v1beta1"
            ),
        },
    )
    cluster = InMemoryCluster()
    default = ObjectRef("example.io/v1beta1", "Gizmo", NAMESPACE, "default")
    _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "1.0.0"}, ["gizmo"]))
    _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, ["gizmo"]))
    recorded = _inventory(cluster, "gizmo").default_configuration
    assert recorded is not None
    assert recorded.api_version == "example.io/v1beta1"
    # What an older reconciler left: the inventory names it at the version no longer served.
    older = _inventory(cluster, "gizmo")
    stale = ObjectRef("example.io/v1alpha1", "Gizmo", NAMESPACE, "default")
    cluster.apply(
        Inventory(
            older.runtime,
            older.module,
            older.version,
            older.strategy,
            older.objects,
            older.managed_kinds,
            stale,
            older.default_configuration_done,
            older.commit,
        ).to_configmap(SYSTEM),
        field_manager="reconciler",
    )

    removed = _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, []))

    assert _states(removed) == {"gizmo": None}, removed.modules
    assert not [b for b in cluster.objects() if ObjectRef.of(b) == default]
    assert cluster.get(inventory_ref(SYSTEM, "gizmo")) is None


@pytest.mark.parametrize("first", ["giver", "taker"])
def test_an_object_moved_to_another_module_in_one_commit_is_handed_over(first: str) -> None:
    second = {"giver": "taker", "taker": "giver"}[first]
    depends = {first: (), second: (first,)}  # the second waits for the first
    giver = mover("giver", {"1.0.0": True, "2.0.0": False}, depends_on=depends["giver"])
    taker = mover("taker", {"1.0.0": False, "2.0.0": True}, depends_on=depends["taker"])
    modules = {"giver": giver, "taker": taker}
    cluster = InMemoryCluster()
    _sync(cluster, repo(modules, {"giver": "1.0.0", "taker": "1.0.0"}, ["giver", "taker"]))
    uid = _live(cluster, SHARED)["metadata"]["uid"]
    deletes = cluster.calls.get("delete", 0)

    moved = _sync(cluster, repo(modules, {"giver": "2.0.0", "taker": "2.0.0"}, ["giver", "taker"]))

    assert next(s.module for s in moved.modules) == first
    assert _states(moved) == {"giver": ModuleState.READY, "taker": ModuleState.READY}
    body = _live(cluster, SHARED)
    assert body["metadata"]["uid"] == uid, "handed over, not deleted and re-created"
    assert body["metadata"]["labels"][LABEL_MODULE] == "taker"
    assert body["data"] == {"owner": "taker"}
    assert cluster.calls.get("delete", 0) == deletes
    assert SHARED in _inventory(cluster, "taker").objects
    assert SHARED not in _inventory(cluster, "giver").objects
    giving = next(m for m in moved.plan.modules if m.module == "giver")
    assert f"{SHARED.subject} is handed over to module taker" in giving.notes


def test_an_object_of_a_removed_module_that_another_ships_now_is_handed_over() -> None:
    giver = mover("giver", {"1.0.0": True})
    taker = mover("taker", {"1.0.0": False, "2.0.0": True})
    modules = {"giver": giver, "taker": taker}
    cluster = InMemoryCluster()
    _sync(cluster, repo(modules, {"giver": "1.0.0", "taker": "1.0.0"}, ["giver", "taker"]))
    uid = _live(cluster, SHARED)["metadata"]["uid"]

    moved = _sync(cluster, repo(modules, {"giver": "1.0.0", "taker": "2.0.0"}, ["taker"]))

    assert _states(moved) == {"giver": None, "taker": ModuleState.READY}
    body = _live(cluster, SHARED)
    assert (body["metadata"]["uid"], body["metadata"]["labels"][LABEL_MODULE]) == (uid, "taker")


def test_a_custom_resource_at_a_version_its_crd_serves_only_soon_waits_for_it() -> None:
    """On a server, a version added to an Established CRD is served a moment after the CRD's
    update: the module waits for it (WaitingForCRD), as for a new CRD, instead of failing."""

    gizmo = moving_gizmo()
    cluster = InMemoryCluster(auto_establish=False)
    crd = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gizmos.example.io")
    main = ObjectRef("example.io/v2", "Gizmo", NAMESPACE, "main")
    _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "1.0.0"}, ["gizmo"]))
    cluster.establish(crd)
    _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "1.0.0"}, ["gizmo"]))
    uid = _live(cluster, main.at("example.io/v1"))["metadata"]["uid"]

    waiting = _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, ["gizmo"]))

    status = waiting.modules[0]
    assert (status.state, status.reason) == (ModuleState.PROCESSING, "WaitingForCRD"), status
    assert _live(cluster, main.at("example.io/v1"))["metadata"]["uid"] == uid
    cluster.establish(crd)
    done = _sync(cluster, repo({"gizmo": gizmo}, {"gizmo": "2.0.0"}, ["gizmo"]))
    assert _states(done) == {"gizmo": ModuleState.READY}
    body = _live(cluster, main)
    assert (body["metadata"]["uid"], body["spec"]) == (uid, {"size": 2})


def test_objects_of_one_kind_shipped_at_two_versions_show_no_drift() -> None:
    """Each object is read at the version it is shipped at: a module's HPA at ``autoscaling/v1``
    beside another's at ``autoscaling/v2`` is no change on the next sync."""

    def scaled(name: str, api_version: str) -> Any:
        objects = (deployment(f"{name}-operator", "1.0.0"), autoscaler(api_version, name, 70))
        return module(name, {"1.0.0": ModuleVersion("1.0.0", objects)})

    modules = {"old": scaled("old", "autoscaling/v1"), "new": scaled("new", "autoscaling/v2")}
    config = repo(modules, {"old": "1.0.0", "new": "1.0.0"}, ["new", "old"])
    cluster = InMemoryCluster()
    _sync(cluster, config)

    again = _sync(cluster, config)

    assert {m.module: m.changes for m in again.plan.modules} == {"new": (), "old": ()}
