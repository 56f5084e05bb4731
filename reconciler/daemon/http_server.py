"""The daemon's HTTP port: waitress, bounded so that no client can starve the probes.

Waitress reads requests on one event loop and hands only complete ones to a fixed pool of
threads, so a slow client holds a socket, never a thread. On top of waitress:

- **A deadline per request**: its headers and body must arrive within the read timeout, else
  408 and the connection is closed (a trickling client too, not only an idle one).
- **Room for new connections** (issue 23): when the port holds its limit of connections and
  another waits to be accepted, the oldest connection that has no request in service (idle, or
  a request still arriving: a half-open or slowloris client) is closed to make room, instead of
  leaving the new one in the kernel's queue until a deadline frees a slot. One client (an
  address) holds at most ``max_per_client`` connections; past it, its own oldest such
  connection is closed. A probe sends its request at once, so it is never the oldest.
- **Probes apart**: a complete ``GET``/``HEAD`` of ``/healthz`` or ``/readyz`` is served by a
  thread of its own, never queued behind slower requests on the handler threads.
- Waitress's own refusals as JSON documents and one log line, never a traceback.

Callers: :mod:`reconciler.daemon.http`.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher
from waitress.utilities import BadRequest

from reconciler.errors import AccessError

log = logging.getLogger("reconciler.http")
MAX_BODY = 1 << 20
#: Served by their own thread (:class:`_Server`): what kubelet asks.
PROBE_PATHS = frozenset({"/healthz", "/readyz"})


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds of the HTTP port: body bytes, seconds to receive a request (headers and body, and
    idle keep-alive), open connections (of all clients, of one address), handler threads,
    header bytes."""

    max_body: int = MAX_BODY
    read_timeout: int = 10
    max_connections: int = 100
    threads: int = 4
    max_header: int = 64 * 1024
    max_per_client: int = 20


class _RequestTimeout(BadRequest):
    code = 408
    reason = "Request Timeout"


_MESSAGES = {
    400: "bad request: {body}",
    408: "request not received in time: {body}",
    413: "body too large: more than {max_body} bytes",
    431: "request headers too large: more than {max_header} bytes",
    501: "Transfer-Encoding not supported (only chunked)",
}


def json_bytes(document: Any) -> bytes:
    """A JSON document as the port sends it."""
    import json

    return json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"


def shown(text: str) -> str:
    """A request's path as logged: bounded, control characters escaped."""
    return repr(text[:200])[1:-1]


