"""Watches on the real API server: :class:`KubeWatches`, the list-then-watch half of
:class:`~reconciler.cluster.kube.KubeCluster` (see :class:`~reconciler.cluster.api.Watchable`);
a watch is one streamed request of the ``kubernetes`` client's watch, its events as
:class:`~reconciler.cluster.api.WatchEvent` values, errors translated once by the cluster's
request context (a 410 Gone as :class:`~reconciler.errors.ExpiredError`). A stream is hung up
from another thread by shutting its response's socket down (the reading thread, blocked in the
socket's read, sees the end of the stream at once): the client's own ``Watch.stop()`` takes
effect at the next event only, minutes away on a quiet kind. With
:mod:`reconciler.cluster.kube` and :mod:`reconciler.cluster.kube_errors`, the only modules that
import ``kubernetes``. Caller: :class:`reconciler.cluster.kube.KubeCluster`, whose watches the
daemon's informers open.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from kubernetes import watch as _k8s_watch

from reconciler.cluster.api import Hangup, Listing, WatchEvent, WatchEventType
from reconciler.cluster.kube_stream import HttpStreams, NoHttp2Error
from reconciler.cluster.watch_loop import events_of_thread

k8s_watch: Any = _k8s_watch
#: The event types passed on (``ERROR``, a 410 Gone among them, is raised by the client).
WATCHED = frozenset(t.value for t in WatchEventType)


def stream_events(
    resource: Any,
    selector: str | None,
    resource_version: str,
    timeout: float,
    hangup: Hangup | None = None,
    namespace: str | None = None,
) -> Iterator[WatchEvent]:
    """The events of ``resource`` after ``resource_version`` (label ``selector``; in
    ``namespace``, or all), with
    bookmarks, until the server ends the request after ``timeout`` seconds, or ``hangup``
    ends it; the client's own retry after a 410 is off (a timeout is given), so a 410 is
    raised to the caller. Events are read as plain JSON (no model objects made of them)."""
    watcher = k8s_watch.Watch()
    opened = _Responses(hangup)
    try:
        for event in watcher.stream(
            opened.request(resource.get),
            namespace=namespace,
            label_selector=selector,
            resource_version=resource_version or None,
            serialize=False,
            timeout_seconds=max(1, int(timeout)),
            allow_watch_bookmarks=True,
        ):
            raw = event.get("raw_object")
            if event.get("type") in WATCHED and isinstance(raw, dict):
                yield WatchEvent(WatchEventType(event["type"]), dict(raw))
    except Exception:
        if not opened.hung_up():
            raise  # translated by the cluster's request context
    finally:
        opened.forget()


class _Responses:
    """The responses of one stream, shut down when ``hangup`` is told to end it: a response
    opened after that is shut down as it opens, so no hangup is missed between two reads."""

    def __init__(self, hangup: Hangup | None) -> None:
        self._hangup = hangup
        self._forgets: list[Callable[[], None]] = []

    def hung_up(self) -> bool:
        return self._hangup is not None and self._hangup.hung_up()

    def request(self, get: Callable[..., Any]) -> Callable[..., Any]:
        """``get`` (one watch request), its response shut down when hung up."""

        def get_watched(**kwargs: Any) -> Any:
            response = get(**kwargs)
            if self._hangup is not None:
                self._forgets.append(self._hangup.on_hangup(lambda: _shut_down(response)))
            return response

        return get_watched

    def forget(self) -> None:
        for forget in self._forgets:
            forget()


def _shut_down(response: Any) -> None:
    """Shut the socket of ``response`` (a urllib3 response being read in another thread)
    down for reading: that read ends at once. Nothing when the stream ended meanwhile."""
    with contextlib.suppress(ValueError, RuntimeError, OSError):
        response.shutdown()


def selector_of(labels: Mapping[str, str] | None) -> str | None:
    """A label selector requiring every label given (None: none)."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or None


class KubeWatches:
    """List-then-watch of any kind, for :class:`~reconciler.cluster.kube.KubeCluster` (which
    provides the requests, discovery and lists it uses)."""

    def _list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str] | None
    ) -> Listing:
        raise NotImplementedError

    def _resource(self, api_version: str, kind: str) -> Any:
        raise NotImplementedError

    def _request(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _api_client(self) -> Any:
        raise NotImplementedError

    #: The streams read in the event loop (made at the first).
    _streams: HttpStreams | None = None

    def list_for_watch(
        self,
        api_version: str,
        kind: str,
        *,
        labels: Mapping[str, str] | None = None,
        namespace: str | None = None,
    ) -> Listing:
        """See :meth:`reconciler.cluster.api.Watchable.list_for_watch`."""
        return self._list(api_version, kind, namespace, labels)

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
        """See :meth:`reconciler.cluster.api.Watchable.watch`."""
        resource = self._resource(api_version, kind)
        with self._request(f"watch {kind}" + (f" in {namespace}" if namespace else "")):
            yield from stream_events(
                resource, selector_of(labels), resource_version, timeout_seconds, hangup, namespace
            )

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
        """See :meth:`reconciler.cluster.api.StreamWatchable.watch_async`: over the cluster's
        HTTP/2 connection (:mod:`reconciler.cluster.kube_stream`); a server without HTTP/2 is
        read as :meth:`watch` reads it, on a thread of the stream's own."""
        resource = self._resource(api_version, kind)  # discovered by the list before it
        if self._streams is None:
            self._streams = HttpStreams(self._api_client())
        query = {"resourceVersion": resource_version}
        selector = selector_of(labels)
        if selector:
            query["labelSelector"] = selector
        what = f"watch {kind}" + (f" in {namespace}" if namespace else "")
        try:
            async for event in self._streams.events(
                resource.path(namespace=namespace), query, timeout_seconds, what
            ):
                yield event
            return
        except NoHttp2Error:
            pass
        threaded = events_of_thread(
            lambda stop: self.watch(
                api_version,
                kind,
                resource_version=resource_version,
                labels=labels,
                timeout_seconds=timeout_seconds,
                hangup=stop,
                namespace=namespace,
            )
        )
        async with contextlib.aclosing(threaded):
            async for event in threaded:
                yield event
