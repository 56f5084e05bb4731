"""A JSON HTTP server on 127.0.0.1 that answers as a kube-apiserver does for the few requests a
test needs (the real adapter, with its real client, talks to it), and the kubeconfig that
reaches it; a server that counts the requests it gets (a host a commit names, which no render
may ask)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: (status, JSON body) for a method, a path and the request's JSON body.
Answer = tuple[int, dict[str, Any]]
Route = Callable[[str, str, dict[str, Any]], Answer]

NOT_FOUND: Answer = (404, {"kind": "Status", "code": 404, "reason": "NotFound"})


def serve_on_loopback(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """A server of ``handler`` on a free port of 127.0.0.1, serving in a thread; its URL."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, f"http://127.0.0.1:{http.server_port}"


def close_server(http: ThreadingHTTPServer) -> None:
    """Stop serving and close the port."""
    http.shutdown()
    http.server_close()


class JsonServer:
    """Serves ``route(method, path, body)`` until :meth:`close`; every request is kept in
    :attr:`requests` as ``METHOD path``."""

    def __init__(self, route: Route) -> None:
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                server.requests.append(f"{self.command} {self.path}")
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                status, answer = route(self.command, self.path.split("?")[0], body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _serve  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        self.http, self.url = serve_on_loopback(Handler)

    def close(self) -> None:
        """Stop serving and close the port."""
        close_server(self.http)


def write_kubeconfig(folder: Path, url: str) -> Path:
    """A kubeconfig file named ``k`` in ``folder`` reaching ``url`` with a token; ``folder``."""
    (folder / "k").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return folder


def discovery(path: str, groups: dict[str, list[dict[str, Any]]]) -> Answer | None:
    """The discovery answers of a server serving ``groups`` (group/version -> resources; the
    core group as ``v1``), or None for another path."""
    if path == "/version":
        return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.4"}
    if path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"]}
    if path == "/apis":
        named = [gv for gv in groups if "/" in gv]
        listed = [
            {
                "name": gv.split("/")[0],
                "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
            }
            for gv in named
        ]
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}
    for group_version, resources in groups.items():
        prefix = "/api/" if "/" not in group_version else "/apis/"
        if path == prefix + group_version:
            return 200, {
                "kind": "APIResourceList",
                "groupVersion": group_version,
                "resources": resources,
            }
    return None


class CountingServer:
    """An HTTP server on 127.0.0.1 that answers every GET with ``body`` (200) and keeps each
    request as ``(path, Authorization header or None)`` in :attr:`requests`: the stand-in for
    a host that a file of a commit names, and that nothing should ever ask."""

    def __init__(self, body: bytes = b"leaked: yes\n") -> None:
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http, self.url = serve_on_loopback(Handler)

    def close(self) -> None:
        """Stop serving and close the port."""
        close_server(self.http)
