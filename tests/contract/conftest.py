"""Clusters the contract runs against: the in-memory one always; a real one when
``RECONCILER_TEST_KUBECONFIG`` names a kubeconfig (each test then works in throwaway namespaces
and a throwaway CRD group, deleted afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconciler.cluster.api import Cluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.objects import ObjectRef

KUBECONFIG = os.environ.get("RECONCILER_TEST_KUBECONFIG")


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


def _targets() -> list[str]:
    return ["memory", "real"] if KUBECONFIG else ["memory"]


@pytest.fixture(params=_targets())
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "memory":
        yield Target(InMemoryCluster(), real=False)
        return
    from kubernetes import config

    from reconciler.cluster.kube import KubeCluster

    load: Any = config.new_client_from_config
    api_client = load(config_file=KUBECONFIG)
    target = Target(KubeCluster(api_client, name="contract"), real=True)
    try:
        yield target
    finally:
        target.cleanup()
