"""Clusters the contract runs against: the in-memory one, and the real API server of the
``kube_control_plane`` fixture (tests/conftest.py: started from ``RECONCILER_K8S_ASSETS``, or the
cluster of ``RECONCILER_TEST_KUBECONFIG``; skipped without either, failed under CI). On the real
one each test works in throwaway namespaces and a throwaway CRD group, deleted afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from reconciler.cluster.memory import InMemoryCluster
from tests.support.contract_modules import WidgetFleet
from tests.support.contract_targets import Target
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_workloads import deployments_made_available


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.kube)])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "memory":
        yield Target(InMemoryCluster(require_selectors=True), real=False)
        return
    control_plane: ControlPlane = request.getfixturevalue("kube_control_plane")
    from reconciler.cluster.kube import KubeCluster, k8s_config

    api_client = k8s_config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    target = Target(KubeCluster(api_client, name="contract"), real=True, api=api_client)
    try:
        yield target
    finally:
        target.cleanup()


@pytest.fixture
def fleet(target: Target, request: pytest.FixtureRequest) -> Iterator[WidgetFleet]:
    """Module ``widget`` synced whole on the target (tests/support/contract_modules.py); on the
    real server its operator Deployment is made available as it appears (no Pods run there)."""
    with contextlib.ExitStack() as stack:
        if target.real:
            plane: ControlPlane = request.getfixturevalue("kube_control_plane")
            stack.enter_context(deployments_made_available(plane.kubeconfig))
        yield WidgetFleet(target)
