"""A notification receiver on 127.0.0.1 (http.server in a thread): it keeps every POST it
accepts (path, headers, JSON body) in order, and can fail each distinct body a number of times
first (503), answer every request with one status, or hold its answers until released."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reconciler.notify.transport import HttpTransport

#: What the daemon's flag says to reach the receivers: ``--notification-allow-network``.
LOOPBACK = "127.0.0.0/8"


def loopback_transport(deadline: float | None = None) -> HttpTransport:
    """The delivery's own transport, allowed to reach a receiver on 127.0.0.1."""
    allowed = (ipaddress.ip_network(LOOPBACK),)
    if deadline is None:
        return HttpTransport(allowed=allowed)
    return HttpTransport(allowed=allowed, deadline=deadline)


@dataclass
class Received:
    """One POST the receiver accepted."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    """See the module docstring; :meth:`start` serves, :meth:`close` stops."""

    #: 503 to the first N tries of each distinct body.
    fail_times: int = 0
    #: When set, the status of every answer (no request is accepted).
    status: int | None = None
    #: Headers of every answer (``Retry-After``, ``Location``).
    answer_headers: dict[str, str] = field(default_factory=dict)
    accepted: list[Received] = field(default_factory=list)
    #: Every try, accepted or not, as its path.
    tries: list[str] = field(default_factory=list)
    #: Cleared: answers wait until it is set (a slow endpoint).
    gate: threading.Event = field(default_factory=threading.Event)
    _failed: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Receiver:
        """Serve on a free port of 127.0.0.1 (:attr:`url`)."""
        receiver = self
        self.gate.set()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                receiver.gate.wait(30)
                self._answer(receiver.answer(self.path, dict(self.headers.items()), raw))

            def _answer(self, status: int) -> None:
                self.send_response(status)
                for name, value in receiver.answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True).start()
        return self

    @property
    def host(self) -> tuple[str, int]:
        """Its host and port, as ``--notification-token-host`` names it."""
        return ("127.0.0.1", self.http.server_port)

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> int:
        """The status of one try, recorded."""
        text = raw.decode("utf-8")
        with self._lock:
            self.tries.append(path)
            if self.status is not None:
                return self.status
            failed = self._failed.get(text, 0)
            if failed < self.fail_times:
                self._failed[text] = failed + 1
                return 503
            self.accepted.append(Received(path, headers, json.loads(text)))
            return 201

    def close(self) -> None:
        """Stop serving and close the port."""
        self.gate.set()
        self.http.shutdown()
        self.http.server_close()


class Trickler:
    """An endpoint that takes every request and trickles its answer, one byte at a time every
    ``pause`` seconds (a read timeout restarts at each byte), for ``seconds`` at most; counts
    the requests it took."""

    def __init__(self, pause: float = 0.2, seconds: float = 30.0) -> None:
        self.requests = 0
        self._stop = threading.Event()
        self._pause, self._seconds = pause, seconds
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        """The status line, then a header line after another, a byte at a time; after
        ``seconds`` the end of the headers (an answer that took that long)."""
        with connection:
            connection.recv(65536)
            self.requests += 1
            text = b"HTTP/1.1 201 Created\r\n" + b"X-Slow: 1\r\n" * int(self._seconds * 10)
            steps = int(self._seconds / self._pause)
            try:
                for byte in (text[index : index + 1] for index in range(steps)):
                    connection.sendall(byte)
                    if self._stop.wait(self._pause):
                        return
                connection.sendall(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._server.close()
