"""One kind watched (KindWatch) on the in-memory cluster: a bookmark moves the resourceVersion
on, a failed stream backs off (0.5 s doubled, reset by a success) through the wait seam, the
first list tells nothing, a watch told to stop during a backoff stops, a 403 stops it at once
(said once), and a bug in its handler is one failure line, backed off."""

from __future__ import annotations

import logging

import pytest

from reconciler.cluster.api import Permission, WatchEventType
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.cluster.watch import Backoff, KindWatch
from reconciler.errors import ServerError


def _configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {}}  # fmt: skip


def _watched(cluster: InMemoryCluster, seen: list[str], waits: list[float]) -> KindWatch:
    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) > 5  # stop after a few

    return KindWatch(
        cluster,
        "v1",
        "ConfigMap",
        lambda event, _before: seen.append(f"{event.type} {event.body['metadata']['name']}"),
        stream_seconds=0,
        wait=wait,
    )


def test_the_first_list_tells_nothing_and_a_bookmark_moves_on() -> None:
    cluster = InMemoryCluster()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
                  field_manager="t")  # fmt: skip
    cluster.apply(_configmap("before"), field_manager="t")
    seen: list[str] = []
    watch = _watched(cluster, seen, [])

    watch.step()
    listed = watch.resource_version
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "s", "namespace": "default"}}  # fmt: skip
    cluster.apply(secret, field_manager="t")
    watch.step()  # nothing of its kind: a bookmark only

    assert seen == []
    assert int(watch.resource_version) > int(listed)  # from the bookmark
    cluster.apply(_configmap("after"), field_manager="t")
    watch.step()
    assert seen == [f"{WatchEventType.ADDED} after"]


def test_errors_back_off_and_a_success_resets_the_delay() -> None:
    cluster = InMemoryCluster()
    seen: list[str] = []
    waits: list[float] = []
    watch = _watched(cluster, seen, waits)
    watch.step()
    cluster.faults.append(Fault("watch", ServerError("connection reset"), times=3))

    for _ in range(4):
        assert watch.step()

    assert waits == [0.5, 1.0, 2.0]
    assert watch.counts.errors == 3
    assert watch.error == ""  # the fourth stream went through
    assert Backoff(first=0.5, most=30.0).delay() == 0.5


def test_a_watch_told_to_stop_during_a_backoff_stops() -> None:
    cluster = InMemoryCluster()
    waits: list[float] = []
    watch = _watched(cluster, [], waits)
    watch.step()
    cluster.faults.append(Fault("watch", ServerError("down"), times=100))

    watch.run()  # returns once wait() says stop

    assert len(waits) == 6
    assert waits[-1] == 16.0


def test_a_failure_is_logged_once_per_change_of_state(caplog: pytest.LogCaptureFixture) -> None:
    """The same failure again and again is one warning; a new one is news; so is the end."""
    cluster = InMemoryCluster()
    watch = _watched(cluster, [], [])
    watch.step()
    cluster.faults.append(Fault("watch", ServerError("connection reset"), times=3))
    cluster.faults.append(Fault("watch", ServerError("forbidden now"), times=2))
    caplog.set_level(logging.INFO, logger="reconciler")

    for _ in range(6):
        watch.step()

    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert said == [
        "watch ConfigMap (v1): connection reset (tried again in 0.5s, and so on)",
        "watch ConfigMap (v1): forbidden now (tried again in 4s, and so on)",
        "watch ConfigMap (v1): works again",
    ]


def test_a_watch_refused_by_rbac_stops_at_once_and_says_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = InMemoryCluster()
    waits: list[float] = []
    watch = _watched(cluster, [], waits)
    watch.step()  # listed while allowed
    cluster.denied = {Permission("watch", "", "configmaps")}  # the grant taken away

    assert watch.step() is False  # stopped: no retry would help before a grant
    assert waits == []
    assert 'cannot watch resource "configmaps"' in watch.refused
    (said,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said.startswith("watch ConfigMap (v1): refused, stopped: watch ConfigMap: 403")


def test_a_bug_in_the_handler_is_one_failure_line_and_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = InMemoryCluster()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
                  field_manager="t")  # fmt: skip
    waits: list[float] = []

    def broken(_event: object, _before: object) -> None:
        raise KeyError("metadata")

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return False  # go on

    watch = KindWatch(cluster, "v1", "ConfigMap", broken, stream_seconds=0, wait=wait)
    watch.step()
    cluster.apply(_configmap("a"), field_manager="t")

    assert watch.step() is True  # the thread lives on (the wait seam said go on)
    assert waits == [0.5]
    (said,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == (
        "watch ConfigMap (v1): internal error: KeyError: 'metadata' (tried again in 0.5s, "
        "and so on)"
    )
