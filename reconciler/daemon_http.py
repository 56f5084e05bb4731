"""The daemon's HTTP endpoints, on one port (standard library server, one thread per request).

- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 once a valid commit is loaded, else 503.
- ``GET /metrics``: Prometheus text format.
- ``GET /status``: JSON of the source (commit, last poll, a refused or held commit and why) and
  every runtime and module with state, reason, version and last commit.
- ``POST /hooks/git``: a push webhook, GitHub (``X-Hub-Signature-256``, HMAC-SHA256 of the body)
  or GitLab (``X-Gitlab-Token``); starts a poll at once. Refused without a configured secret.
- ``POST /sync``: ``reconciler sync --daemon URL`` asks for a reconcile now
  (``Authorization: Bearer <secret>`` when a secret is configured).

Callers: ``reconciler daemon``, tests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reconciler.daemon import Daemon, poll_now

log = logging.getLogger("reconciler.http")
MAX_BODY = 1 << 20


def verify_webhook(secret: bytes, headers: Any, body: bytes) -> bool:
    """Whether a webhook carries a valid GitHub signature or GitLab token for ``secret``."""
    signature = headers.get("X-Hub-Signature-256")
    if signature:
        expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(signature.encode(), expected.encode())
    token = headers.get("X-Gitlab-Token")
    if token:
        return hmac.compare_digest(token.encode(), secret)
    return False


def serve(daemon: Daemon, host: str, port: int, secret: bytes | None) -> ThreadingHTTPServer:
    """Start serving in a background thread; returns the server (``server_address`` has the
    port when 0 was asked)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "reconciler"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, document: Any) -> None:
            self._send(status, json.dumps(document, indent=2, sort_keys=True).encode() + b"\n")

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._json(200, {"status": "ok"})
            elif path == "/readyz":
                ready = daemon.ready
                self._json(200 if ready else 503, {"ready": ready, "commit": daemon.state.commit})
            elif path == "/metrics":
                self._send(200, daemon.metrics.exposition(), "text/plain; version=0.0.4")
            elif path == "/status":
                self._json(200, daemon.status())
            else:
                self._json(404, {"error": f"no such endpoint: {path}"})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._json(413, {"error": "body too large"})
                return
            body = self.rfile.read(length)
            if path == "/hooks/git":
                if secret is None or not verify_webhook(secret, self.headers, body):
                    self._json(403, {"error": "missing or wrong signature"})
                    return
                poll_now(daemon)
                self._json(202, {"accepted": True})
            elif path == "/sync":
                given = self.headers.get("Authorization", "")
                if secret is not None and not hmac.compare_digest(
                    given.encode(), b"Bearer " + secret
                ):
                    self._json(403, {"error": "missing or wrong token"})
                    return
                poll_now(daemon)
                threading.Thread(target=daemon.reconcile_all, daemon=True).start()
                self._json(202, {"accepted": True})
            else:
                self._json(404, {"error": f"no such endpoint: {path}"})

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
