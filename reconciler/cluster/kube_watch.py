"""Watches on the real API server: :class:`KubeWatches`, the list-then-watch half of
:class:`~reconciler.cluster.kube.KubeCluster` (see :class:`~reconciler.cluster.api.Watchable`);
a watch is one streamed request of the ``kubernetes`` client's watch, its events as
:class:`~reconciler.cluster.api.WatchEvent` values, errors translated once by the cluster's
request context (a 410 Gone as :class:`~reconciler.errors.ExpiredError`). With
:mod:`reconciler.cluster.kube` and :mod:`reconciler.cluster.kube_errors`, the only modules that
import ``kubernetes``. Caller: the daemon's watches (:mod:`reconciler.cluster.watch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from kubernetes import watch as _k8s_watch

from reconciler.cluster.api import Listing, WatchEvent, WatchEventType

k8s_watch: Any = _k8s_watch
#: The event types passed on (``ERROR``, a 410 Gone among them, is raised by the client).
WATCHED = frozenset(t.value for t in WatchEventType)


def stream_events(
    dynamic: Any, resource: Any, selector: str | None, resource_version: str, timeout: float
) -> Iterator[WatchEvent]:
    """The events of ``resource`` after ``resource_version`` (label ``selector``), with
    bookmarks, until the server ends the request after ``timeout`` seconds; the client's own
    retry after a 410 is off (a timeout is given), so a 410 is raised to the caller."""
    watcher = k8s_watch.Watch()
    try:
        stream = dynamic.watch(
            resource,
            label_selector=selector,
            resource_version=resource_version or None,
            timeout=max(1, int(timeout)),
            watcher=watcher,
            allow_watch_bookmarks=True,
        )
        for event in stream:
            raw = event.get("raw_object")
            if event.get("type") in WATCHED and isinstance(raw, dict):
                yield WatchEvent(WatchEventType(event["type"]), dict(raw))
    finally:
        watcher.stop()


def selector_of(labels: Mapping[str, str] | None) -> str | None:
    """A label selector requiring every label given (None: none)."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or None


class KubeWatches:
    """List-then-watch of any kind, for :class:`~reconciler.cluster.kube.KubeCluster` (which
    provides the requests, discovery and lists it uses)."""

    _dynamic: Any

    def _list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str] | None
    ) -> Listing:
        raise NotImplementedError

    def _resource(self, api_version: str, kind: str) -> Any:
        raise NotImplementedError

    def _request(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def list_for_watch(
        self, api_version: str, kind: str, *, labels: Mapping[str, str] | None = None
    ) -> Listing:
        """See :meth:`reconciler.cluster.api.Watchable.list_for_watch`."""
        return self._list(api_version, kind, None, labels)

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
    ) -> Iterator[WatchEvent]:
        """See :meth:`reconciler.cluster.api.Watchable.watch`."""
        resource = self._resource(api_version, kind)
        with self._request(f"watch {kind}"):
            yield from stream_events(
                self._dynamic, resource, selector_of(labels), resource_version, timeout_seconds
            )
