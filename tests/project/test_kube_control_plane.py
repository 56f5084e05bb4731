"""The real control plane of the tests (tests/support/kube_control_plane.py): reachable with its
admin kubeconfig, and its audit log records our requests."""

from __future__ import annotations

from reconciler.cluster.kube import KubeCluster, k8s_config
from reconciler.core.objects import ObjectRef
from tests.support.kube_control_plane import ControlPlane


def test_the_control_plane_answers_and_audits_our_requests(
    kube_control_plane: ControlPlane,
) -> None:
    api_client = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    cluster = KubeCluster(api_client, name="fixture")
    default = ObjectRef("v1", "Namespace", "", "default")
    cluster.get(default)  # discovery on a cold cache (run alone) is not what this counts
    mark = kube_control_plane.audit_mark()

    found = cluster.get(default)

    assert found is not None
    events = kube_control_plane.audit_events(mark)
    assert [(e["verb"], e["objectRef"]["resource"]) for e in events] == [("get", "namespaces")]
