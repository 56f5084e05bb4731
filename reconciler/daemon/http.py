"""The daemon's HTTP endpoints, on one port, served by waitress.

- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 once a valid commit is loaded, else 503.
- ``GET /metrics``: Prometheus text format.
- ``GET /status``: JSON of the source (commit, last poll, a refused or held commit and why) and
  every runtime and module with state, reason, version and last commit.
- ``POST /hooks/git``: a push webhook, GitHub (``X-Hub-Signature-256``, HMAC-SHA256 of the body)
  or GitLab (``X-Gitlab-Token``); starts a poll at once. Refused (403) without a secret.
- ``POST /sync``: ``reconciler sync --daemon URL`` asks for a reconcile now, with
  ``Authorization: Bearer <secret>``; refused (403) without a secret unless the daemon runs with
  ``allow_unauthenticated_sync``. ``?runtime=NAME`` for one runtime: 404 (with the closest name)
  for a runtime neither the commit in force nor the store knows, after one poll.
- ``POST /suspend?runtime=NAME&reason=TEXT`` and ``POST /resume?runtime=NAME``: ``reconciler
  suspend|resume --daemon URL``, authenticated as ``POST /sync``; 404 for an unknown runtime.

The port faces the network, so every request is bounded (:class:`HttpLimits`): waitress reads
requests on one event loop and hands only complete ones to a fixed pool of threads, so a slow
client holds a socket, never a thread; connections are capped; a body is refused (413) from its
Content-Length before it is read, a chunked body once it passes the limit; a request whose
headers and body do not arrive within the read timeout gets 408 and is closed. Every error is a
JSON document ``{"error": "..."}`` and one log line, never a traceback. Secrets are compared in
constant time and never logged.

Callers: ``reconciler daemon``, tests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qs

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import BadRequest

from reconciler.core.diagnostics import did_you_mean
from reconciler.core.head import head_text
from reconciler.core.model import is_runtime_name
from reconciler.daemon.service import Daemon, poll_now
from reconciler.errors import AccessError
from reconciler.operations.model import Suspension

log = logging.getLogger("reconciler.http")
MAX_BODY = 1 << 20
GET_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/status"})
POST_PATHS = frozenset({"/hooks/git", "/sync", "/suspend", "/resume"})


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds of the HTTP port: body bytes, seconds to receive a request (headers and body, and
    idle keep-alive), open connections, handler threads, header bytes."""

    max_body: int = MAX_BODY
    read_timeout: int = 10
    max_connections: int = 100
    threads: int = 4
    max_header: int = 64 * 1024


@dataclass(frozen=True, slots=True)
class Response:
    """What an endpoint answers; ``error`` is the message logged for a 4xx or 5xx."""

    status: int
    body: bytes
    kind: str = "application/json"
    error: str = ""
    allow: str = ""

    @classmethod
    def of_json(cls, status: int, document: Any) -> Response:
        return cls(status, _json_bytes(document))

    @classmethod
    def failure(cls, status: int, message: str, allow: str = "") -> Response:
        return cls(status, _json_bytes({"error": message}), error=message, allow=allow)


def _json_bytes(document: Any) -> bytes:
    return json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"


