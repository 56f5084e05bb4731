"""Discovery on a real API server (the ``kube_control_plane`` fixture): a version an upgrade
adds to a CRD (L12) is found as soon as the CRD read back is Established and serves it, though
the cluster's client had taken that version as not served a moment before (it keeps misses
for ``MISS_SECONDS`` so that a cold install refreshes discovery once, not once per miss)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from reconciler.cluster.kube import KubeCluster, k8s_config
from reconciler.core.objects import ObjectRef, is_established
from tests.support.crds import namespaced_crd
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_fleet import until

pytestmark = pytest.mark.kube


def _client(control_plane: ControlPlane) -> KubeCluster:
    api = k8s_config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    return KubeCluster(api, name="user")


@pytest.fixture
def crd(kube_control_plane: ControlPlane) -> Iterator[dict[str, Any]]:
    body = namespaced_crd(f"d{uuid.uuid4().hex[:8]}.example.io", "Gauge")
    yield body
    try:
        _client(kube_control_plane).delete(ObjectRef.of(body))
    except Exception:
        return


def _with_v2(crd: dict[str, Any]) -> dict[str, Any]:
    upgraded = copy.deepcopy(crd)
    (v1,) = upgraded["spec"]["versions"]
    upgraded["spec"]["versions"] = [{**v1, "storage": False}, {**v1, "name": "v2"}]
    return upgraded


def test_a_version_a_crd_adds_is_found_once_the_crd_read_back_serves_it(
    kube_control_plane: ControlPlane, crd: dict[str, Any]
) -> None:
    ours, other = _client(kube_control_plane), _client(kube_control_plane)
    group, ref = crd["spec"]["group"], ObjectRef.of(crd)
    other.apply(crd, field_manager="kubectl")
    until(lambda: ours.kind_info(f"{group}/v1", "Gauge") is not None)
    assert ours.kind_info(f"{group}/v2", "Gauge") is None  # a miss, kept for a while

    other.apply(_with_v2(crd), field_manager="kubectl")  # another client: ours is not told
    until(lambda: _client(kube_control_plane).kind_info(f"{group}/v2", "Gauge") is not None)
    read = ours.get(ref)

    assert read is not None
    assert is_established(read)
    assert ours.kind_info(f"{group}/v2", "Gauge") is not None


@pytest.fixture
def listed_not_served(kube_control_plane: ControlPlane) -> Iterator[str]:
    """A group version the server lists but answers 404 for (as it does for a moment after a
    CRD is created or deleted): a local APIService of a group nothing serves. Its group."""
    group = f"l{uuid.uuid4().hex[:8]}.example.io"
    service = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"v1.{group}"},
        "spec": {
            "group": group,
            "version": "v1",
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
        },
    }
    cluster = _client(kube_control_plane)
    cluster.apply(service, field_manager="kubectl")
    yield group
    cluster.delete(ObjectRef.of(service))


def test_a_group_version_listed_but_not_served_is_a_kind_not_served(
    kube_control_plane: ControlPlane, listed_not_served: str, tmp_path: Path
) -> None:
    """Discovery lists the group version; the server answers 404 for what it serves: the kind
    is not served (``kind_info`` is ``None``), as for any kind not served, and the rest of
    discovery still answers. Before, the 404 failed the lookup ("kind not served" as an error),
    as it did in a sync that asked right after the CRD was created."""
    api = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    ours = KubeCluster(api, name="user", cache_file=tmp_path / "discovery.json")

    def listed() -> bool:
        groups = k8s_client.ApisApi(api).get_api_versions().groups
        return any(g.name == listed_not_served for g in groups)

    until(listed)
    assert ours.kind_info(f"{listed_not_served}/v1", "Widget") is None
    assert ours.kind_info("apps/v1", "Deployment") is not None
