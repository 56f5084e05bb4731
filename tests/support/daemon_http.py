"""A daemon served on a real HTTP port on 127.0.0.1, for tests of what the port answers: the
``start`` fixture (a daemon that follows a local git repository and is never polled unless a test
says so, with its port and the options given) and raw HTTP exchanges with it. Callers: the HTTP
port and metrics tests of ``tests/daemon``, which import the fixture from here."""

from __future__ import annotations

import http.client
import socket
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.http import HttpServer, serve
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import Fleet

#: The webhook secret of the daemons that :func:`start` serves (unless a test passes another).
SECRET = b"http-test-secret"


#: ``start(secret=SECRET, **options)``: a served daemon, as :func:`start` yields it.
Serve = Callable[..., tuple[HttpServer, Daemon]]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Serve]:
    """Starts a daemon (never polled) and its HTTP port with the options given."""
    Fleet(tmp_path)
    started: list[tuple[HttpServer, Daemon]] = []

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return InMemoryCluster()

    def run(secret: bytes | None = SECRET, **options: Any) -> tuple[HttpServer, Daemon]:
        source = RemoteSource(
            str(tmp_path / "remote.git"), "main", "fleet", tmp_path / "cache", local=True
        )
        store = SqliteStore(tmp_path / f"state{len(started)}.db")
        daemon = Daemon(source, store, connect, lambda: datetime.now(UTC))
        server = serve(daemon, "127.0.0.1", 0, secret, **options)
        started.append((server, daemon))
        return server, daemon

    yield run
    for server, daemon in started:
        server.shutdown()
        server.server_close()
        daemon.wait_idle()
        daemon.close()


def port_of(server: HttpServer) -> int:
    """The port ``server`` listens on."""
    return server.server_address[1]


def exchange(port: int, data: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read one response: status, headers, body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_response(sock)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP response from ``sock``: status, headers, body."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, dict(response.getheaders()), response.read()


def daemon_command(tmp_path: Path, *args: str) -> Result:
    """``reconciler daemon --repo TMP --state ... ARGS`` in process, ``tmp_path`` made a git
    repository first (``--repo`` must be one): for a start refused from its command line."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    return CliRunner().invoke(cli, ["daemon", "--repo", str(tmp_path), "--state", state, *args])
