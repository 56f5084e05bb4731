"""The real server's watch streams in the event loop (cluster/kube_stream.py, issue 43): many
streams of one cluster share one HTTP/2 connection (counted in /proc, on the real API server),
and what a server answers is translated once: a 410 ``ERROR`` event is ExpiredError, a 403
answer ForbiddenError, a refused connection a ServerError naming the cause (a real HTTP server
on 127.0.0.1 that answers so)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from reconciler.cluster.api import WatchEvent, WatchEventType
from reconciler.cluster.kube import KubeCluster, k8s_client, k8s_config
from reconciler.cluster.kube_stream import HttpStreams
from reconciler.cluster.watch_loop import WATCH_LOOP
from reconciler.errors import ExpiredError, ForbiddenError, ServerError
from tests.support.contract_targets import wait_until
from tests.support.kube_control_plane import ControlPlane

GONE = (
    b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
    b'"message":"too old resource version: 1 (2)","reason":"Expired","code":410}}\n'
)
REFUSED = (
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,'
    b'"message":"configmaps is forbidden: User \\"u\\" cannot watch resource \\"configmaps\\""}'
)


class _Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        refused = "forbidden" in self.path
        self.send_response(403 if refused else 200)
        self.send_header("Content-Type", "application/json")
        body = REFUSED if refused else GONE
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _streams(host: str) -> HttpStreams:
    configuration = k8s_client.Configuration()
    configuration.host = host
    return HttpStreams(k8s_client.ApiClient(configuration))


def _read(streams: HttpStreams, path: str) -> list[WatchEvent]:
    async def read() -> list[WatchEvent]:
        return [e async for e in streams.events(path, {}, 5, "watch ConfigMap")]

    return WATCH_LOOP.start(read()).result()


def test_a_410_event_is_expired_and_a_403_answer_forbidden(server: str) -> None:
    streams = _streams(server)

    with pytest.raises(ExpiredError, match="410 too old resource version"):
        _read(streams, "/api/v1/configmaps")
    with pytest.raises(ForbiddenError, match="403 configmaps is forbidden"):
        _read(streams, "/api/v1/forbidden")


def test_a_refused_connection_is_a_server_error_naming_the_cause(server: str) -> None:
    port = urlsplit(server).port
    streams = _streams("http://127.0.0.1:1")
    assert port != 1

    with pytest.raises(ServerError, match="connection refused"):
        _read(streams, "/api/v1/configmaps")


def _connections_to(port: int) -> int:
    """This process's established TCP connections to ``port``."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    connected = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]:
            parts = line.split()
            remote = int(parts[2].rsplit(":", 1)[1], 16)
            connected += parts[3] == "01" and remote == port and parts[9] in inodes
    return connected


@pytest.mark.kube
@pytest.mark.timeout(180)
def test_many_watch_streams_of_a_cluster_share_one_http2_connection(
    kube_control_plane: ControlPlane,
) -> None:
    api_client = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    cluster = KubeCluster(api_client, name="streams")
    port = urlsplit(api_client.configuration.host).port
    kinds = [("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("apps/v1", "Deployment")]
    starts = {kind: cluster.list_for_watch(*kind).resource_version for kind in kinds}
    before = _connections_to(port)
    opened: list[str] = []

    async def watch(api_version: str, kind: str) -> None:
        events = cluster.watch_async(
            api_version, kind, resource_version=starts[api_version, kind], timeout_seconds=120
        )
        opened.append(kind)
        async for event in events:
            assert event.type in WatchEventType

    tasks = [WATCH_LOOP.start(watch(*kind)) for kind in kinds]
    wait_until(lambda: len(opened) == len(kinds) and _connections_to(port) > before)
    during = _connections_to(port)
    for task in tasks:
        task.cancel()

    assert during - before == 1  # one connection for the four streams (HTTP/1.1: four)
