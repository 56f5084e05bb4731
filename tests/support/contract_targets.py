"""The cluster contract's targets and the objects its tests write: :class:`Target` (a cluster
under test, in memory or a real API server, and the throwaway names a test may use there), a
namespace applied for the test, a ConfigMap, a CRD of the test's own group and a Deployment.
The fixture that makes targets is in ``tests/contract/conftest.py``; callers: ``tests/contract``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster.api import Cluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef
from tests.support.crds import ANY_FIELDS, namespaced_crd


@dataclass
class Target:
    """A cluster under test and the names a test may use in it."""

    cluster: Cluster
    real: bool
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    created: list[ObjectRef] = field(default_factory=list)
    #: The Kubernetes client of the real server (``None`` in memory), for writes the product
    #: never makes (a create by ``kubectl apply`` client-side).
    api: Any = None

    def namespace(self, base: str = "ns") -> str:
        return f"rc-contract-{base}-{self.suffix}"

    @property
    def group(self) -> str:
        return f"c{self.suffix}.contract.reconciler.dev"

    def cleanup(self) -> None:
        for ref in reversed(self.created):
            self.cluster.delete(ref)


#: The field manager of the contract tests' writes.
MANAGER = "reconciler-contract"
#: The field manager of ``kubectl apply`` (client-side), and the annotation it writes.
KUBECTL_CLIENT_SIDE = "kubectl-client-side-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def create_client_side(target: Target, body: dict[str, Any]) -> None:
    """What ``kubectl apply`` (client-side) does with a new object: a create (an ``Update`` in
    ``managedFields``) by ``kubectl-client-side-apply``, carrying the last-applied annotation."""
    metadata = body.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {})
    annotations[LAST_APPLIED] = json.dumps(body, sort_keys=True) + "\n"
    if isinstance(target.cluster, InMemoryCluster):
        target.cluster.create(body, field_manager=KUBECTL_CLIENT_SIDE)
        return
    from reconciler.cluster.kube import k8s_client

    namespace = metadata["namespace"]
    if body["kind"] == "ConfigMap":
        api = k8s_client.CoreV1Api(target.api)
        api.create_namespaced_config_map(namespace, body, field_manager=KUBECTL_CLIENT_SIDE)
    else:
        assert body["kind"] == "Deployment", body["kind"]
        apps = k8s_client.AppsV1Api(target.api)
        apps.create_namespaced_deployment(namespace, body, field_manager=KUBECTL_CLIENT_SIDE)


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Poll ``condition`` until it holds (a real cluster settles later); fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def apply_namespace(target: Target, base: str = "ns") -> str:
    """A throwaway namespace of the test, applied and deleted at its end: its name."""
    name = target.namespace(base)
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    target.cluster.apply(body, field_manager=MANAGER)
    target.created.append(ObjectRef.of(body))
    return name


def configmap(namespace: str, name: str = "cm", **data: str) -> dict[str, Any]:
    """A ConfigMap of ``data``, labelled ``team: a``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "a"}},
        "data": data,
    }


def gizmo_crd(target: Target) -> dict[str, Any]:
    """The CRD of kind ``Gizmo`` in the test's own API group, any fields kept."""
    return namespaced_crd(target.group, "Gizmo", ANY_FIELDS, list_kind=True)


def deployment(namespace: str, name: str = "gizmo-operator") -> dict[str, Any]:
    """A one-replica Deployment of the pause image."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }
