"""Clusters the contract runs against: the in-memory one, and the real API server of the
``kube_control_plane`` fixture (tests/conftest.py: started from ``RECONCILER_K8S_ASSETS``, or the
cluster of ``RECONCILER_TEST_KUBECONFIG``; skipped without either, failed under CI). On the real
one each test works in throwaway namespaces and a throwaway CRD group, deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from reconciler.cluster.api import Cluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef
from tests.support.kube_control_plane import ControlPlane


@dataclass
class Target:
    """A cluster under test and the names a test may use in it."""

    cluster: Cluster
    real: bool
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    created: list[ObjectRef] = field(default_factory=list)

    def namespace(self, base: str = "ns") -> str:
        return f"rc-contract-{base}-{self.suffix}"

    @property
    def group(self) -> str:
        return f"c{self.suffix}.contract.reconciler.dev"

    def cleanup(self) -> None:
        for ref in reversed(self.created):
            self.cluster.delete(ref)


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.kube)])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "memory":
        yield Target(InMemoryCluster(require_selectors=True), real=False)
        return
    control_plane: ControlPlane = request.getfixturevalue("kube_control_plane")
    from reconciler.cluster.kube import KubeCluster, k8s_config

    api_client = k8s_config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    target = Target(KubeCluster(api_client, name="contract"), real=True)
    try:
        yield target
    finally:
        target.cleanup()
