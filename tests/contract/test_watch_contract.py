"""The watch contract (``Watchable``): events in order, label-selected, resumable after a
dropped stream, 410 Gone for a resourceVersion no longer kept, and a watch that relists on it
without losing a change, and a watch closed from another thread that ends its stream at once
(not at the stream's timeout). Runs on the in-memory cluster and on the real API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from itertools import islice
from typing import Any

import pytest

from reconciler.cluster.api import Watchable, WatchEvent, WatchEventType
from reconciler.cluster.watch import KindWatch
from reconciler.core.objects import ObjectRef
from reconciler.errors import ExpiredError
from tests.support.contract_targets import MANAGER, Target, apply_namespace
from tests.support.watch_targets import forgetful

OURS = {"app.kubernetes.io/managed-by": "reconciler-watch-contract"}
#: A stream's timeout far beyond the test's (pytest-timeout) guard: only a hangup ends it.
HOUR = 3600.0


def _watchable(target: Target) -> Watchable:
    assert isinstance(target.cluster, Watchable)
    return target.cluster


def _configmap(namespace: str, name: str, labels: dict[str, str], **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": data,
    }


def _changes(events: Iterator[WatchEvent], count: int) -> list[WatchEvent]:
    """The first ``count`` events that are no bookmarks (the stream is closed after)."""
    return list(islice((e for e in events if e.type is not WatchEventType.BOOKMARK), count))


def test_events_come_in_order_and_only_for_the_labels_asked(target: Target) -> None:
    namespace = apply_namespace(target)
    start = _watchable(target).list_for_watch("v1", "ConfigMap", labels=OURS).resource_version
    cluster = target.cluster
    cluster.apply(_configmap(namespace, "a", OURS, v="1"), field_manager=MANAGER)
    cluster.apply(_configmap(namespace, "other", {}, v="1"), field_manager=MANAGER)
    cluster.apply(_configmap(namespace, "a", OURS, v="2"), field_manager=MANAGER)
    cluster.delete(ObjectRef("v1", "ConfigMap", namespace, "a"))

    events = _changes(
        _watchable(target).watch(
            "v1", "ConfigMap", resource_version=start, labels=OURS, timeout_seconds=5
        ),
        3,
    )

    assert [(e.type, e.body["metadata"]["name"]) for e in events] == [
        (WatchEventType.ADDED, "a"),
        (WatchEventType.MODIFIED, "a"),
        (WatchEventType.DELETED, "a"),
    ]
    assert events[1].body["data"] == {"v": "2"}
    versions = [int(e.resource_version) for e in events]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3


def test_a_dropped_stream_resumes_from_its_last_resource_version(target: Target) -> None:
    namespace = apply_namespace(target)
    start = _watchable(target).list_for_watch("v1", "ConfigMap", labels=OURS).resource_version
    for name in ("one", "two", "three"):
        target.cluster.apply(_configmap(namespace, name, OURS), field_manager=MANAGER)

    first = _changes(
        _watchable(target).watch(
            "v1", "ConfigMap", resource_version=start, labels=OURS, timeout_seconds=5
        ),
        1,
    )  # and the connection dropped
    rest = _changes(
        _watchable(target).watch(
            "v1",
            "ConfigMap",
            resource_version=first[-1].resource_version,
            labels=OURS,
            timeout_seconds=5,
        ),
        2,
    )

    assert [e.body["metadata"]["name"] for e in first + rest] == ["one", "two", "three"]


def test_a_resource_version_no_longer_kept_is_gone(target: Target) -> None:
    namespace = apply_namespace(target)
    target.cluster.apply(_configmap(namespace, "a", OURS), field_manager=MANAGER)
    cluster = forgetful(target)

    with pytest.raises(ExpiredError):
        _changes(cluster.watch("v1", "ConfigMap", resource_version="1", labels=OURS), 1)


def test_a_watch_relists_after_410_and_loses_no_change(target: Target) -> None:
    namespace = apply_namespace(target)
    cluster = target.cluster
    for name in ("kept", "changed", "deleted"):
        cluster.apply(_configmap(namespace, name, OURS, v="1"), field_manager=MANAGER)
    seen: list[tuple[WatchEventType, str]] = []
    watch = KindWatch(
        _watchable(target),
        "v1",
        "ConfigMap",
        lambda event, _before: seen.append((event.type, event.body["metadata"]["name"])),
        labels=OURS,
        stream_seconds=1,
    )
    watch.step()  # the first list: no events
    cluster.apply(_configmap(namespace, "changed", OURS, v="2"), field_manager=MANAGER)
    cluster.delete(ObjectRef("v1", "ConfigMap", namespace, "deleted"))
    cluster.apply(_configmap(namespace, "added", OURS), field_manager=MANAGER)
    watch.cluster = forgetful(target)  # the server forgot those changes' events

    watch.step()  # 410 Gone
    watch.step()  # the relist

    assert watch.counts.expired == 1
    mine = sorted(s for s in seen if s[1] in ("kept", "changed", "deleted", "added"))
    assert mine == [
        (WatchEventType.ADDED, "added"),
        (WatchEventType.DELETED, "deleted"),
        (WatchEventType.MODIFIED, "changed"),
    ]
    names = {key for key in watch.cache if key[0] == namespace}
    assert names == {(namespace, "kept"), (namespace, "changed"), (namespace, "added")}


@pytest.mark.timeout(120)  # without the hangup, the stream would end only after an hour
def test_a_watch_closed_from_another_thread_ends_its_stream_at_once(target: Target) -> None:
    namespace = apply_namespace(target)
    told = threading.Event()
    watch = KindWatch(
        _watchable(target),
        "v1",
        "ConfigMap",
        lambda _event, _before: told.set(),
        labels=OURS,
        stream_seconds=HOUR,
    )
    watch.step()  # the first list
    reader = threading.Thread(target=watch.run, name="watch", daemon=True)
    reader.start()
    target.cluster.apply(_configmap(namespace, "told", OURS), field_manager=MANAGER)
    assert told.wait(60), "the change was not told"  # a stream is open, reading on

    watch.close()
    reader.join()  # returns when the reader has ended: at once, or the guard fails the test

    assert watch.counts.errors == 0  # a hangup is no error
    assert watch.error == ""
