"""The daemon's HTTP endpoints, on one port, served by waitress.

- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 once a valid commit is loaded, else 503.
- ``GET /metrics``: Prometheus text format.
- ``GET /status``: JSON of the source (commit, last poll, a refused or held commit and why) and
  every runtime and module with state, reason, version and last commit.
- ``GET /``, ``GET /runtimes/NAME`` and ``GET /rollouts`` with ``Accept: text/html`` (a
  browser): the status page, HTML for people
  (:mod:`reconciler.daemon.page`), readable as ``/status`` is: without a secret.
- ``HEAD`` of each of these: the headers of ``GET`` without the body.
- ``POST /hooks/git``: a push webhook, GitHub (``X-Hub-Signature-256``, HMAC-SHA256 of the body)
  or GitLab (``X-Gitlab-Token``); starts a poll at once. Refused (403) without a secret.
- ``POST /sync``: ``reconciler sync --daemon URL`` asks for a reconcile now, with
  ``Authorization: Bearer <token>`` (``--api-token-file``; without it, the webhook secret);
  refused (403) without a token unless the daemon runs with
  ``allow_unauthenticated_sync``. ``?runtime=NAME`` for one runtime: 404 (with the closest name)
  for a runtime neither the commit in force nor the store knows, after one poll.
- ``POST /suspend?runtime=NAME&reason=TEXT`` and ``POST /resume?runtime=NAME``: ``reconciler
  suspend|resume --daemon URL``, authenticated as ``POST /sync``; 404 for an unknown runtime.
- ``GET /rollouts`` (``?id=ROLLOUT`` for one, with its runtimes; JSON unless ``Accept`` asks for
  ``text/html`` first: then the status page's rollouts page; ``Vary: Accept``) and ``POST
  /rollout?id=ROLLOUT&command=pause|resume|cancel|promote&reason=TEXT``: ``reconciler rollout
  --daemon URL``, the command authenticated as ``POST /sync``; 404 for an unknown rollout, 409
  for a command that does not apply (a halted rollout does not resume).

The port faces the network, so every request is bounded (:class:`HttpLimits`, served by
:mod:`reconciler.daemon.http_server`: a slow client holds a socket, never a thread; connections
are capped, and a flood of half-open ones cannot starve the probes); a body is refused (413)
from its Content-Length before it is read, a chunked body once it passes the limit; a request
whose headers and body do not arrive within the read timeout gets 408 and is closed. Every
error is a JSON document ``{"error": "..."}`` (the status page's 404 of an unknown runtime: an
HTML page saying so) and one log line, never a traceback. Secrets are
compared in constant time and never logged.

Callers: ``reconciler daemon``, tests.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from reconciler.core.diagnostics import did_you_mean
from reconciler.core.head import head_text
from reconciler.core.model import is_runtime_name
from reconciler.daemon.http_rollouts import rollout_command, rollouts_answer
from reconciler.daemon.http_server import MAX_BODY, HttpLimits, HttpServer, json_bytes, shown
from reconciler.daemon.page import HTML, HTML_HEADERS, ROLLOUTS, Pages, is_page, wants_html
from reconciler.daemon.service import Daemon
from reconciler.operations.model import Suspension

__all__ = ["MAX_BODY", "Endpoints", "HttpLimits", "HttpServer", "serve", "verify_webhook"]

log = logging.getLogger("reconciler.http")
GET_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/status", "/rollouts"})
#: ``/rollouts`` answers HTML or JSON by the request's ``Accept``.
VARY = ("Vary", "Accept")
POST_PATHS = frozenset({"/hooks/git", "/sync", "/suspend", "/resume", "/rollout"})


@dataclass(frozen=True, slots=True)
class Response:
    """What an endpoint answers; ``error`` is the message logged for a 4xx or 5xx."""

    status: int
    body: bytes
    kind: str = "application/json"
    error: str = ""
    allow: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of_json(cls, status: int, document: Any) -> Response:
        return cls(status, json_bytes(document))

    @classmethod
    def failure(cls, status: int, message: str, allow: str = "") -> Response:
        return cls(status, json_bytes({"error": message}), error=message, allow=allow)


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


class Endpoints:
    """The WSGI application: routes a request, answers every failure with JSON and a log line."""

    def __init__(
        self,
        daemon: Daemon,
        secret: bytes | None,
        allow_unauthenticated_sync: bool,
        max_body: int,
        api_token: bytes | None = None,
    ) -> None:
        self.daemon = daemon
        self.secret = secret or None
        #: The Bearer token of the commands (``/sync``, ``/suspend``, ``/resume``,
        #: ``/rollout``); without one of their own, the webhook secret.
        self.api_token = api_token or self.secret
        self.allow_unauthenticated_sync = allow_unauthenticated_sync
        self.max_body = max_body
        self.pages = Pages(daemon)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        response = self.respond(environ)
        headers = [("Content-Type", response.kind), ("Content-Length", str(len(response.body)))]
        if response.allow:
            headers.append(("Allow", response.allow))
        headers.extend(response.headers)
        start_response(f"{response.status} {HTTPStatus(response.status).phrase}", headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [response.body]

    def respond(self, environ: Mapping[str, Any]) -> Response:
        method = str(environ.get("REQUEST_METHOD", ""))
        path = str(environ.get("PATH_INFO", ""))
        where = f"{method} {shown(path)} from {environ.get('REMOTE_ADDR', '?')}"
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
            if method not in ("GET", "HEAD"):  # HEAD: the headers of GET, without the body
                return Response.failure(405, f"{path} answers GET and HEAD only", allow="GET, HEAD")
            if path == ROLLOUTS:
                return self._rollouts(environ)
            return self._get(path)
        if is_page(path):
            if method not in ("GET", "HEAD"):
                return Response.failure(
                    405, f"{shown(path)} answers GET and HEAD only", "GET, HEAD"
                )
            return self._page(path, str(environ.get("QUERY_STRING", "")))
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
            if path == "/rollout":
                return _answered(rollout_command(self.daemon, _query(environ)))
            return self._suspension(path, str(environ.get("QUERY_STRING", "")))
        return Response.failure(404, f"no such endpoint: {shown(path)}")

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

    def _rollouts(self, environ: Mapping[str, Any]) -> Response:
        """``/rollouts``: the page to a browser, JSON to the others; either way it varies with
        ``Accept`` (a cache keeps them apart)."""
        if wants_html(str(environ.get("HTTP_ACCEPT", ""))):
            page = self._page(ROLLOUTS, str(environ.get("QUERY_STRING", "")))
            return replace(page, headers=(*page.headers, VARY))
        answer = _answered(rollouts_answer(self.daemon, _query(environ)))
        return replace(answer, headers=(*answer.headers, VARY))

    def _page(self, path: str, query: str) -> Response:
        answer = self.pages.respond(path, query)
        extra = HTML_HEADERS if answer.kind == HTML else ()
        error = {404: "not found", 503: "the state store cannot be read"}.get(answer.status, "")
        return Response(answer.status, answer.body, answer.kind, error=error, headers=extra)

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
        self.daemon.ticks.poll_now()
        return Response.of_json(202, {"accepted": True})

    def _authorize(self, environ: Mapping[str, Any]) -> Response | None:
        """``None`` when the request carries the commands' token (``--api-token-file``, else
        the webhook secret) as Bearer token (or ``/sync`` is open to all), else the 403
        answer."""
        path = str(environ.get("PATH_INFO", ""))
        if path == "/sync" and self.allow_unauthenticated_sync:
            return None
        if self.api_token is None:
            opened = " or --allow-unauthenticated-sync" if path == "/sync" else ""
            return Response.failure(
                403,
                f"POST {path} is disabled: start the daemon with --api-token-file "
                f"(and call it with Authorization: Bearer <token>){opened}",
            )
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode()
        if not hmac.compare_digest(given, b"Bearer " + self.api_token):
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


def _query(environ: Mapping[str, Any]) -> dict[str, str]:
    """The first value of each parameter of the query string (bounded)."""
    parsed = parse_qs(str(environ.get("QUERY_STRING", ""))[:2000])
    return {name: values[0] for name, values in parsed.items()}


def _answered(answer: tuple[int, Any]) -> Response:
    """A handler's (status, document), an error when it carries one."""
    status, document = answer
    if status >= 400:
        return Response.failure(status, str(document["error"]))
    return Response.of_json(status, document)


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
    ticks = daemon.ticks
    safe = ticks.guarded(f"POST /sync ({runtime or 'every runtime'})", run, _next_poll(daemon))
    if ticks.scheduler is not None:
        ticks.scheduler.add_job(safe, id=job, replace_existing=True)
    else:
        threading.Thread(target=safe, name="sync", daemon=True).start()


def _next_poll(daemon: Daemon) -> Callable[[], str]:
    return lambda: f"at the next poll ({daemon.intervals.poll})"


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


def serve(
    daemon: Daemon,
    host: str,
    port: int,
    secret: bytes | None,
    *,
    allow_unauthenticated_sync: bool = False,
    limits: HttpLimits | None = None,
    api_token: bytes | None = None,
) -> HttpServer:
    """Start serving in a background thread; returns the server (``server_address`` has the
    port when 0 was asked). ``secret`` checks ``/hooks/git``; ``api_token`` the commands
    (without one, ``secret`` does)."""
    limits = limits or HttpLimits()
    app = Endpoints(daemon, secret, allow_unauthenticated_sync, limits.max_body, api_token)
    return HttpServer(app, host.strip("[]"), port, limits)
