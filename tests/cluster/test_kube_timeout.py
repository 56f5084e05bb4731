"""Requests to an API server that never answers end at the client-side time limit, as a transient
error naming the server and what to check: a listener that accepts and never answers (over http:
the request is read and never answered; over https: the TLS handshake is never answered), a
listener whose backlog is full (the connection is never accepted), and a server that answers
discovery and then hangs on every object request (get, list, apply, patch). Watches are not given
the limit: a watch on the real API server outlives it. Each test is guarded by pytest-timeout:
without the limit it would hang."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.kube import KubeCluster, connect, k8s_config
from reconciler.cluster.kube_client import CONNECT_SECONDS, RequestTimeout
from reconciler.cluster.kube_errors import TIMEOUT_RETRY_SECONDS
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.errors import ServerError, TransientError
from tests.support.http_fakes import JsonServer, discovery, write_kubeconfig
from tests.support.kube_control_plane import ControlPlane
from tests.support.repos import RepoFactory, runtime_file, small_repo

SHORT = RequestTimeout(0.5)
CONFIGMAPS = {
    "v1": [
        {
            "name": "configmaps",
            "namespaced": True,
            "kind": "ConfigMap",
            "verbs": ["get", "list", "create", "patch", "delete", "watch"],
        }
    ]
}


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port whose listener accepts connections and never answers (nor closes them)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose listener never accepts: its backlog is filled, so the kernel drops the SYNs
    of another connection (it is never accepted, never refused)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            yield port
        finally:
            for filler in fillers:
                filler.close()


def _connect(folder: Path, url: str) -> KubeCluster:
    write_kubeconfig(folder, url)
    return connect(
        ClusterAccess(kubeconfig_file="k"), name="rt", kubeconfig_dir=folder, timeout=SHORT
    )


def _timed_out(folder: Path, url: str) -> ServerError:
    with pytest.raises(ServerError) as caught:
        _connect(folder, url)
    assert isinstance(caught.value, TransientError)
    assert caught.value.retry_after == TIMEOUT_RETRY_SECONDS
    assert "t0ken" not in str(caught.value)
    return caught.value


@pytest.mark.timeout(30)
def test_a_server_that_reads_the_request_and_never_answers_times_out(
    tmp_path: Path, silent_listener: int
) -> None:
    url = f"http://127.0.0.1:{silent_listener}"

    error = _timed_out(tmp_path, url)

    assert str(error) == (
        f"rt: discovery: the API server {url} accepted the connection but did not answer in time "
        "(a hung or overloaded API server, or a proxy in between? raise --kube-timeout or "
        "RECONCILER_KUBE_TIMEOUT if it is only slow)"
    )


@pytest.mark.timeout(30)
def test_a_server_that_never_answers_the_tls_handshake_times_out(
    tmp_path: Path, silent_listener: int
) -> None:
    url = f"https://127.0.0.1:{silent_listener}"

    error = _timed_out(tmp_path, url)

    assert str(error).startswith(
        f"rt: discovery: the API server {url} accepted the connection but did not answer in time"
    )


@pytest.mark.timeout(30)
def test_a_connection_never_accepted_times_out(tmp_path: Path, full_backlog: int) -> None:
    url = f"https://127.0.0.1:{full_backlog}"

    error = _timed_out(tmp_path, url)

    assert "no connection in time (a firewall" in str(error)
    assert "--kube-timeout" in str(error)


class HangingServer(JsonServer):
    """Answers discovery (ConfigMaps in v1), then holds every other request unanswered until
    closed."""

    def __init__(self) -> None:
        self.released = threading.Event()
        super().__init__(self._route)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        found = discovery(path, CONFIGMAPS)
        if found is not None:
            return found
        self.released.wait()
        return 503, {"kind": "Status", "code": 503}

    def close(self) -> None:
        self.released.set()
        super().close()


@pytest.fixture
def hanging_server() -> Iterator[HangingServer]:
    server = HangingServer()
    yield server
    server.close()


_CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "d"}}
_REQUESTS = {
    "get": lambda c: c.get(ObjectRef.of(_CONFIGMAP)),
    "list": lambda c: c.list_objects("v1", "ConfigMap", namespace="d"),
    "apply": lambda c: c.apply(_CONFIGMAP, field_manager="t"),
    "patch": lambda c: c.patch(ObjectRef.of(_CONFIGMAP), {"data": {"x": "1"}}),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("request_name", sorted(_REQUESTS))
def test_every_request_after_discovery_has_the_limit(
    tmp_path: Path, hanging_server: HangingServer, request_name: str
) -> None:
    cluster = _connect(tmp_path, hanging_server.url)

    with pytest.raises(ServerError, match="accepted the connection but did not answer in time"):
        _REQUESTS[request_name](cluster)


def test_the_connect_limit_is_the_lower_of_its_own_and_the_read_limit() -> None:
    assert RequestTimeout().pair == (CONNECT_SECONDS, 60.0)
    assert RequestTimeout(2.5).pair == (2.5, 2.5)
    assert RequestTimeout(300).pair == (CONNECT_SECONDS, 300)


@pytest.mark.timeout(60)
def test_the_kube_timeout_flag_reaches_the_clusters_of_a_command(
    make_repo: RepoFactory, tmp_path: Path, silent_listener: int
) -> None:
    """``diff`` with ``--kube-timeout 1s`` against a server that never answers ends with one
    line naming the runtime and the server (without the flag it waits a minute per request)."""
    files = {**small_repo()}
    files.update(
        runtime_file("one", "regular", [{"name": "alpha"}], cluster={"kubeconfigFile": "k"})
    )
    repo = make_repo(files)
    kubeconfigs = write_kubeconfig(tmp_path, f"http://127.0.0.1:{silent_listener}")
    args = ["diff", str(repo), "--runtime", "one", "--kubeconfig-dir", str(kubeconfigs)]

    result = CliRunner().invoke(cli, [*args, "--kube-timeout", "1s"])

    assert "accepted the connection but did not answer in time" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ["0", "soon", "-1s"])
def test_a_bad_kube_timeout_is_one_line_and_exit_2(value: str) -> None:
    result = CliRunner().invoke(cli, ["sync", "--kube-timeout", value])

    assert result.exit_code == 2
    assert "--kube-timeout" in result.output
    assert "Traceback" not in result.output


@pytest.mark.kube
@pytest.mark.timeout(60)
def test_a_watch_is_not_given_the_limit(kube_control_plane: ControlPlane) -> None:
    """A watch on a kind nobody changes sends nothing for longer than the read limit (1 s here)
    and ends only at its own server-side timeout (5 s), without an error."""
    api_client = k8s_config.new_client_from_config(config_file=str(kube_control_plane.kubeconfig))
    cluster = KubeCluster(api_client, name="timeout", timeout=RequestTimeout(1.0))
    listed = cluster.list_for_watch(
        "v1", "ConfigMap", labels={"reconciler.dev/test": "watch-without-limit"}
    )

    events = list(
        cluster.watch(
            "v1",
            "ConfigMap",
            labels={"reconciler.dev/test": "watch-without-limit"},
            resource_version=listed.resource_version,
            timeout_seconds=5.0,
        )
    )

    assert [e for e in events if e.type.value != "BOOKMARK"] == []
