"""One module ``widget`` synced whole on a contract target (in memory or the real API server),
in the target's throwaway names: versions of plain objects (an operator Deployment first, with
its version label, and whatever a test adds), a runtime ``rt`` listing the module at one of
them, and ``sync_runtime`` on the target. The operator is made available on the real server by
the caller (tests/support/kube_workloads.py). Callers: tests/contract."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

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
from reconciler.core.objects import Body, ObjectRef
from reconciler.lifecycle.executor import SyncResult
from tests.support.contract_targets import Target
from tests.support.lifecycle_helpers import settled_sync

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
OPERATOR = "widget-operator"


def operator(namespace: str, version: str) -> dict[str, Any]:
    """The module's operator Deployment at ``version`` (its version label says so)."""
    labels = {"app": OPERATOR}
    pod = {"containers": [{"name": "m", "image": "registry.k8s.io/pause:3.9"}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": OPERATOR,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/version": version},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


class WidgetFleet:
    """Module ``widget`` on ``target``: its namespace and the system namespace are the test's,
    removed afterwards with whatever they hold."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.namespace = target.namespace("widget")
        self.system = target.namespace("system")
        for name in (self.namespace, self.system):
            target.created.append(ObjectRef("v1", "Namespace", "", name))

    def object(self, kind: str, name: str, **fields: Any) -> dict[str, Any]:
        """A ``v1`` object ``kind`` of the module's namespace."""
        metadata = {"name": name, "namespace": self.namespace}
        return {"apiVersion": "v1", "kind": kind, "metadata": metadata, **fields}

    def repo(self, version: str | None, objects: Sequence[Body] = ()) -> ConfigRepo:
        """The runtime with ``widget`` at ``version`` shipping its operator and ``objects``
        (``None``: the module is not listed, so it is removed)."""
        versions = {}
        if version is not None:
            shipped = (operator(self.namespace, version), *objects)
            versions[version] = ModuleVersion(version, shipped)
        module = Module("widget", self.namespace, "Deployment", OPERATOR, versions)
        refs = (ModuleRef("widget", version=version),) if version is not None else ()
        runtime = Runtime("rt", "regular", ClusterAccess(context="c"), refs)
        return ConfigRepo(
            Settings(system_namespace=self.system),
            {"rt": runtime},
            {"widget": module} if versions else {},
            {"regular": Channel("regular", {})},
        )

    def sync(self, version: str | None, objects: Sequence[Body] = ()) -> SyncResult:
        return settled_sync(self.target.cluster, self.repo(version, objects), now=NOW)

    def get(self, ref: ObjectRef) -> Body | None:
        return self.target.cluster.get(ref)
