"""The watch contract under a namespaced identity (a Role in one namespace only): the review
answers what RBAC grants (one namespace yes, all namespaces and the others no), a list or watch
of all namespaces is refused with :class:`~reconciler.errors.ForbiddenError`, and a list and
watch of the one namespace work, telling only that namespace's changes. On the in-memory
cluster (``only_in``) and on the real API server (a user impersonated by the admin, bound to a
Role in that namespace)."""

from __future__ import annotations

from itertools import islice
from typing import Any

import pytest

from reconciler.cluster.api import Permission, WatchEventType
from reconciler.errors import ForbiddenError
from tests.support.contract_targets import MANAGER, Target, apply_namespace, wait_until
from tests.support.watch_targets import as_watcher_in

OURS = {"app.kubernetes.io/managed-by": "reconciler-watch-access"}


def _configmap(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": OURS},
    }


def test_a_namespaced_identity_watches_its_namespace_and_is_refused_elsewhere(
    target: Target, request: pytest.FixtureRequest
) -> None:
    granted, other = apply_namespace(target, "granted"), apply_namespace(target, "other")
    watcher = as_watcher_in(target, request, granted)
    in_granted = Permission("watch", "", "configmaps", granted)
    wait_until(lambda: watcher.can_i(in_granted))  # a server's RBAC takes a grant in a moment

    assert not watcher.can_i(Permission("watch", "", "configmaps"))
    assert not watcher.can_i(Permission("list", "", "configmaps", other))
    with pytest.raises(ForbiddenError, match="configmaps"):
        watcher.list_for_watch("v1", "ConfigMap", labels=OURS)
    with pytest.raises(ForbiddenError, match="configmaps"):
        next(iter(watcher.watch("v1", "ConfigMap", resource_version="1", timeout_seconds=5)))
    with pytest.raises(ForbiddenError):
        watcher.list_for_watch("v1", "ConfigMap", labels=OURS, namespace=other)

    listing = watcher.list_for_watch("v1", "ConfigMap", labels=OURS, namespace=granted)
    target.cluster.apply(_configmap(other, "theirs"), field_manager=MANAGER)
    target.cluster.apply(_configmap(granted, "mine"), field_manager=MANAGER)
    events = watcher.watch(
        "v1",
        "ConfigMap",
        resource_version=listing.resource_version,
        labels=OURS,
        timeout_seconds=5,
        namespace=granted,
    )
    changes = (e for e in events if e.type is not WatchEventType.BOOKMARK)
    told = [
        (e.type, e.body["metadata"]["namespace"], e.body["metadata"]["name"])
        for e in islice(changes, 1)  # "theirs" came first: told, were it watched
    ]

    assert listing.items == []
    assert told == [(WatchEventType.ADDED, granted, "mine")]