def verify_webhook(secret: bytes, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a webhook carries a valid GitHub signature or GitLab token for ``secret``
    (compared in constant time)."""
    signature = headers.get("X-Hub-Signature-256")
    if signature:
        expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(signature.encode(), expected.encode())
    token = headers.get("X-Gitlab-Token")
    if token:
        return hmac.compare_digest(token.encode(), secret)
    return False


def _shown(text: str) -> str:
    """A request's path as logged: bounded, control characters escaped."""
    return repr(text[:200])[1:-1]


class Endpoints:
    """The WSGI application: routes a request, answers every failure with JSON and a log line."""

    def __init__(
        self, daemon: Daemon, secret: bytes | None, allow_unauthenticated_sync: bool, max_body: int
    ) -> None:
        self.daemon = daemon
        self.secret = secret or None
        self.allow_unauthenticated_sync = allow_unauthenticated_sync
        self.max_body = max_body

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        response = self.respond(environ)
        headers = [("Content-Type", response.kind), ("Content-Length", str(len(response.body)))]
        if response.allow:
            headers.append(("Allow", response.allow))
        start_response(f"{response.status} {HTTPStatus(response.status).phrase}", headers)
        return [response.body]

    def respond(self, environ: Mapping[str, Any]) -> Response:
        method = str(environ.get("REQUEST_METHOD", ""))
        path = str(environ.get("PATH_INFO", ""))
        where = f"{method} {_shown(path)} from {environ.get('REMOTE_ADDR', '?')}"
        try:
            response = self._route(method, path, environ)
        except Exception as error:  # a handler's bug: 500 and one line, never a traceback
            log.error("%s: 500 %s: %s", where, type(error).__name__, error)
            return Response.failure(500, "internal error; the daemon's log has the reason")
        if response.error:  # a refusal (a 503 of /readyz is an answer, not an error)
            log.warning("%s: %d %s", where, response.status, response.error)
        return response

    def _route(self, method: str, path: str, environ: Mapping[str, Any]) -> Response:
        if path in GET_PATHS:
            if method != "GET":
                return Response.failure(405, f"{path} answers GET only", allow="GET")
            return self._get(path)
        if path in POST_PATHS:
            if method != "POST":
                return Response.failure(405, f"{path} answers POST only", allow="POST")
            body = _read_body(environ, self.max_body)
            if isinstance(body, Response):
                return body
            if path == "/hooks/git":
                return self._hook(environ, body)
            refused = self._authorize(environ)
            if refused is not None:
                return refused
            if path == "/sync":
                return self._sync(environ)
            return self._suspension(path, str(environ.get("QUERY_STRING", "")))
        return Response.failure(404, f"no such endpoint: {_shown(path)}")

    def _get(self, path: str) -> Response:
        daemon = self.daemon
        if path == "/healthz":
            return Response.of_json(200, {"status": "ok"})
        if path == "/readyz":
            ready, commit = daemon.ready, head_text(daemon.state.commit)
            return Response.of_json(200 if ready else 503, {"ready": ready, "commit": commit})
        if path == "/metrics":
            return Response(200, daemon.metrics.exposition(), "text/plain; version=0.0.4")
        return Response.of_json(200, daemon.status())

    def _hook(self, environ: Mapping[str, Any], body: bytes) -> Response:
        if self.secret is None:
            return Response.failure(
                403, "webhooks are disabled: the daemon has no --webhook-secret-file"
            )
        headers = {
            "X-Hub-Signature-256": str(environ.get("HTTP_X_HUB_SIGNATURE_256", "")),
            "X-Gitlab-Token": str(environ.get("HTTP_X_GITLAB_TOKEN", "")),
        }
        if not verify_webhook(self.secret, headers, body):
            return Response.failure(403, "missing or wrong signature")
        poll_now(self.daemon)
        return Response.of_json(202, {"accepted": True})

    def _authorize(self, environ: Mapping[str, Any]) -> Response | None:
        """``None`` when the request carries the webhook secret as Bearer token (or
        ``/sync`` is open to all), else the 403 answer."""
        path = str(environ.get("PATH_INFO", ""))
        if path == "/sync" and self.allow_unauthenticated_sync:
            return None
        if self.secret is None:
            opened = " or --allow-unauthenticated-sync" if path == "/sync" else ""
            return Response.failure(
                403,
                f"POST {path} is disabled: start the daemon with --webhook-secret-file "
                f"(and call it with Authorization: Bearer <secret>){opened}",
            )
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode()
        if not hmac.compare_digest(given, b"Bearer " + self.secret):
            return Response.failure(403, "missing or wrong token")
        return None

    def _sync(self, environ: Mapping[str, Any]) -> Response:
        runtime = _runtime_asked(str(environ.get("QUERY_STRING", "")))
        if runtime == "":
            return Response.failure(400, "?runtime= needs a runtime name (a DNS-1123 label)")
        if runtime is not None:
            unknown = self._unknown(runtime, poll=True)
            if unknown is not None:
                return unknown
        sync_now(self.daemon, runtime)
        requested = self.daemon.clock().isoformat()
        return Response.of_json(202, {"accepted": True, "runtime": runtime, "requested": requested})

    def _unknown(self, runtime: str, *, poll: bool = False) -> Response | None:
        """404 with the closest name when the daemon knows no ``runtime`` (in the commit in
        force or the store; with ``poll``, after one poll: it may have been pushed just now)."""
        if runtime in self.daemon.fleet():
            return None
        if poll:
            self.daemon.poll()
        known = self.daemon.fleet()
        if runtime in known:
            return None
        return Response.failure(
            404,
            f"runtime '{runtime}' is not in the commit in force nor in the state store"
            + did_you_mean(runtime, known),
        )

    def _suspension(self, path: str, query: str) -> Response:
        """``POST /suspend`` or ``POST /resume`` of ``?runtime=``, recorded in the store."""
        runtime = _runtime_asked(query)
        if not runtime:
            return Response.failure(400, "?runtime= needs a runtime name (a DNS-1123 label)")
        unknown = self._unknown(runtime)
        if unknown is not None:
            return unknown
        store = self.daemon.store
        if path == "/resume":
            return Response.of_json(200, {"runtime": runtime, "resumed": store.resume(runtime)})
        reason = " ".join(parse_qs(query[:2000]).get("reason", [""])[0].split())[:500]
        store.suspend(Suspension(runtime, self.daemon.clock(), reason))
        log.info("runtime %s: suspended: %s", runtime, reason, extra={"runtime": runtime})
        return Response.of_json(200, {"runtime": runtime, "suspended": True, "reason": reason})


def _runtime_asked(query: str) -> str | None:
    """The runtime of ``POST /sync?runtime=NAME`` (None: every runtime; "" when not a name)."""
    names = parse_qs(query[:300]).get("runtime")
    if not names:
        return None
    return names[0] if is_runtime_name(names[0]) else ""


def sync_now(daemon: Daemon, runtime: str | None = None) -> None:
    """Poll, then reconcile every runtime (or ``runtime``) on the commit in force, in the
    background: one job however often asked. In this order: a reconcile started before the poll
    would run the old commit, and the new commit's reconcile of that runtime would be merged
    into it (lost)."""

    def run() -> None:
        daemon.poll()
        if runtime is None:
            daemon.reconcile_all()
        else:
            daemon.submit(runtime, newer_commit=True)

    job = "sync" if runtime is None else f"sync-{runtime}"
    if daemon.scheduler is not None:
        daemon.scheduler.add_job(run, id=job, replace_existing=True)
    else:
        threading.Thread(target=run, name="sync", daemon=True).start()


def _read_body(environ: Mapping[str, Any], max_body: int) -> bytes | Response:
    """The body of a POST, after its Content-Length is checked (waitress has refused a bad or
    too large one already, and decoded and bounded a chunked one; checked again here)."""
    text = environ.get("CONTENT_LENGTH")
    if not text:
        return Response.failure(411, "a POST needs a Content-Length header")
    if not (text.isascii() and text.isdigit()):
        return Response.failure(400, "Content-Length must be a non-negative integer")
    length = int(text)
    if length > max_body:
        return Response.failure(413, f"body too large: more than {max_body} bytes")
    return bytes(environ["wsgi.input"].read(length))


# -- the server: waitress with JSON errors and a deadline per request ----------------------------


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
        path = _shown(getattr(request, "path", "") or "-")
        log.warning("%s %s from %s: %d %s", method, path, self.channel.addr[0], error.code, message)
        body = _json_bytes({"error": message})
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


class _Server(TcpWSGIServer):
    channel_class = _Channel

    def maintenance(self, now: float) -> None:
        for channel in list(cast(dict[int, Any], self.active_channels).values()):
            if isinstance(channel, _Channel):
                channel.time_out(now)  # first: a late request gets its 408 before closing
        super().maintenance(cast(int, now))  # waitress passes time.time()


class _OneLine(logging.Filter):
    """Waitress's rare internal errors as one line, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class HttpServer:
    """The endpoints served on their own thread until :meth:`shutdown`."""

    def __init__(self, app: Endpoints, host: str, port: int, limits: HttpLimits) -> None:
        for name in ("waitress", "waitress.queue"):
            logger = logging.getLogger(name)
            if not any(isinstance(f, _OneLine) for f in logger.filters):
                logger.addFilter(_OneLine())
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "queue depth" under load
        self._map: dict[int, Any] = {}
        try:
            self._server = _Server(
                app,
                map=self._map,
                host=host,
                port=port,
                threads=limits.threads,
                connection_limit=limits.max_connections + 2,  # + the listener and the waker
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
        """Close the port and every connection; stop the handler threads."""
        self._server.task_dispatcher.shutdown(timeout=5)
        wasyncore.close_all(self._map)


def serve(
    daemon: Daemon,
    host: str,
    port: int,
    secret: bytes | None,
    *,
    allow_unauthenticated_sync: bool = False,
    limits: HttpLimits | None = None,
) -> HttpServer:
    """Start serving in a background thread; returns the server (``server_address`` has the
    port when 0 was asked)."""
    limits = limits or HttpLimits()
    app = Endpoints(daemon, secret, allow_unauthenticated_sync, limits.max_body)
    return HttpServer(app, host.strip("[]"), port, limits)
