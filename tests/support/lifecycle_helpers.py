"""Builders for lifecycle tests: a small catalog of modules as plain model values.

`widget` has versions 1.0.0 (CRD, ServiceAccount, ClusterRole, operator Deployment, a ConfigMap)
and 2.0.0 (the ConfigMap dropped, a Service added); 2.1.0 requires downtime. `gadget` depends
on `widget`. Both have a default configuration CR of their own kind.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.api import Cluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import (
    Channel,
    ClusterAccess,
    ConfigRepo,
    MaintenanceWindow,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
)
from reconciler.core.reasons import Reason
from reconciler.core.status import ChangeAction
from reconciler.lifecycle.executor import SyncResult, sync_runtime

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)  # a Wednesday
NAMESPACE = "widget-system"


def crd(kind: str) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.example.io"},
        "spec": {
            "group": "example.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }


def deployment(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/version": version}},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "m", "image": f"x:{version}"}]}},
        },
    }


def simple(kind: str, name: str, api: str = "v1", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, **extra}


def widget_version(version: str) -> ModuleVersion:
    objects: list[dict[str, Any]] = [
        crd("Widget"),
        simple("ServiceAccount", "widget-operator"),
        simple("ClusterRole", "widget-operator", "rbac.authorization.k8s.io/v1", rules=[]),
        deployment("widget-operator", version),
    ]
    if version == "1.0.0":
        objects.append(simple("ConfigMap", "widget-extra", data={"a": "1"}))
    else:
        objects.append(simple("Service", "widget-metrics", spec={"ports": [{"port": 8080}]}))
    default = simple("Widget", "default", "example.io/v1", spec={"size": 3})
    return ModuleVersion(version, tuple(objects), default, requires_downtime=version == "2.1.0")


def gadget_version(version: str) -> ModuleVersion:
    objects = (crd("Gadget"), deployment("gadget-operator", version))
    default = simple("Gadget", "default", "example.io/v1", spec={"mode": "fast"})
    return ModuleVersion(version, objects, default)


WIDGET = Module(
    "widget",
    NAMESPACE,
    "Deployment",
    "widget-operator",
    {v: widget_version(v) for v in ("1.0.0", "2.0.0", "2.1.0")},
)
GADGET = Module(
    "gadget",
    NAMESPACE,
    "Deployment",
    "gadget-operator",
    {"1.0.0": gadget_version("1.0.0")},
    depends_on=("widget",),
)


def repo(
    *refs: ModuleRef,
    regular: dict[str, str] | None = None,
    window: MaintenanceWindow | None = None,
) -> ConfigRepo:
    """A repo with one runtime `rt` on channel `regular` listing ``refs``."""
    channel = Channel("regular", regular or {"widget": "1.0.0", "gadget": "1.0.0"})
    runtime = Runtime("rt", "regular", ClusterAccess(context="c"), refs, maintenance_window=window)
    return ConfigRepo(
        Settings(), {"rt": runtime}, {"widget": WIDGET, "gadget": GADGET}, {"regular": channel}
    )


def sync(cluster: InMemoryCluster, config: ConfigRepo, now: datetime = NOW) -> SyncResult:
    return sync_runtime(cluster, config, "rt", now=now, commit="c0ffee")


#: What a pass ends "not yet" for that the server (with a test's stand-ins) finishes by itself,
#: and how long :func:`settled_sync` runs the pass again for it (a pass once waited as long).
SETTLING_SECONDS = {Reason.WAITING_FOR_CRD: 30.0, Reason.WAITING_FOR_OPERATOR: 10.0}


def settled_sync(
    cluster: Cluster, config: ConfigRepo, runtime: str = "rt", now: datetime = NOW
) -> SyncResult:
    """:func:`sync_runtime` run again while a module waits for what the server finishes by
    itself (its CRDs Established, its operator available), as ``sync`` does: a pass never
    waits. The first pass's plan and changes with what a later pass changed, the last one's
    statuses (a module still waiting after its bound included). On the in-memory cluster the
    first pass is the last."""
    started = time.monotonic()
    first = result = sync_runtime(cluster, config, runtime, now=now)
    changes = list(first.outcome.changes)
    while True:
        waits = [SETTLING_SECONDS.get(m.reason, 0.0) for m in result.modules]
        if time.monotonic() - started >= max(waits, default=0.0):
            outcome = replace(result.outcome, changes=tuple(changes))
            return replace(result, plan=first.plan, outcome=outcome)
        result = sync_runtime(cluster, config, runtime, now=now)
        changes += [c for c in result.outcome.changes if c.action is not ChangeAction.UNCHANGED]
