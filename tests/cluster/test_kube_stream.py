"""The real server's watch streams in the event loop (cluster/kube_stream.py): many
streams of one cluster share one HTTP/2 connection (counted in /proc, on the real API server),
and what a server answers is translated once: a 410 ``ERROR`` event is ExpiredError, a 403
event ForbiddenError, a refused connection a ServerError naming the cause, a server without
HTTP/2 said so (its streams are then read on threads: test_watch_loop)."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.cluster.kube import KubeCluster, k8s_client, k8s_config
from reconciler.cluster.kube_errors import translated
from reconciler.cluster.kube_stream import HttpStreams, NoHttp2Error, event_of_line
from reconciler.cluster.watch import KindWatch
from reconciler.cluster.watch_loop import WATCH_LOOP
from reconciler.errors import ExpiredError, ForbiddenError, ServerError
from tests.support.contract_targets import wait_until
from tests.support.kube_control_plane import ControlPlane
from tests.support.proc_sockets import fetch_connections

GONE = (
    b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
    b'"message":"too old resource version: 1 (2)","reason":"Expired","code":410}}\n'
)
REFUSED = (
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,'
    b'"message":"configmaps is forbidden: User \\"u\\" cannot watch resource \\"configmaps\\""}'
)


KINDS = [("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("apps/v1", "Deployment")]


def _streams(host: str) -> HttpStreams:
    configuration = k8s_client.Configuration()
    configuration.host = host
    return HttpStreams(k8s_client.ApiClient(configuration))


def _read(streams: HttpStreams, path: str) -> list[WatchEvent]:
    async def read() -> list[WatchEvent]:
        return [e async for e in streams.events(path, {}, 5, "watch ConfigMap")]

    return WATCH_LOOP.start(read()).result()


def test_a_410_error_event_is_expired_and_a_403_one_forbidden() -> None:
    with pytest.raises(ExpiredError, match="410 too old resource version"), translated("watch"):
        event_of_line(GONE)
    with pytest.raises(ForbiddenError, match="403 configmaps is forbidden"), translated("watch"):
        event_of_line(b'{"type":"ERROR","object":' + REFUSED + b"}")
    assert event_of_line(b"  ") is None


def test_a_refused_connection_is_a_server_error_naming_the_cause() -> None:
    with pytest.raises(ServerError, match="connection refused"):
        _read(_streams("https://127.0.0.1:1"), "/api/v1/configmaps")


def test_a_server_without_http2_is_said_so() -> None:
    with pytest.raises(NoHttp2Error):
        _read(_streams("http://127.0.0.1:1"), "/api/v1/configmaps")


def _connections_to(port: int) -> int:
    """This process's established TCP connections to ``port``."""
    return fetch_connections("self", port)[1]


@pytest.mark.kube
@pytest.mark.timeout(180)
def test_many_watch_streams_of_a_cluster_share_one_http2_connection(
    kube_control_plane: ControlPlane,
) -> None:
    api_client = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    cluster = KubeCluster(api_client, name="streams")
    port = urlsplit(api_client.configuration.host).port
    starts = {kind: cluster.list_for_watch(*kind).resource_version for kind in KINDS}
    before = _connections_to(port)
    opened: list[str] = []

    async def watch(api_version: str, kind: str) -> None:
        events = cluster.watch_async(
            api_version, kind, resource_version=starts[api_version, kind], timeout_seconds=120
        )
        opened.append(kind)
        async for event in events:
            assert event.type in WatchEventType

    tasks = [WATCH_LOOP.start(watch(*kind)) for kind in KINDS]
    wait_until(lambda: len(opened) == len(KINDS) and _connections_to(port) > before)
    during = _connections_to(port)
    for task in tasks:
        task.cancel()

    assert during - before == 1  # one connection for the four streams (HTTP/1.1: four)


@pytest.mark.kube
@pytest.mark.timeout(300)
def test_each_stream_of_a_connection_is_told_its_event_while_the_others_wait(
    kube_control_plane: ControlPlane,
) -> None:
    """One reader per connection hands each stream its frames: a change is told while the
    other streams (quiet kinds) wait on the same connection (a reader per stream taking turns
    on the socket left it queued until the next frame came, seconds to minutes later)."""
    api_client = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    cluster, writer = KubeCluster(api_client, name="streams"), KubeCluster(api_client)
    writer.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "told"}},
                 field_manager="test")  # fmt: skip
    told: dict[str, threading.Event] = {}

    def tell(event: WatchEvent, _before: object) -> None:
        told[event.body["metadata"]["name"]].set()

    watches = [
        KindWatch(cluster, api_version, kind, tell, labels={"told": "yes"})
        for api_version, kind in KINDS
    ]
    for watch in watches:
        watch.prime()
    tasks = [WATCH_LOOP.start(watch.run_async()) for watch in watches]

    for index, kind in enumerate(["ConfigMap", "Secret", "ConfigMap", "Secret", "ConfigMap"]):
        name = f"{kind.lower()}-{index}"
        told[name] = threading.Event()
        writer.apply({"apiVersion": "v1", "kind": kind, "metadata": {
            "name": name, "namespace": "told", "labels": {"told": "yes"}}},
            field_manager="test")  # fmt: skip
        assert told[name].wait(60), f"{name} was not told"

    for watch, task in zip(watches, tasks, strict=True):
        watch.close()
        task.result()
