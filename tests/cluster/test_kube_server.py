"""``reconciler sync`` and ``reconciler status`` end to end on a real API server (the
``kube_control_plane`` fixture), with the sample fleet's keda module (tests/support/kube_fleet.py).

Module removal by the lifecycle rules: a CreateAndDelete removal that a user's custom resource
blocks waits in state Deleting naming it (L8), and deletes the CRDs last once it is gone; an
Ignore removal only releases the objects (L7). And a discovery cache file that remembers a kind
the server no longer serves (a CRD deleted since, a cluster rebuilt at the same URL) is
refreshed instead of failing every later sync.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.core.model import LABEL_MANAGED_BY
from reconciler.core.objects import ObjectRef
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_fleet import KubeFleet, kube_fleet, until

KEDA_CRD = "kedas"


@pytest.fixture
def fleet(
    kube_control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubeFleet]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the discovery cache file
    yield from kube_fleet(kube_control_plane, tmp_path)


def _crd(fleet: KubeFleet) -> ObjectRef:
    return ObjectRef(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", f"kedas.{fleet.group}"
    )


def _operator(fleet: KubeFleet) -> ObjectRef:
    return ObjectRef("apps/v1", "Deployment", fleet.namespace, f"keda-manager-{fleet.suffix}")


def _install_keda(fleet: KubeFleet, strategy: str) -> None:
    fleet.set_modules([{"name": "keda", "strategy": strategy}])
    fleet.sync_until("succeeded", operator=_operator(fleet).name)


def _users_keda(fleet: KubeFleet) -> ObjectRef:
    """A Keda of the user's own (not the default configuration), in a namespace of theirs."""
    (namespace,) = fleet.user_namespaces()
    fleet.create_namespace(namespace)
    body = {
        "apiVersion": f"{fleet.group}/v1alpha1",
        "kind": "Keda",
        "metadata": {"name": "mine", "namespace": namespace},
        "spec": {},
    }
    return ObjectRef.of(fleet.cluster.apply(body, field_manager="kubectl"))


def test_a_removal_that_a_users_custom_resource_blocks_waits_deleting_and_names_it(
    fleet: KubeFleet,
) -> None:
    fleet.ship_namespace("keda")
    _install_keda(fleet, "CreateAndDelete")
    mine = _users_keda(fleet)

    fleet.set_modules([])
    removal = fleet.sync()
    status = fleet.reconciler("status", "--runtime", fleet.runtime)

    assert removal.exit_code == 0, removal.output
    assert "internal error" not in removal.output
    assert "keda             Deleting   1.1.0    WaitingForResources" in removal.output
    assert f"Keda/{mine.namespace}/mine" in removal.output
    keda_row = next(line for line in status.output.splitlines() if line.startswith("  keda "))
    assert keda_row.split()[1] == "Deleting", status.output
    assert fleet.cluster.get(_operator(fleet)) is not None  # the operator keeps running
    assert fleet.cluster.get(_crd(fleet)) is not None


def test_once_the_blocker_is_gone_the_crds_are_deleted_last(fleet: KubeFleet) -> None:
    fleet.ship_namespace("keda")
    _install_keda(fleet, "CreateAndDelete")
    mine = _users_keda(fleet)
    fleet.set_modules([])
    fleet.sync_until("Deleting")
    fleet.cluster.delete(mine)
    until(lambda: fleet.cluster.get(mine) is None)
    mark = fleet.control_plane.audit_mark()

    fleet.sync_until("succeeded")

    deleted = [
        (e["objectRef"]["resource"], e["objectRef"].get("name"))
        for e in fleet.control_plane.audit_events(mark)
        if e["verb"] == "delete" and e["responseStatus"]["code"] < 300
    ]
    crd = ("customresourcedefinitions", _crd(fleet).name)
    assert crd in deleted, deleted
    after = deleted[deleted.index(crd) + 1 :]
    assert after == [("configmaps", "inventory-keda")], deleted  # then only the inventory
    resources = {resource for resource, _ in deleted}
    assert {"deployments", "clusterroles", "namespaces"} <= resources, deleted
    until(lambda: fleet.cluster.get(_crd(fleet)) is None)
    assert fleet.cluster.get(_operator(fleet)) is None


def test_an_ignore_removal_releases_our_objects_and_deletes_nothing(fleet: KubeFleet) -> None:
    _install_keda(fleet, "Ignore")

    fleet.set_modules([])
    result = fleet.sync_until("succeeded")

    assert "Unmanaged" in result.output
    for ref in (_crd(fleet), _operator(fleet)):
        body = fleet.cluster.get(ref)
        assert body is not None, ref
        assert LABEL_MANAGED_BY not in (body["metadata"].get("labels") or {}), ref
    inventory = ObjectRef("v1", "ConfigMap", fleet.system_namespace, "inventory-keda")
    assert fleet.cluster.get(inventory) is None


def test_a_kind_the_discovery_cache_file_remembers_but_the_server_lost_is_rediscovered(
    fleet: KubeFleet,
) -> None:
    """The CRD deleted behind our back (or the cluster rebuilt at the same URL): the removal
    lists the instances of Keda at a path the server answers ``404 page not found``."""
    _install_keda(fleet, "CreateAndDelete")
    fleet.cluster.delete(_crd(fleet))
    until(lambda: fleet.cluster.get(_crd(fleet)) is None)
    fleet.set_modules([])

    first = fleet.sync()
    second = fleet.sync_until("succeeded")

    assert first.exit_code == 0, first.output
    # the server's answer, not a hex operation id that happens to hold the digits 404
    assert not re.search(r"\b404\b|page not found", first.output + second.output)
    assert "failed" not in first.output + second.output
    assert fleet.cluster.get(_operator(fleet)) is None
