"""Abuse of the daemon's HTTP port, against a real `reconciler daemon` process on 127.0.0.1 that
follows a local git repository with snapshot clusters: malformed and huge Content-Lengths, 50 slow
clients and 1,000 unsigned requests at once, while a probe asks /healthz every 100 ms and reads the
daemon's resident memory. Bounded: about 15 s."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import select
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.daemons import Fleet, free_port, http_get, until

SECRET = "abuse-test-secret"
READ_TIMEOUT = 2
MIB = 1 << 20


@dataclass
class Running:
    """The daemon process and where to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    state: Path
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def operations(self) -> list[tuple[str, ...]]:
        """Every operation in the state store: id, runtime, state, last update."""
        query = "SELECT id, runtime, state, updated FROM operations ORDER BY id"
        with sqlite3.connect(f"file:{self.state}?mode=ro", uri=True) as db:
            return [tuple(str(v) for v in row) for row in db.execute(query).fetchall()]

    def last_poll(self) -> str:
        return str(json.loads(http_get(self.base + "/status")[1])["source"]["lastPoll"])


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Running]:
    Fleet(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    port = free_port()
    log = tmp_path / "daemon.log"
    env = {
        **os.environ,
        "RECONCILER_REPO": str(tmp_path / "remote.git"),
        "RECONCILER_PATH": "fleet",
        "RECONCILER_STATE": f"sqlite:///{tmp_path / 'state.db'}",
    }
    command = [sys.executable, "-m", "reconciler", "daemon", "--interval", "1h"]
    command += ["--resync-interval", "1h", "--listen", f"127.0.0.1:{port}"]
    command += ["--snapshot", f"{tmp_path / 'clusters'}/", "--snapshot-create"]
    command += ["--webhook-secret-file", str(secret)]
    command += ["--http-read-timeout", f"{READ_TIMEOUT}s", "--log-format", "json"]
    # 61 clients at once, all on 127.0.0.1: the share of one address is not under test here
    command += ["--http-max-connections-per-client", "100"]
    with log.open("wb") as output:  # a file, not a pipe: 1,000 log lines must never block it
        process = subprocess.Popen(command, env=env, stdout=output, stderr=output)
    running = Running(process, port, tmp_path / "state.db", log)
    try:
        yield running
    finally:
        process.terminate()
        process.wait(timeout=30)


@dataclass
class Probe:
    """Asks /healthz every 100 ms on a new connection; records each answer's time and RSS."""

    daemon: Running
    answers: list[tuple[int, float]] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            began = time.monotonic()
            try:
                status = _exchange(self.daemon.port, b"GET /healthz HTTP/1.1\r\n\r\n")[0]
            except OSError:
                status = 0
            self.answers.append((status, time.monotonic() - began))
            self.rss.append(self.daemon.rss_mb())


def _exchange(port: int, data: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        return _read(sock)


def _read(sock: socket.socket) -> tuple[int, bytes]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


def _refused_before_the_body(port: int, length: str) -> tuple[int, int]:
    """Headers announcing ``length``: the status, read before any body byte is sent; then how
    many of 300 MiB the closed connection still took."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"POST /hooks/git HTTP/1.1\r\nContent-Length: {length}\r\n\r\n".encode())
        status, body = _read(sock)
        assert "error" in json.loads(body)
        sent = 0
        try:
            while sent < 300 * MIB:
                sock.sendall(b"x" * MIB)
                sent += MIB
        except OSError:
            pass
        return status, sent


def _slow_clients(port: int, count: int) -> list[float]:
    """Half trickle their headers a byte at a time, half never finish their body; seconds until
    the daemon ended each (a 408, then the connection closed)."""
    clients = []
    for number in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if number % 2:
            sock.sendall(b"POST /hooks/git HTTP/1.1\r\nContent-Length: 5000\r\n\r\n{")
        else:
            sock.sendall(b"POST /sync HTTP/1.1\r\n")
        clients.append(sock)
    tricklers = set(clients[::2])
    began = time.monotonic()
    ended: dict[socket.socket, float] = {}
    while len(ended) < count and time.monotonic() - began < READ_TIMEOUT + 10:
        waiting = [s for s in clients if s not in ended]
        for sock in select.select(waiting, [], [], 0.2)[0]:
            ended[sock] = time.monotonic() - began
            _answered_408(sock)
        for sock in tricklers.difference(ended):
            try:
                sock.sendall(b"X")  # never idle, never done
            except OSError:  # closed by the daemon since the select
                ended[sock] = time.monotonic() - began
    for sock in clients:
        sock.close()
    return list(ended.values())


def _answered_408(sock: socket.socket) -> None:
    try:
        status = _read(sock)[0]
    except OSError:  # reset: a trickled byte reached the closed socket after the 408
        return
    assert status == 408


def _unsigned(port: int, count: int) -> list[int]:
    """``count`` requests without a valid secret, on one keep-alive connection."""
    body = json.dumps({"ref": "refs/heads/main", "pad": "x" * 65536}).encode()
    wrong = "sha256=" + hmac.new(b"guess", body, hashlib.sha256).hexdigest()
    kinds: list[tuple[str, bytes, dict[str, str]]] = [
        ("/hooks/git", body, {}),
        ("/hooks/git", body, {"X-Hub-Signature-256": wrong}),
        ("/hooks/git", b"{}", {"X-Gitlab-Token": "guess"}),
        ("/sync", b"", {}),
        ("/sync", b"", {"Authorization": "Bearer guess"}),
    ]
    statuses = []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for number in range(count):
        path, data, headers = kinds[number % len(kinds)]
        connection.request("POST", path, body=data, headers=headers)
        response = connection.getresponse()
        response.read()
        statuses.append(response.status)
    connection.close()
    return statuses


def test_abuse_of_the_http_port_keeps_memory_bounded_health_answering_and_syncs_nothing(
    daemon: Running,
) -> None:
    until(lambda: _answers(daemon) and http_get(daemon.base + "/readyz")[0] == 200)
    settled: list[object] = []
    until(lambda: _settled(daemon, settled), seconds=30)
    operations, last_poll = daemon.operations(), daemon.last_poll()

    probe = Probe(daemon)
    prober = threading.Thread(target=probe.run)
    prober.start()
    slow: list[float] = []
    statuses: list[list[int]] = [[] for _ in range(10)]
    workers = [threading.Thread(target=lambda: slow.extend(_slow_clients(daemon.port, 50)))]
    workers += [
        threading.Thread(target=lambda n=n: statuses[n].extend(_unsigned(daemon.port, 100)))
        for n in range(10)
    ]
    try:
        for worker in workers:
            worker.start()
        began = len(probe.answers)
        missing = _exchange(daemon.port, b"POST /sync HTTP/1.1\r\nHost: x\r\n\r\n")[0]
        refused = [_refused_before_the_body(daemon.port, n) for n in ("-1", "abc", str(300 * MIB))]
        for worker in workers:
            worker.join(timeout=60)
        during = len(probe.answers) - began
    finally:
        probe.stop.set()
        prober.join()

    assert missing == 411
    assert [status for status, _ in refused] == [400, 400, 413]
    assert all(taken < 64 * MIB for _, taken in refused)  # the rest of 300 MiB is refused
    assert len(slow) == 50  # each cut at the read timeout: 50 answers 408, counted in the log
    assert sum(len(s) for s in statuses) == 1000
    assert {code for s in statuses for code in s} == {403}

    # asked while the abuse went on (the slow clients alone last the read timeout, 2 s, for a
    # probe every 100 ms): a count of the probes made, not of the time they took
    assert during >= 3, probe.answers
    assert {status for status, _ in probe.answers} == {200}
    slowest = max(seconds for _, seconds in probe.answers)  # a figure, printed, not asserted
    peak = max([*probe.rss, daemon.rss_mb()])
    assert peak < 150
    print(
        f"healthz slowest {slowest * 1000:.0f} ms over {len(probe.answers)} probes; "
        f"RSS peak {peak:.0f} MB"
    )

    assert daemon.operations() == operations  # nothing synced
    assert daemon.last_poll() == last_poll  # no poll started
    log = daemon.log.read_text()
    assert "Traceback" not in log
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    http_lines = [line["message"] for line in lines if line["logger"] == "reconciler.http"]
    assert sum(": 403 " in m for m in http_lines) == 1000
    assert sum(": 408 " in m for m in http_lines) == 50
    assert SECRET not in log
    assert "guess" not in log


def _answers(daemon: Running) -> bool:
    assert daemon.process.poll() is None, daemon.log.read_text()
    try:
        return http_get(daemon.base + "/healthz")[0] == 200
    except OSError:
        return False


def _settled(daemon: Running, seen: list[object]) -> bool:
    """The first reconcile is over: every runtime has a finished operation, the same twice."""
    operations = daemon.operations()
    done = {o[1] for o in operations} == set("abc") and all(
        o[2] in ("succeeded", "failed") for o in operations
    )
    seen.append(operations)
    return done and len(seen) > 1 and seen[-2] == operations