class _JsonErrorTask(ErrorTask):
    """Waitress's own refusals (bad or too large Content-Length, bad chunks, too large headers,
    timeouts) as JSON and one log line."""

    def execute(self) -> None:
        request = cast(Any, self.request)
        error = request.error
        adj = self.channel.adj
        message = _MESSAGES.get(error.code, "{reason}").format(
            body=error.body,
            reason=error.reason,
            max_body=adj.max_request_body_size - 1,
            max_header=adj.max_request_header_size,
        )
        method = getattr(request, "command", "") or "-"
        path = shown(getattr(request, "path", "") or "-")
        log.warning("%s %s from %s: %d %s", method, path, self.channel.addr[0], error.code, message)
        body = json_bytes({"error": message})
        self.status = f"{error.code} {error.reason}"
        cast(list[tuple[str, str]], self.response_headers).append(
            ("Content-Type", "application/json")
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    """A connection whose request (headers and body) must arrive by ``read_deadline``."""

    error_task_class = _JsonErrorTask

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_deadline: float | None = self.creation_time + self.adj.channel_timeout
        cast(_Server, self.server).admit(self)

    def received(self, data: bytes) -> bool:
        if self.request is None and self.read_deadline is None:
            self.read_deadline = time.time() + self.adj.channel_timeout
        accepted = super().received(data)
        if self.request is None:  # nothing partial left: idle, under waitress's channel_timeout
            self.read_deadline = None
        return accepted

    def time_out(self, now: float) -> None:
        """Past the deadline with a request still partial: answer 408 and close."""
        channel = cast(Any, self)
        with channel.requests_lock:
            late = self.read_deadline is not None and now >= self.read_deadline
            if not late or self.requests or self.will_close or self.close_when_flushed:
                return
            request = self.request or self.parser_class(self.adj)
            request.error = _RequestTimeout(f"{self.adj.channel_timeout}s")
            request.completed = True
            self.request, self.read_deadline = None, None
            channel.requests.append(request)
        self.server.add_task(channel)

    @property
    def sheddable(self) -> bool:
        """No request in service or queued, nothing left to send, not closing already: idle,
        or a request still arriving."""
        channel = cast(Any, self)
        busy = channel.requests or channel.total_outbufs_len
        return not (busy or self.will_close or self.close_when_flushed or not self.connected)

    @property
    def probe_next(self) -> bool:
        """Whether the request to serve next is a probe (``GET``/``HEAD`` of a probe path)."""
        requests = cast(Any, self).requests
        if not requests or requests[0].error:
            return False
        request = requests[0]
        return request.command in ("GET", "HEAD") and request.path in PROBE_PATHS


def _oldest_sheddable(channels: list[_Channel]) -> _Channel | None:
    candidates = [c for c in channels if c.sheddable]
    return min(candidates, key=lambda c: c.creation_time) if candidates else None


def _waiting(listener: socket.socket) -> bool:
    """Whether a connection waits to be accepted."""
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    return bool(poller.poll(0))


class _Server(TcpWSGIServer):
    """Waitress's server that makes room for new connections (see the module docstring) and
    serves probes on a thread of their own."""

    channel_class = _Channel

    def __init__(self, *args: Any, limits: HttpLimits, **kwargs: Any) -> None:
        self.limits = limits
        self.shed = 0  # connections closed to make room since the last log line
        super().__init__(*args, **kwargs)
        self.probes = ThreadedTaskDispatcher()
        self.probes.set_thread_count(1)

    def _channels(self) -> list[_Channel]:
        active = cast(dict[int, Any], self.active_channels)
        return [c for c in list(active.values()) if isinstance(c, _Channel)]

    def readable(self) -> bool:
        """Accept while under the limit; at it, when a connection waits, make room for it."""
        server = cast(Any, self)
        now = time.time()
        if now >= server.next_channel_cleanup:
            server.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        if not self.accepting:
            return False
        channels = self._channels()
        staying = [c for c in channels if not c.will_close]
        if len(staying) < self.limits.max_connections:
            return len(channels) < self.limits.max_connections + 2  # those closing: a ceiling
        if not _waiting(cast(socket.socket, self.socket)):
            return False
        victim = _oldest_sheddable(staying)
        if victim is None:  # every connection has a request in service: the new one waits
            return False
        self._shed(victim)
        return True

    def admit(self, new: _Channel) -> None:
        """A client past its share of connections: close its oldest one without a request in
        service (the new one when there is none)."""
        address = new.addr[0] if new.addr else ""
        same = [
            c
            for c in self._channels()
            if c is not new and not c.will_close and c.addr and c.addr[0] == address
        ]
        if len(same) < self.limits.max_per_client:
            return
        self._shed(_oldest_sheddable(same) or new)

    def _shed(self, channel: _Channel) -> None:
        """Close ``channel`` from its own next turn of the loop (closed here, its descriptor
        could be reused by the connection accepted next while the loop still holds an event
        of the old one)."""
        self.shed += 1
        channel.will_close = True

    def add_task(self, task: Any) -> None:
        """A probe to the probe thread, anything else to the handler threads."""
        if isinstance(task, _Channel) and task.probe_next:
            self.probes.add_task(cast(Any, task))
        else:
            super().add_task(task)

    def maintenance(self, now: float) -> None:
        for channel in self._channels():
            channel.time_out(now)  # first: a late request gets its 408 before closing
        super().maintenance(cast(int, now))  # waitress passes time.time()
        if self.shed:
            log.warning(
                "HTTP port full: closed %d idle or unfinished connection(s), oldest first, to "
                "accept new ones (limits: %d open, %d per client address)",
                self.shed,
                self.limits.max_connections,
                self.limits.max_per_client,
            )
            self.shed = 0


class _OneLine(logging.Filter):
    """Waitress's rare internal errors as one line, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class HttpServer:
    """A WSGI application served on its own thread until :meth:`shutdown`."""

    def __init__(self, app: Any, host: str, port: int, limits: HttpLimits) -> None:
        for name in ("waitress", "waitress.queue"):
            logger = logging.getLogger(name)
            if not any(isinstance(f, _OneLine) for f in logger.filters):
                logger.addFilter(_OneLine())
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "queue depth" under load
        self._map: dict[int, Any] = {}
        try:
            self._server = _Server(
                app,
                limits=limits,
                map=self._map,
                host=host,
                port=port,
                threads=limits.threads,
                # a ceiling only: _Server makes room below it (+ the listener, the waker, 2 closing)
                connection_limit=limits.max_connections + 4,
                channel_timeout=limits.read_timeout,
                cleanup_interval=1,
                max_request_header_size=limits.max_header,
                max_request_body_size=limits.max_body + 1,  # waitress refuses at >=
                ident="reconciler",
                log_socket_errors=False,
                expose_tracebacks=False,
                asyncore_use_poll=True,
            )
        except (OSError, ValueError) as error:
            raise AccessError(f"cannot listen on {host}:{port}: {error}") from error
        bound = cast(Any, self._server)
        self.server_address = (str(bound.effective_host), int(bound.effective_port))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="http", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            wasyncore.loop(timeout=1.0, use_poll=True, map=self._map, count=1)

    def shutdown(self) -> None:
        """Stop serving (the loop thread ends within a second)."""
        self._stop.set()
        self._server.pull_trigger()
        self._thread.join(timeout=5)

    def server_close(self) -> None:
        """Close the port and every connection; stop the handler and probe threads."""
        self._server.task_dispatcher.shutdown(timeout=5)
        self._server.probes.shutdown(timeout=5)
        wasyncore.close_all(self._map)
