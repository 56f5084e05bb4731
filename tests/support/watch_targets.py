"""What the watch contract tests share (tests/contract/test_watch_*.py): a cluster seen by an
identity that may list and watch ConfigMaps in one namespace only, and a cluster whose history
is forgotten (410 Gone on demand: in memory for real, on a real server through a wrapper at our
own seam), its streams read as :meth:`watch` reads them or in the event loop."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any

import pytest

from reconciler.cluster.api import (
    Hangup,
    Listing,
    Permission,
    StreamWatchable,
    Watchable,
    WatchEvent,
)
from reconciler.cluster.memory import InMemoryCluster
from reconciler.errors import ExpiredError
from tests.support.contract_targets import Target
from tests.support.kube_control_plane import ControlPlane

RBAC = "rbac.authorization.k8s.io"
VERBS = ("list", "watch")


def as_watcher_in(target: Target, request: pytest.FixtureRequest, namespace: str) -> Any:
    """The cluster as an identity that may list and watch ConfigMaps in ``namespace`` only."""
    user = f"watcher-{target.suffix}"
    if isinstance(target.cluster, InMemoryCluster):
        target.cluster.user = user
        target.cluster.only_in = {Permission(v, "", "configmaps"): {namespace} for v in VERBS}
        return target.cluster
    from reconciler.cluster.kube import KubeCluster, k8s_client, k8s_config

    rbac = k8s_client.RbacAuthorizationV1Api(target.api)
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": list(VERBS)}]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": user}, "rules": rules})
    binding = {
        "metadata": {"name": user},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": user},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }
    rbac.create_namespaced_role_binding(namespace, binding)
    plane: ControlPlane = request.getfixturevalue("kube_control_plane")
    client = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
    client.set_default_header("Impersonate-User", user)  # the admin (system:masters) may
    return KubeCluster(client, name="watcher")


class Forgetting:
    """A real API server whose history is compacted up to now: its watch cache keeps minutes
    of events (and serves a young cluster's whole history), so a test cannot make it answer
    410 on demand; this wrapper at our own seam does, for the resourceVersions before now."""

    def __init__(self, cluster: Watchable) -> None:
        self.cluster = cluster
        self.forgotten = int(cluster.list_for_watch("v1", "Namespace").resource_version)

    def list_for_watch(
        self,
        api_version: str,
        kind: str,
        *,
        labels: Mapping[str, str] | None = None,
        namespace: str | None = None,
    ) -> Listing:
        return self.cluster.list_for_watch(api_version, kind, labels=labels, namespace=namespace)

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        hangup: Hangup | None = None,
        namespace: str | None = None,
    ) -> Iterator[WatchEvent]:
        if int(resource_version) < self.forgotten:
            raise ExpiredError(f"too old resource version: {resource_version}")
        return self.cluster.watch(
            api_version,
            kind,
            resource_version=resource_version,
            labels=labels,
            timeout_seconds=timeout_seconds,
            hangup=hangup,
            namespace=namespace,
        )


def forgetful(target: Target) -> Watchable:
    """The cluster with its history forgotten: in memory for real (its own 410), on a real
    server through :class:`Forgetting`."""
    if isinstance(target.cluster, InMemoryCluster):
        target.cluster.expire_history()
        return target.cluster
    assert isinstance(target.cluster, Watchable)
    return Forgetting(target.cluster)


class ForgettingStreams(Forgetting):
    """A real API server whose history is compacted up to now (:class:`Forgetting`), its
    streams read in the loop."""

    def __init__(self, cluster: StreamWatchable) -> None:
        super().__init__(cluster)
        self.streams = cluster

    async def watch_async(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        namespace: str | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        if int(resource_version) < self.forgotten:
            raise ExpiredError(f"too old resource version: {resource_version}")
        async for event in self.streams.watch_async(
            api_version,
            kind,
            resource_version=resource_version,
            labels=labels,
            timeout_seconds=timeout_seconds,
            namespace=namespace,
        ):
            yield event


def forgetful_streams(target: Target) -> StreamWatchable:
    """:func:`forgetful`, its streams read in the event loop."""
    if isinstance(target.cluster, InMemoryCluster):
        target.cluster.expire_history()
        return target.cluster
    assert isinstance(target.cluster, StreamWatchable)
    return ForgettingStreams(target.cluster)
