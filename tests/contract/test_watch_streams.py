"""The watch contract in the event loop (many watches, one thread): a stream read
there (``StreamWatchable.watch_async``: over HTTP/2 on the real server) tells the events in
order and only for the labels asked, resumes from its last resourceVersion, a 403 refuses it; a
watch run as a task (``KindWatch.step_async``/``run_async``) relists after a 410 without losing a
change, backs off after a failure, and closed from another thread ends its stream at once (not
at its timeout). Runs on the in-memory cluster and on the real API server."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reconciler.cluster.api import (
    Permission,
    StreamWatchable,
    WatchEvent,
    WatchEventType,
)
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.cluster.watch import KindWatch
from reconciler.cluster.watch_loop import WATCH_LOOP
from reconciler.core.objects import ObjectRef
from reconciler.errors import ForbiddenError, ServerError
from tests.support.contract_targets import MANAGER, Target, apply_namespace, wait_until
from tests.support.watch_targets import as_watcher_in, forgetful_streams

OURS = {"app.kubernetes.io/managed-by": "reconciler-watch-streams"}
#: A stream's timeout far beyond the test's (pytest-timeout) guard: only a hangup ends it.
HOUR = 3600.0


def _streams(target: Target) -> StreamWatchable:
    assert isinstance(target.cluster, StreamWatchable)
    return target.cluster


def _configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": OURS},
        "data": data,
    }


def _changes(
    cluster: StreamWatchable, start: str, count: int, namespace: str | None = None
) -> list[WatchEvent]:
    """The first ``count`` events after ``start`` that are no bookmarks, read in the loop."""

    async def read() -> list[WatchEvent]:
        found: list[WatchEvent] = []
        events = cluster.watch_async(
            "v1",
            "ConfigMap",
            resource_version=start,
            labels=OURS,
            timeout_seconds=5,
            namespace=namespace,
        )
        async for event in events:
            if event.type is not WatchEventType.BOOKMARK:
                found.append(event)
            if len(found) == count:
                break
        await events.aclose()
        return found

    return WATCH_LOOP.start(read()).result()


def test_a_stream_in_the_loop_tells_events_in_order_and_resumes(target: Target) -> None:
    namespace = apply_namespace(target)
    cluster = _streams(target)
    start = cluster.list_for_watch("v1", "ConfigMap", labels=OURS).resource_version
    target.cluster.apply(_configmap(namespace, "a", v="1"), field_manager=MANAGER)
    target.cluster.apply({**_configmap(namespace, "other"), "metadata": {
        "name": "other", "namespace": namespace}}, field_manager=MANAGER)  # fmt: skip
    target.cluster.apply(_configmap(namespace, "a", v="2"), field_manager=MANAGER)
    target.cluster.delete(ObjectRef("v1", "ConfigMap", namespace, "a"))

    first = _changes(cluster, start, 1)  # and the connection dropped
    rest = _changes(cluster, first[-1].resource_version, 2)

    assert [(e.type, e.body["metadata"]["name"]) for e in first + rest] == [
        (WatchEventType.ADDED, "a"),
        (WatchEventType.MODIFIED, "a"),
        (WatchEventType.DELETED, "a"),
    ]
    assert rest[0].body["data"] == {"v": "2"}


def test_a_stream_in_the_loop_is_refused_where_the_identity_may_not_watch(
    target: Target, request: pytest.FixtureRequest
) -> None:
    granted = apply_namespace(target, "granted")
    watcher = as_watcher_in(target, request, granted)
    wait_until(lambda: watcher.can_i(Permission("watch", "", "configmaps", granted)))
    listing = watcher.list_for_watch("v1", "ConfigMap", labels=OURS, namespace=granted)

    with pytest.raises(ForbiddenError, match="configmaps"):
        _changes(watcher, listing.resource_version, 1)
    target.cluster.apply(_configmap(granted, "mine"), field_manager=MANAGER)
    told = _changes(watcher, listing.resource_version, 1, namespace=granted)

    assert [e.body["metadata"]["name"] for e in told] == ["mine"]


def test_a_watch_in_the_loop_relists_after_410_and_loses_no_change(target: Target) -> None:
    namespace = apply_namespace(target)
    cluster = target.cluster
    for name in ("kept", "changed", "deleted"):
        cluster.apply(_configmap(namespace, name, v="1"), field_manager=MANAGER)
    seen: list[tuple[WatchEventType, str]] = []
    watch = KindWatch(
        _streams(target),
        "v1",
        "ConfigMap",
        lambda event, _before: seen.append((event.type, event.body["metadata"]["name"])),
        labels=OURS,
        stream_seconds=1,
    )
    assert WATCH_LOOP.start(watch.step_async()).result()  # the first list: no events
    cluster.apply(_configmap(namespace, "changed", v="2"), field_manager=MANAGER)
    cluster.delete(ObjectRef("v1", "ConfigMap", namespace, "deleted"))
    cluster.apply(_configmap(namespace, "added"), field_manager=MANAGER)
    watch.cluster = forgetful_streams(target)  # the server forgot those changes' events

    assert WATCH_LOOP.start(watch.step_async()).result()  # 410 Gone
    assert WATCH_LOOP.start(watch.step_async()).result()  # the relist

    assert watch.counts.expired == 1
    mine = sorted(s for s in seen if s[1] in ("kept", "changed", "deleted", "added"))
    assert mine == [
        (WatchEventType.ADDED, "added"),
        (WatchEventType.DELETED, "deleted"),
        (WatchEventType.MODIFIED, "changed"),
    ]


def test_a_watch_in_the_loop_backs_off_after_a_failure() -> None:
    cluster = InMemoryCluster()
    waits: list[float] = []
    watch = KindWatch(
        cluster, "v1", "ConfigMap", lambda _e, _b: None, stream_seconds=0, wait=_waits(waits)
    )
    WATCH_LOOP.start(watch.step_async()).result()  # the first list
    cluster.faults.append(Fault("watch", ServerError("connection reset"), times=2))

    for _ in range(3):
        assert WATCH_LOOP.start(watch.step_async()).result()

    assert waits == [0.5, 1.0]
    assert watch.counts.errors == 2
    assert watch.error == ""  # the third stream went through


def _waits(waits: list[float]) -> Any:
    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return False

    return wait


@pytest.mark.timeout(120)  # without the hangup, the stream would end only after an hour
def test_a_watch_in_the_loop_closed_from_another_thread_ends_at_once(target: Target) -> None:
    namespace = apply_namespace(target)
    told = threading.Event()
    watch = KindWatch(
        _streams(target),
        "v1",
        "ConfigMap",
        lambda _event, _before: told.set(),
        labels=OURS,
        stream_seconds=HOUR,
    )
    watch.prime()
    task = WATCH_LOOP.start(watch.run_async())
    target.cluster.apply(_configmap(namespace, "told"), field_manager=MANAGER)
    assert told.wait(60), "the change was not told"  # a stream is open, reading on

    watch.close()
    task.result()  # returns when the task has ended: at once, or the guard fails the test

    assert watch.counts.errors == 0  # a hangup is no error
    assert watch.error == ""
