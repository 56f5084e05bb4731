"""Modules for the tests of L12 (an object known by group, kind, namespace and name): a CRD
``Gizmo`` whose versions move, its custom resources, modules built of them, the repo of one
runtime ``rt``, and modules that hand the ConfigMap ``shared`` over. A
HorizontalPodAutoscaler at ``autoscaling/v1`` or ``v2``. Callers: tests/lifecycle/test_identity.py,
tests/core/test_identity_diff.py, tests/contract/test_served_versions.py and
tests/e2e/test_identity.py."""

from __future__ import annotations

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
from reconciler.core.objects import ObjectRef
from tests.support.lifecycle_helpers import deployment, simple

NAMESPACE = "gizmo-system"
SHARED = ObjectRef("v1", "ConfigMap", NAMESPACE, "shared")


def gizmo_crd(*versions: tuple[str, bool, bool]) -> dict[str, Any]:
    """The CRD of ``Gizmo`` with (name, served, storage) versions."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.io"},
        "spec": {
            "group": "example.io",
            "scope": "Namespaced",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
            "versions": [
                {"name": name, "served": served, "storage": storage}
                for name, served, storage in versions
            ],
        },
    }


def gizmo_resource(name: str, version: str, **spec: Any) -> dict[str, Any]:
    """The ``Gizmo`` ``name`` at ``example.io/<version>``."""
    return simple("Gizmo", name, f"example.io/{version}", spec=spec)


def module(name: str, versions: dict[str, ModuleVersion], **options: Any) -> Module:
    """A module in :data:`NAMESPACE`, its operator the Deployment ``<name>-operator``."""
    return Module(name, NAMESPACE, "Deployment", f"{name}-operator", versions, **options)


def repo(modules: dict[str, Module], channel: dict[str, str], listed: list[str]) -> ConfigRepo:
    """The repo of ``modules`` with one runtime ``rt`` taking ``listed`` from ``channel``."""
    refs = tuple(ModuleRef(name) for name in listed)
    runtime = Runtime("rt", "regular", ClusterAccess(context="c"), refs)
    return ConfigRepo(
        Settings(), {"rt": runtime}, modules, {"regular": Channel("regular", channel)}
    )


def mover(name: str, ships: dict[str, bool], **options: Any) -> Module:
    """A module whose versions ship the ConfigMap ``shared`` where ``ships`` says so."""
    versions = {}
    for number, shipping in ships.items():
        objects: list[dict[str, Any]] = [deployment(f"{name}-operator", number)]
        if shipping:
            objects.append(simple("ConfigMap", "shared", data={"owner": name}))
        versions[number] = ModuleVersion(number, tuple(objects))
    return module(name, versions, **options)


def autoscaler(
    api_version: str, name: str, percent: int, namespace: str | None = None
) -> dict[str, Any]:
    """A HorizontalPodAutoscaler ``name`` of the Deployment ``name`` at ``api_version``
    (``autoscaling/v1`` or ``v2``), its CPU target ``percent``."""
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicas": 1,
        "maxReplicas": 3,
    }
    if api_version == "autoscaling/v1":
        spec["targetCPUUtilizationPercentage"] = percent
    else:
        spec["metrics"] = cpu_metric(percent)
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": "HorizontalPodAutoscaler", "metadata": metadata,
            "spec": spec}  # fmt: skip


def cpu_metric(percent: int) -> list[dict[str, Any]]:
    """``autoscaling/v2``'s ``metrics`` of a CPU utilization target of ``percent``."""
    target = {"type": "Utilization", "averageUtilization": percent}
    return [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]


def moving_gizmo(*, autoscaled: bool = False) -> Module:
    """The module ``gizmo``: 1.0.0 ships its CRD serving and storing ``v1`` and the ``Gizmo``
    ``main`` (size 1) at ``v1``; 2.0.0 the CRD serving ``v1`` and ``v2``, stored at ``v2``, and
    ``main`` (size 2) at ``v2``; with ``autoscaled``, also an HPA ``gizmo`` at ``autoscaling/v1``
    then ``v2``."""

    def version(number: str, crd: dict[str, Any], cr: dict[str, Any], hpa: str) -> ModuleVersion:
        objects = (crd, deployment("gizmo-operator", number), cr)
        scaler = (autoscaler(hpa, "gizmo", 70),) if autoscaled else ()
        return ModuleVersion(number, objects + scaler)

    first = gizmo_crd(("v1", True, True))
    moved = gizmo_crd(("v1", True, False), ("v2", True, True))
    return module(
        "gizmo",
        {
            "1.0.0": version(
                "1.0.0", first, gizmo_resource("main", "v1", size=1), "autoscaling/v1"
            ),
            "2.0.0": version(
                "2.0.0", moved, gizmo_resource("main", "v2", size=2), "autoscaling/v2"
            ),
        },
    )
